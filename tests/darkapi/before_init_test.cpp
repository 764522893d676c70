// The private tables before cuInit: cudart fetches one of them before it initializes the
// driver, and the real driver serves them all then (measured). Slots that need devices answer
// CUDA_ERROR_NOT_INITIALIZED until cuInit; the constant answers of the integrity check do not
// need it. Its own process: nothing may call cuInit first.
#include <gtest/gtest.h>

#include "darkapi_test_util.h"

using namespace darkapi_test;

TEST(DarkApiBeforeInit, TablesAreServedAndDeviceSlotsWaitForInit) {
  for (const Expected& e : expected_tables()) {
    const void* const* t = nullptr;
    EXPECT_EQ(lookup(e.uuid, &t), CUDA_SUCCESS) << e.name;
    EXPECT_NE(t, nullptr) << e.name;
  }
  using IntegrityFn = CUresult (*)(uint32_t, uint64_t, uint64_t*);
  auto check = slot<IntegrityFn>("d4082055", 1);
  uint64_t out[2] = {0, 0};
  EXPECT_EQ(check(13000, 5, out), CUDA_SUCCESS);
  EXPECT_EQ(out[0], 0x3341181c03cb675cull);
  EXPECT_EQ(check(13002, 5, out), CUDA_ERROR_NOT_INITIALIZED);

  CUcontext ctx = nullptr;
  EXPECT_EQ(slot<CUresult (*)(CUcontext*, CUdevice)>("6bd5fb6c", 2)(&ctx, 0), CUDA_ERROR_NOT_INITIALIZED);
  static int key;
  void* v = nullptr;
  EXPECT_EQ(slot<CUresult (*)(void**, CUcontext, void*)>("c693336e", 2)(&v, nullptr, &key),
            CUDA_ERROR_NOT_INITIALIZED);

  // The same tables after cuInit.
  const void* const* before = nullptr;
  ASSERT_EQ(lookup(expected("6bd5fb6c").uuid, &before), CUDA_SUCCESS);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  const void* const* after = nullptr;
  ASSERT_EQ(lookup(expected("6bd5fb6c").uuid, &after), CUDA_SUCCESS);
  EXPECT_EQ(before, after);
  EXPECT_EQ(check(13002, 5, out), CUDA_SUCCESS);
}
