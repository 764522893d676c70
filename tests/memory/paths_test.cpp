// Memory paths of the sim backend not covered elsewhere: cuCtxSynchronize after queued async
// work, cuMemPrefetchAsync, cuMemcpy3DPeer between two virtual devices, and the per-thread
// default stream variants (_ptds / _ptsz) as a runtime finds them through cuGetProcAddress.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

class Paths : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx0_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx1_, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(1);
    cuDevicePrimaryCtxRelease(0);
  }
  CUcontext ctx0_ = nullptr, ctx1_ = nullptr;
};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 29 + seed) & 0xff);
  return v;
}

TEST_F(Paths, CtxSynchronizeWaitsForAsyncWorkOnEveryStream) {
  const size_t n = 1 << 20;
  auto in = pattern(n, 5);
  std::vector<unsigned char> out_a(n, 0), out_b(n, 0);
  CUstream a, b;
  ASSERT_EQ(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, n), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(d, in.data(), n), CUDA_SUCCESS);
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(cuMemcpyDtoHAsync(out_a.data(), d, n, a), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoHAsync(out_b.data(), d, n, b), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(a), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(b), CUDA_SUCCESS);
  EXPECT_EQ(out_a, in);
  EXPECT_EQ(out_b, in);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(b), CUDA_SUCCESS);
}

TEST_F(Paths, PrefetchRecordsTheLocationInStreamOrder) {
  CUdeviceptr m;
  const size_t n = 1 << 16;
  ASSERT_EQ(cuMemAllocManaged(&m, n, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUmemLocation dev1{CU_MEM_LOCATION_TYPE_DEVICE, 1}, host{CU_MEM_LOCATION_TYPE_HOST, 0};
  ASSERT_EQ(cuMemPrefetchAsync(m, n, dev1, 0, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  int where = -5;
  ASSERT_EQ(cuMemRangeGetAttribute(&where, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, n), CUDA_SUCCESS);
  EXPECT_EQ(where, 1);
  ASSERT_EQ(cuMemPrefetchAsync(m, n / 2, host, 0, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRangeGetAttribute(&where, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, n), CUDA_SUCCESS);
  EXPECT_EQ(where, CU_DEVICE_CPU);
  // Bad input: past the allocation, not managed memory, a device that does not exist, flags.
  EXPECT_EQ(cuMemPrefetchAsync(m, n + 1, dev1, 0, s), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr plain;
  ASSERT_EQ(cuMemAlloc(&plain, 4096), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPrefetchAsync(plain, 4096, dev1, 0, s), CUDA_ERROR_INVALID_VALUE);
  CUmemLocation bad{CU_MEM_LOCATION_TYPE_DEVICE, 77};
  EXPECT_EQ(cuMemPrefetchAsync(m, n, bad, 0, s), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuMemPrefetchAsync(m, n, dev1, 1, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(plain), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(m), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST_F(Paths, Memcpy3DPeerBetweenDevices) {
  // A 3D box (16 B x 4 rows x 3 slices) out of a pitched volume on device 0 into a tighter one
  // on device 1.
  const size_t spitch = 64, sheight = 8, sdepth = 4, dpitch = 32, dheight = 4, ddepth = 3;
  CUdeviceptr src, dst;
  ASSERT_EQ(cuMemAlloc(&src, spitch * sheight * sdepth), CUDA_SUCCESS);
  auto in = pattern(spitch * sheight * sdepth, 9);
  ASSERT_EQ(cuMemcpyHtoD(src, in.data(), in.size()), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx1_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&dst, dpitch * dheight * ddepth), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8(dst, 0, dpitch * dheight * ddepth), CUDA_SUCCESS);

  CUDA_MEMCPY3D_PEER p{};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = src;
  p.srcContext = ctx0_;
  p.srcPitch = spitch;
  p.srcHeight = sheight;
  p.srcXInBytes = 8;
  p.srcY = 2;
  p.srcZ = 1;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = dst;
  p.dstContext = ctx1_;
  p.dstPitch = dpitch;
  p.dstHeight = dheight;
  p.dstXInBytes = 4;
  p.WidthInBytes = 16;
  p.Height = 4;
  p.Depth = 3;
  ASSERT_EQ(cuMemcpy3DPeer(&p), CUDA_SUCCESS);
  std::vector<unsigned char> out(dpitch * dheight * ddepth, 0xff);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), dst, out.size()), CUDA_SUCCESS);
  for (size_t z = 0; z < 3; ++z)
    for (size_t y = 0; y < 4; ++y)
      for (size_t x = 0; x < dpitch; ++x) {
        const unsigned char got = out[z * dpitch * dheight + y * dpitch + x];
        const bool inside = x >= 4 && x < 20;
        const unsigned char want = inside ? in[(z + 1) * spitch * sheight + (y + 2) * spitch + (x - 4 + 8)] : 0;
        ASSERT_EQ(got, want) << "x=" << x << " y=" << y << " z=" << z;
      }
  // Async form on a stream of device 1, and a context that is not live.
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpy3DPeerAsync(&p, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  CUcontext dead;
  ASSERT_EQ(cuCtxCreate(&dead, nullptr, 0, 2), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(dead), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx1_), CUDA_SUCCESS);
  p.srcContext = dead;
  EXPECT_EQ(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_CONTEXT);
  p.srcContext = ctx0_;
  p.Depth = sdepth;  // reads past the source volume
  EXPECT_EQ(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy3DPeer(nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(dst), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(src), CUDA_SUCCESS);
}

TEST_F(Paths, PerThreadDefaultStreamVariantsThroughGetProcAddress) {
  auto lookup = [](const char* name, cuuint64_t flags) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    EXPECT_EQ(cuGetProcAddress(name, &fn, 13000, flags, &status), CUDA_SUCCESS) << name;
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS) << name;
    return fn;
  };
  const cuuint64_t pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  void* htod = lookup("cuMemcpyHtoD", pt);
  void* dtoh_async = lookup("cuMemcpyDtoHAsync", pt);
  void* alloc_async = lookup("cuMemAllocAsync", pt);
  void* free_async = lookup("cuMemFreeAsync", pt);
  void* sync = lookup("cuStreamSynchronize", pt);
  // The per-thread lookups are the _ptds/_ptsz symbols, not the legacy-stream ones.
  EXPECT_EQ(htod, dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
  EXPECT_EQ(dtoh_async, dlsym(RTLD_DEFAULT, "cuMemcpyDtoHAsync_v2_ptsz"));
  EXPECT_EQ(alloc_async, dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
  EXPECT_NE(htod, lookup("cuMemcpyHtoD", CU_GET_PROC_ADDRESS_LEGACY_STREAM));
  ASSERT_NE(htod, nullptr);
  ASSERT_NE(dtoh_async, nullptr);
  ASSERT_NE(alloc_async, nullptr);
  ASSERT_NE(free_async, nullptr);
  ASSERT_NE(sync, nullptr);

  using HtoD = CUresult(CUDAAPI*)(CUdeviceptr, const void*, size_t);
  using DtoHAsync = CUresult(CUDAAPI*)(void*, CUdeviceptr, size_t, CUstream);
  using AllocAsync = CUresult(CUDAAPI*)(CUdeviceptr*, size_t, CUstream);
  using FreeAsync = CUresult(CUDAAPI*)(CUdeviceptr, CUstream);
  using Sync = CUresult(CUDAAPI*)(CUstream);
  const size_t n = 100000;
  auto in = pattern(n, 77);
  std::vector<unsigned char> out(n, 0);
  // Stream 0 through the per-thread variants is this thread's default stream.
  CUdeviceptr d = 0;
  ASSERT_EQ(reinterpret_cast<AllocAsync>(alloc_async)(&d, n, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(reinterpret_cast<HtoD>(htod)(d, in.data(), n), CUDA_SUCCESS);
  ASSERT_EQ(reinterpret_cast<DtoHAsync>(dtoh_async)(out.data(), d, n, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(reinterpret_cast<FreeAsync>(free_async)(d, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(reinterpret_cast<Sync>(sync)(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(out, in);
  // CU_STREAM_PER_THREAD through the plain entry point names the same stream.
  ASSERT_EQ(cuMemAllocAsync(&d, n, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(d, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
}

}  // namespace
