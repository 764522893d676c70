// Context-local storage destructors (private table c693336e), through the built
// libcuda.so.1. Measured on a 580 driver: they run when the context is torn down
// (cuCtxDestroy, primary release to zero, primary reset), newest entry first, with that
// context current on the calling thread; the entries are gone afterwards; delete never calls
// a destructor. The contexts concern tells the store through
// darkapi::context_local_storage_context_destroyed() (sim/darkapi/context_local_storage.h).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "darkapi_test_util.h"

using namespace darkapi_test;

using ClsPut = CUresult (*)(CUcontext, void*, void*, void (*)(CUcontext, void*, void*));
using ClsDelete = CUresult (*)(CUcontext, void*);
using ClsGet = CUresult (*)(void**, CUcontext, void*);

namespace {
struct DestructorLog {
  std::vector<std::pair<void*, void*>> calls;  // key, value
  std::vector<CUcontext> current_inside;
};
DestructorLog g_log;
void record_destructor(CUcontext, void* key, void* value) {
  g_log.calls.emplace_back(key, value);
  CUcontext cur = nullptr;
  cuCtxGetCurrent(&cur);
  g_log.current_inside.push_back(cur);
}
// A destructor that calls back into the store: no lock may be held while it runs.
CUresult g_reentrant_rc = CUDA_SUCCESS;
void reentrant_destructor(CUcontext ctx, void*, void*) {
  static int other;
  void* v = nullptr;
  g_reentrant_rc = slot<ClsGet>("c693336e", 2)(&v, ctx, &other);
}
}  // namespace

TEST(DarkApiCls, DestructorsRunWhenTheContextGoes) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  auto put = slot<ClsPut>("c693336e", 0);
  auto del = slot<ClsDelete>("c693336e", 1);
  auto get = slot<ClsGet>("c693336e", 2);
  static int k1, k2, k3;

  // cuCtxDestroy
  g_log = {};
  CUcontext created = nullptr;
  ASSERT_EQ(cuCtxCreate(&created, nullptr, 0, 2), CUDA_SUCCESS);
  ASSERT_EQ(put(created, &k1, reinterpret_cast<void*>(0x11), record_destructor), CUDA_SUCCESS);
  ASSERT_EQ(put(created, &k2, reinterpret_cast<void*>(0x22), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(put(created, &k3, reinterpret_cast<void*>(0x33), record_destructor), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(created), CUDA_SUCCESS);
  ASSERT_EQ(g_log.calls.size(), 2u);
  EXPECT_EQ(g_log.calls[0], std::make_pair(static_cast<void*>(&k3), reinterpret_cast<void*>(0x33)));
  EXPECT_EQ(g_log.calls[1], std::make_pair(static_cast<void*>(&k1), reinterpret_cast<void*>(0x11)));
  EXPECT_EQ(g_log.current_inside, (std::vector<CUcontext>{created, created}));

  // Primary release to zero: entries go, destructors run; a second retain starts empty.
  g_log = {};
  CUcontext primary = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, 1), CUDA_SUCCESS);
  ASSERT_EQ(put(primary, &k1, reinterpret_cast<void*>(0x44), record_destructor), CUDA_SUCCESS);
  ASSERT_EQ(put(primary, &k2, reinterpret_cast<void*>(0x55), record_destructor), CUDA_SUCCESS);
  ASSERT_EQ(del(primary, &k2), CUDA_SUCCESS);
  EXPECT_TRUE(g_log.calls.empty()) << "delete calls no destructor";
  ASSERT_EQ(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  ASSERT_EQ(g_log.calls.size(), 1u);
  EXPECT_EQ(g_log.current_inside.at(0), primary);
  void* v = nullptr;
  EXPECT_EQ(get(&v, primary, &k1), CUDA_ERROR_INVALID_HANDLE);

  // Primary reset.
  g_log = {};
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, 1), CUDA_SUCCESS);
  ASSERT_EQ(put(primary, &k1, reinterpret_cast<void*>(0x66), record_destructor), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxReset(1), CUDA_SUCCESS);
  ASSERT_EQ(g_log.calls.size(), 1u);
  EXPECT_EQ(get(&v, primary, &k1), CUDA_ERROR_INVALID_HANDLE);
  CUcontext cur = reinterpret_cast<CUcontext>(0x1);
  EXPECT_EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, nullptr) << "the destructors' context is not left current";

  // A destructor may call the store again without a deadlock.
  static int k4;
  g_reentrant_rc = CUDA_SUCCESS;
  CUcontext again = nullptr;
  ASSERT_EQ(cuCtxCreate(&again, nullptr, 0, 2), CUDA_SUCCESS);
  ASSERT_EQ(put(again, &k4, nullptr, reentrant_destructor), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(again), CUDA_SUCCESS);
  EXPECT_NE(g_reentrant_rc, CUDA_SUCCESS) << "the entries were already gone";
}
