// Stream-ordered pools and memory locations under the passthrough backend, over the sim backend
// as its real driver with every virtual device on its device 0 (tests/passthrough/meson.build):
// each virtual device has its own default and current pool, so pool attributes, thresholds and
// cuDeviceSetMemPool on one do not reach another on the same GPU, and cuMemAllocAsync draws from
// the stream's virtual device's pool. Locations naming virtual devices reach the real driver as
// its own device, and range attributes answer with the virtual device.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include "on_passthrough.h"

namespace {

constexpr size_t kMiB = 1u << 20;
constexpr int kDevices = 4;  // virtual devices 0..3 (all on the real device 0)

cuuint64_t attr(CUmemoryPool pool, CUmemPool_attribute a) {
  cuuint64_t v = ~0ull;
  EXPECT_EQ(cuMemPoolGetAttribute(pool, a, &v), CUDA_SUCCESS);
  return v;
}

CUmemoryPool default_pool(int dev) {
  CUmemoryPool p = nullptr;
  EXPECT_EQ(cuDeviceGetDefaultMemPool(&p, dev), CUDA_SUCCESS);
  return p;
}

CUmemoryPool current_pool(int dev) {
  CUmemoryPool p = nullptr;
  EXPECT_EQ(cuDeviceGetMemPool(&p, dev), CUDA_SUCCESS);
  return p;
}

class PassthroughPools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(running_on_passthrough());
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void SetUp() override {
    for (int d = 0; d < kDevices; ++d) ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_[d], d), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSetCurrent(nullptr);
    for (int d = 0; d < kDevices; ++d) cuDevicePrimaryCtxRelease(d);
  }
  // Allocates `bytes` on a new stream of virtual device `dev` with cuMemAllocAsync.
  CUdeviceptr alloc_on(int dev, size_t bytes, CUstream* stream) {
    EXPECT_EQ(cuCtxSetCurrent(ctx_[dev]), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamCreate(stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAllocAsync(&p, bytes, *stream), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamSynchronize(*stream), CUDA_SUCCESS);
    return p;
  }
  CUcontext ctx_[kDevices] = {};
};

TEST_F(PassthroughPools, EachVirtualDeviceHasItsOwnDefaultPool) {
  std::set<CUmemoryPool> pools;
  for (int d = 0; d < kDevices; ++d) {
    const CUmemoryPool p = default_pool(d);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(default_pool(d), p) << "the same pool every time";
    EXPECT_EQ(current_pool(d), p) << "the default is current until another is set";
    pools.insert(p);
  }
  EXPECT_EQ(pools.size(), static_cast<size_t>(kDevices));
  CUmemoryPool p = nullptr;
  EXPECT_EQ(cuDeviceGetDefaultMemPool(&p, 99), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetDefaultMemPool(nullptr, 1), CUDA_ERROR_INVALID_VALUE);
}

// What a framework's statistics read (PyTorch's cudaMallocAsync backend reads the pool's used
// and reserved memory) is the virtual device's own.
TEST_F(PassthroughPools, AllocAsyncDrawsFromTheStreamsDevicePool) {
  CUstream s1 = nullptr, s2 = nullptr;
  const CUdeviceptr a = alloc_on(1, 4 * kMiB, &s1);
  const CUdeviceptr b = alloc_on(2, 6 * kMiB, &s2);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(attr(default_pool(1), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4 * kMiB);
  EXPECT_EQ(attr(default_pool(2), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 6 * kMiB);
  EXPECT_EQ(attr(default_pool(3), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(attr(default_pool(0), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  // The stream decides, not the current context.
  ASSERT_EQ(cuCtxSetCurrent(ctx_[3]), CUDA_SUCCESS);
  CUdeviceptr c = 0;
  ASSERT_EQ(cuMemAllocAsync(&c, 2 * kMiB, s1), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s1), CUDA_SUCCESS);
  EXPECT_EQ(attr(default_pool(1), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 6 * kMiB);
  EXPECT_EQ(attr(default_pool(3), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(cuMemFreeAsync(a, s1), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(c, s1), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(b, s2), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(s1), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(s2), CUDA_SUCCESS);
  EXPECT_EQ(attr(default_pool(1), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(attr(default_pool(2), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  cuStreamDestroy(s1);
  cuStreamDestroy(s2);
}

TEST_F(PassthroughPools, ThresholdAndTrimStayOnTheirDevice) {
  const cuuint64_t before0 = attr(default_pool(0), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
  const cuuint64_t before2 = attr(default_pool(2), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
  cuuint64_t big = 64 * kMiB;
  ASSERT_EQ(cuMemPoolSetAttribute(default_pool(1), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big), CUDA_SUCCESS);
  EXPECT_EQ(attr(default_pool(1), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), big);
  EXPECT_EQ(attr(default_pool(0), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), before0);
  EXPECT_EQ(attr(default_pool(2), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), before2);
  // Memory kept by device 1's pool past a free is device 1's, and trimming device 2 keeps it.
  CUstream s = nullptr;
  const CUdeviceptr a = alloc_on(1, 8 * kMiB, &s);
  ASSERT_EQ(cuMemFreeAsync(a, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  const cuuint64_t kept = attr(default_pool(1), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  EXPECT_GE(kept, 8 * kMiB);
  EXPECT_EQ(cuMemPoolTrimTo(default_pool(2), 0), CUDA_SUCCESS);
  EXPECT_EQ(attr(default_pool(1), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), kept);
  EXPECT_EQ(cuMemPoolTrimTo(default_pool(1), 0), CUDA_SUCCESS);
  EXPECT_EQ(attr(default_pool(1), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);
  cuuint64_t zero = 0;
  EXPECT_EQ(cuMemPoolSetAttribute(default_pool(1), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), CUDA_SUCCESS);
  cuStreamDestroy(s);
}

TEST_F(PassthroughPools, SetMemPoolIsPerVirtualDevice) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 2;
  CUmemoryPool mine = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&mine, &props), CUDA_SUCCESS);
  ASSERT_EQ(cuDeviceSetMemPool(2, mine), CUDA_SUCCESS);
  EXPECT_EQ(current_pool(2), mine);
  EXPECT_EQ(current_pool(3), default_pool(3));
  EXPECT_EQ(current_pool(1), default_pool(1));
  // A pool of virtual device 2 is not device 3's, nor is device 1's default.
  EXPECT_EQ(cuDeviceSetMemPool(3, mine), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceSetMemPool(3, default_pool(1)), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceSetMemPool(3, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(current_pool(3), default_pool(3));
  // cuMemAllocAsync on device 2 now draws from the set pool.
  CUstream s = nullptr;
  const CUdeviceptr a = alloc_on(2, 4 * kMiB, &s);
  EXPECT_EQ(attr(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4 * kMiB);
  EXPECT_EQ(attr(default_pool(2), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  ASSERT_EQ(cuMemFreeAsync(a, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  // Destroying the current pool makes the default current again.
  ASSERT_EQ(cuMemPoolDestroy(mine), CUDA_SUCCESS);
  EXPECT_EQ(current_pool(2), default_pool(2));
  // A virtual device's default pool is not the program's to destroy, and stays usable.
  EXPECT_EQ(cuMemPoolDestroy(default_pool(2)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(attr(default_pool(2), CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  cuStreamDestroy(s);
}

TEST_F(PassthroughPools, LocationFormsNameTheVirtualDevice) {
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 3};
  CUmemoryPool p = nullptr;
  ASSERT_EQ(cuMemGetDefaultMemPool(&p, &loc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
  EXPECT_EQ(p, default_pool(3));
  ASSERT_EQ(cuMemGetMemPool(&p, &loc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
  EXPECT_EQ(p, current_pool(3));
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = loc;
  CUmemoryPool mine = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&mine, &props), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, mine), CUDA_SUCCESS);
  EXPECT_EQ(current_pool(3), mine);
  EXPECT_EQ(current_pool(2), default_pool(2));
  ASSERT_EQ(cuMemPoolDestroy(mine), CUDA_SUCCESS);
  CUmemLocation bad{CU_MEM_LOCATION_TYPE_DEVICE, 99};
  EXPECT_EQ(cuMemGetDefaultMemPool(&p, &bad, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_NE(cuMemGetDefaultMemPool(&p, nullptr, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
}

// Advice and prefetches naming virtual device 3 reach the real driver as its device 0; the range
// attributes answer with virtual device 3 again (for a thread working on it).
TEST_F(PassthroughPools, ManagedMemoryLocationsAreTranslatedBothWays) {
  ASSERT_EQ(cuCtxSetCurrent(ctx_[3]), CUDA_SUCCESS);
  CUdeviceptr m = 0;
  ASSERT_EQ(cuMemAllocManaged(&m, 2 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  const CUmemLocation three{CU_MEM_LOCATION_TYPE_DEVICE, 3};
  ASSERT_EQ(cuMemAdvise_v2(m, 2 * kMiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, three), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPrefetchAsync_v2(m, 2 * kMiB, three, 0, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  int preferred = -7, last = -7, last_id = -7;
  ASSERT_EQ(cuMemRangeGetAttribute(&preferred, sizeof preferred, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m,
                                   2 * kMiB),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemRangeGetAttribute(&last, sizeof last, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 2 * kMiB),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemRangeGetAttribute(&last_id, sizeof last_id, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, m,
                                   2 * kMiB),
            CUDA_SUCCESS);
  EXPECT_EQ(preferred, 3);
  EXPECT_EQ(last, 3);
  EXPECT_EQ(last_id, 3);
  // The real driver itself holds its own device 0 (all it has here for virtual device 3).
  using RangeAttr = CUresult (*)(void*, size_t, CUmem_range_attribute, CUdeviceptr, size_t);
  void* real = dlopen(std::getenv("VGPU_REAL_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(real, nullptr);
  const auto raw = reinterpret_cast<RangeAttr>(dlsym(real, "cuMemRangeGetAttribute"));
  ASSERT_NE(raw, nullptr);
  int raw_preferred = -7, raw_last = -7;
  ASSERT_EQ(raw(&raw_preferred, sizeof raw_preferred, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 2 * kMiB),
            CUDA_SUCCESS);
  ASSERT_EQ(raw(&raw_last, sizeof raw_last, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 2 * kMiB),
            CUDA_SUCCESS);
  EXPECT_EQ(raw_preferred, 0);
  EXPECT_EQ(raw_last, 0);
  dlclose(real);
  // Several at once.
  int a = -7, b = -7;
  void* data[] = {&a, &b};
  size_t sizes[] = {sizeof a, sizeof b};
  CUmem_range_attribute attrs[] = {CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                   CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY};
  ASSERT_EQ(cuMemRangeGetAttributes(data, sizes, attrs, 2, m, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, 0);
  // Host locations pass unchanged.
  const CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
  ASSERT_EQ(cuMemPrefetchAsync_v2(m, 2 * kMiB, host, 0, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRangeGetAttribute(&last, sizeof last, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 2 * kMiB),
            CUDA_SUCCESS);
  EXPECT_EQ(last, CU_DEVICE_CPU);
  // The 32-bit-era entry point names the device by ordinal: CU_DEVICE_CPU stays the CPU, and an
  // ordinal that is no virtual device is refused (not read as the CPU).
  using PrefetchV1 = CUresult (*)(CUdeviceptr, size_t, CUdevice, CUstream);
  const auto prefetch_v1 = reinterpret_cast<PrefetchV1>(dlsym(RTLD_DEFAULT, "cuMemPrefetchAsync"));
  ASSERT_NE(prefetch_v1, nullptr);
  EXPECT_EQ(prefetch_v1(m, 2 * kMiB, 3, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(prefetch_v1(m, 2 * kMiB, CU_DEVICE_CPU, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(prefetch_v1(m, 2 * kMiB, 99, nullptr), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRangeGetAttribute(&last, sizeof last, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 2 * kMiB),
            CUDA_SUCCESS);
  EXPECT_EQ(last, CU_DEVICE_CPU);
  EXPECT_EQ(cuMemFree(m), CUDA_SUCCESS);
}

// VMM access for a location naming virtual device 3 is what was set for it.
TEST_F(PassthroughPools, AccessQueriesNameTheVirtualDevice) {
  ASSERT_EQ(cuCtxSetCurrent(ctx_[3]), CUDA_SUCCESS);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 3};
  size_t gran = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, gran, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, gran, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, gran, 0, h, 0), CUDA_SUCCESS);
  CUmemAccessDesc desc{};
  desc.location = prop.location;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, gran, &desc, 1), CUDA_SUCCESS);
  unsigned long long flags = 0;
  ASSERT_EQ(cuMemGetAccess(&flags, &prop.location, va), CUDA_SUCCESS);
  EXPECT_EQ(flags, static_cast<unsigned long long>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  EXPECT_EQ(cuMemUnmap(va, gran), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(va, gran), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
}

}  // namespace
