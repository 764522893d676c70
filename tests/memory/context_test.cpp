// Contexts of the sim backend through the driver ABI: primary contexts, created contexts, the
// per-thread stack, bad handles, limits, peer access, and the context's own memory charge.
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

class Contexts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
  void TearDown() override {
    // Leave no context current for the next test.
    CUcontext c;
    while (cuCtxPopCurrent(&c) == CUDA_SUCCESS) {}
  }
};

TEST_F(Contexts, NewThreadHasNoCurrentContext) {
  std::thread t([] {
    CUcontext c = reinterpret_cast<CUcontext>(1);
    EXPECT_EQ(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    EXPECT_EQ(c, nullptr);
    CUdevice d;
    EXPECT_EQ(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    size_t f, tot;
    EXPECT_EQ(cuMemGetInfo(&f, &tot), CUDA_ERROR_INVALID_CONTEXT);
    CUdeviceptr p;
    EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  });
  t.join();
}

TEST_F(Contexts, EachThreadHasItsOwnCurrentContext) {
  int n = 0;
  ASSERT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  ASSERT_GE(n, 2);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([i, n, &good] {
      const int dev = i % n;
      CUcontext ctx;
      if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return;
      if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return;
      for (int k = 0; k < 200; ++k) {
        CUdevice d = -1;
        CUcontext cur = nullptr;
        if (cuCtxGetDevice(&d) != CUDA_SUCCESS || d != dev) return;
        if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx) return;
        std::this_thread::yield();
      }
      cuCtxSetCurrent(nullptr);
      if (cuDevicePrimaryCtxRelease(dev) != CUDA_SUCCESS) return;
      ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 16);
}

TEST_F(Contexts, PrimaryRetainReleaseReset) {
  const CUdevice dev = 3;
  unsigned flags = 99;
  int active = 7;
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0);
  CUcontext a, b;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&a, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&b, dev), CUDA_SUCCESS);
  EXPECT_EQ(a, b);  // one primary context per device
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);
  EXPECT_EQ(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_BLOCKING_SYNC));
  EXPECT_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);  // still one reference
  EXPECT_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_ERROR_INVALID_CONTEXT);  // nothing to release

  // Reset frees the context's memory and deactivates it; the handle comes back on retain.
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&a, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxPushCurrent(a), CUDA_SUCCESS);
  size_t free0, total;
  ASSERT_EQ(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  CUdeviceptr p;
  ASSERT_EQ(cuMemAlloc(&p, 64 << 20), CUDA_SUCCESS);
  size_t free1;
  ASSERT_EQ(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free0 - free1, 64u << 20);
  EXPECT_EQ(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);  // freed by the reset
  EXPECT_EQ(cuMemGetInfo(&free1, &total), CUDA_ERROR_INVALID_CONTEXT);  // inactive
  CUcontext again;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&again, dev), CUDA_SUCCESS);
  EXPECT_EQ(again, a);
  ASSERT_EQ(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free1, free0);  // everything given back
  EXPECT_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
}

TEST_F(Contexts, ContextOverheadChargedOnceAndGivenBack) {
  const CUdevice dev = 5;
  size_t total = 0;
  ASSERT_EQ(cuDeviceTotalMem(&total, dev), CUDA_SUCCESS);
  CUcontext c1, c2;
  ASSERT_EQ(cuCtxCreate(&c1, nullptr, 0, dev), CUDA_SUCCESS);
  size_t f1, t1;
  ASSERT_EQ(cuMemGetInfo(&f1, &t1), CUDA_SUCCESS);
  EXPECT_EQ(t1, total);
  EXPECT_LT(f1, total);
  ASSERT_EQ(cuCtxCreate(&c2, nullptr, 0, dev), CUDA_SUCCESS);
  size_t f2, t2;
  ASSERT_EQ(cuMemGetInfo(&f2, &t2), CUDA_SUCCESS);
  EXPECT_EQ(f2, f1);  // only the first context pays
  EXPECT_EQ(cuCtxDestroy(c2), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDestroy(c1), CUDA_SUCCESS);
  // Another context sees the device whole again, minus one overhead.
  ASSERT_EQ(cuCtxCreate(&c1, nullptr, 0, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&f2, &t2), CUDA_SUCCESS);
  EXPECT_EQ(f2, f1);
  EXPECT_EQ(cuCtxDestroy(c1), CUDA_SUCCESS);
}

TEST_F(Contexts, CreatePushPopDestroy) {
  CUcontext a, b, got;
  ASSERT_EQ(cuCtxCreate(&a, nullptr, 0, 0), CUDA_SUCCESS);  // pushed
  ASSERT_EQ(cuCtxCreate(&b, nullptr, 0, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetCurrent(&got), CUDA_SUCCESS);
  EXPECT_EQ(got, b);
  CUdevice d;
  ASSERT_EQ(cuCtxGetDevice(&d), CUDA_SUCCESS);
  EXPECT_EQ(d, 1);
  ASSERT_EQ(cuCtxGetDevice_v2(&d, a), CUDA_SUCCESS);
  EXPECT_EQ(d, 0);
  ASSERT_EQ(cuCtxPopCurrent(&got), CUDA_SUCCESS);
  EXPECT_EQ(got, b);
  ASSERT_EQ(cuCtxGetCurrent(&got), CUDA_SUCCESS);
  EXPECT_EQ(got, a);
  ASSERT_EQ(cuCtxPushCurrent(b), CUDA_SUCCESS);
  unsigned long long ida = 0, idb = 0;
  ASSERT_EQ(cuCtxGetId(a, &ida), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetId(b, &idb), CUDA_SUCCESS);
  EXPECT_NE(ida, idb);
  EXPECT_EQ(cuCtxDestroy(b), CUDA_SUCCESS);  // current: popped too
  ASSERT_EQ(cuCtxGetCurrent(&got), CUDA_SUCCESS);
  EXPECT_EQ(got, a);
  // A destroyed handle is an error everywhere, never a crash.
  EXPECT_EQ(cuCtxDestroy(b), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxPushCurrent(b), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxSetCurrent(b), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxGetDevice_v2(&d, b), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxGetId(b, &idb), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxPopCurrent(&got), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(Contexts, BadInput) {
  CUcontext c;
  EXPECT_EQ(cuCtxCreate(nullptr, nullptr, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxCreate(&c, nullptr, 0, 999), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuCtxCreate(&c, nullptr, 0x10000, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&c, -1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDevicePrimaryCtxRetain(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxPushCurrent(reinterpret_cast<CUcontext>(0x1234)), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxPushCurrent(nullptr), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxDestroy(reinterpret_cast<CUcontext>(0x1234)), CUDA_ERROR_INVALID_CONTEXT);
  // A primary context is released, never destroyed.
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDestroy(c), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxGetFlags(nullptr), CUDA_ERROR_INVALID_VALUE);
  unsigned f;
  EXPECT_EQ(cuCtxGetFlags(&f), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(Contexts, LimitsConfigsAndPriorities) {
  CUcontext c;
  ASSERT_EQ(cuCtxCreate(&c, nullptr, CU_CTX_SCHED_SPIN, 0), CUDA_SUCCESS);
  size_t v = 0;
  ASSERT_EQ(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(v, 1024u);
  ASSERT_EQ(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(v, 1u << 20);
  ASSERT_EQ(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(v, 8u << 20);
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(v, 64u << 20);
  EXPECT_EQ(cuCtxGetLimit(&v, static_cast<CUlimit>(0x99)), CUDA_ERROR_UNSUPPORTED_LIMIT);
  unsigned flags;
  ASSERT_EQ(cuCtxGetFlags(&flags), CUDA_SUCCESS);
  EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_SPIN));
  CUfunc_cache cc;
  ASSERT_EQ(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_L1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetCacheConfig(&cc), CUDA_SUCCESS);
  EXPECT_EQ(cc, CU_FUNC_CACHE_PREFER_L1);
  int least = 9, greatest = 9;
  ASSERT_EQ(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  unsigned api = 0;
  ASSERT_EQ(cuCtxGetApiVersion(c, &api), CUDA_SUCCESS);
  EXPECT_GE(api, 3020u);
  EXPECT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);
}

TEST_F(Contexts, PeerAccess) {
  CUcontext a, b;
  ASSERT_EQ(cuCtxCreate(&b, nullptr, 0, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxCreate(&a, nullptr, 0, 0), CUDA_SUCCESS);  // current
  EXPECT_EQ(cuCtxDisablePeerAccess(b), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  EXPECT_EQ(cuCtxEnablePeerAccess(b, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxEnablePeerAccess(b, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  EXPECT_EQ(cuCtxDisablePeerAccess(b), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxEnablePeerAccess(b, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDestroy(b), CUDA_SUCCESS);
}

// cuCtxAttach and cuCtxDetach are deprecated, and still part of the driver's ABI.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_F(Contexts, AttachDetach) {
  CUcontext a, att;
  ASSERT_EQ(cuCtxCreate(&a, nullptr, 0, 2), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxAttach(&att, 0), CUDA_SUCCESS);
  EXPECT_EQ(att, a);
  EXPECT_EQ(cuCtxDetach(a), CUDA_SUCCESS);  // count 2 -> 1
  CUdevice d;
  EXPECT_EQ(cuCtxGetDevice_v2(&d, a), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDetach(a), CUDA_SUCCESS);  // 1 -> 0: destroyed
  EXPECT_EQ(cuCtxGetDevice_v2(&d, a), CUDA_ERROR_INVALID_CONTEXT);
}
#pragma GCC diagnostic pop

}  // namespace
