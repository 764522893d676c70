// Stream-ordered memory pools of the sim backend through the driver ABI, on the embedded default
// cluster (8 x H100 80GB): default and created pools, attributes, reuse of freed blocks, release
// at synchronization and by trimming (seen in cuMemGetInfo), out of memory at capacity, data
// round trips, bad handles, and eight threads allocating on their own streams at once.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace {

constexpr uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

class Pools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx0_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx1_, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGetDefaultMemPool(&pool0_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    baseline_ = free_mem();
  }
  void TearDown() override {
    // Leave the default pool as the next test expects it: default threshold, nothing held.
    cuuint64_t zero = 0;
    cuMemPoolSetAttribute(pool0_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero);
    cuStreamSynchronize(s_);
    cuMemPoolTrimTo(pool0_, 0);
    EXPECT_EQ(free_mem(), baseline_) << "the test left memory allocated";
    cuStreamDestroy(s_);
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(1);
    cuDevicePrimaryCtxRelease(0);
  }
  static size_t free_mem() {
    size_t f = 0, t = 0;
    EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
  }
  static cuuint64_t attr(CUmemoryPool p, CUmemPool_attribute a) {
    cuuint64_t v = ~0ull;
    EXPECT_EQ(cuMemPoolGetAttribute(p, a, &v), CUDA_SUCCESS);
    return v;
  }
  static void keep_everything(CUmemoryPool p) {
    cuuint64_t max = UINT64_MAX;
    ASSERT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max), CUDA_SUCCESS);
  }
  static CUmemoryPool make_pool(int dev) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CUmemoryPool p = nullptr;
    EXPECT_EQ(cuMemPoolCreate(&p, &props), CUDA_SUCCESS);
    return p;
  }
  CUcontext ctx0_ = nullptr, ctx1_ = nullptr;
  CUmemoryPool pool0_ = nullptr;
  CUstream s_ = nullptr;
  size_t baseline_ = 0;
};

TEST_F(Pools, OneDefaultPoolPerDevice) {
  int n = 0;
  ASSERT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  ASSERT_EQ(n, 8);
  std::vector<CUmemoryPool> seen;
  for (int d = 0; d < n; ++d) {
    CUmemoryPool def = nullptr, cur = nullptr;
    ASSERT_EQ(cuDeviceGetDefaultMemPool(&def, d), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGetMemPool(&cur, d), CUDA_SUCCESS);
    EXPECT_NE(def, nullptr);
    EXPECT_EQ(cur, def);
    for (auto p : seen) EXPECT_NE(p, def);
    seen.push_back(def);
    CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, d};
    CUmemoryPool by_loc = nullptr;
    ASSERT_EQ(cuMemGetDefaultMemPool(&by_loc, &loc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    EXPECT_EQ(by_loc, def);
  }
  CUmemoryPool p;
  EXPECT_EQ(cuDeviceGetDefaultMemPool(&p, 8), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetMemPool(&p, -1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetDefaultMemPool(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolDestroy(pool0_), CUDA_ERROR_INVALID_VALUE);  // default pools stay
  // Default attributes as documented.
  int v = 0;
  for (auto a : {CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                 CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES}) {
    ASSERT_EQ(cuMemPoolGetAttribute(pool0_, a, &v), CUDA_SUCCESS);
    EXPECT_EQ(v, 1);
  }
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0u);
}

TEST_F(Pools, CreatedPoolBecomesCurrentForItsDeviceOnly) {
  CUmemoryPool mine = make_pool(1), def1 = nullptr;
  ASSERT_EQ(cuDeviceGetDefaultMemPool(&def1, 1), CUDA_SUCCESS);
  EXPECT_NE(mine, def1);
  EXPECT_EQ(cuDeviceSetMemPool(0, mine), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(cuDeviceSetMemPool(1, mine), CUDA_SUCCESS);
  CUmemoryPool cur = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&cur, 1), CUDA_SUCCESS);
  EXPECT_EQ(cur, mine);

  // cuMemAllocAsync on a stream of device 1 draws from the current pool of device 1.
  ASSERT_EQ(cuCtxSetCurrent(ctx1_), CUDA_SUCCESS);
  CUstream s1;
  ASSERT_EQ(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAllocAsync(&p, 5 * MiB, s1), CUDA_SUCCESS);
  CUmemoryPool from = nullptr;
  int ordinal = -1;
  ASSERT_EQ(cuPointerGetAttribute(&from, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), CUDA_SUCCESS);
  ASSERT_EQ(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p), CUDA_SUCCESS);
  EXPECT_EQ(from, mine);
  EXPECT_EQ(ordinal, 1);
  EXPECT_EQ(attr(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 6 * MiB);
  EXPECT_EQ(attr(def1, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);

  // Destroying a pool with memory still out returns at once; the device's current pool is its
  // default again, and the memory goes back to the device when freed.
  size_t f1 = free_mem();
  ASSERT_EQ(cuMemPoolDestroy(mine), CUDA_SUCCESS);
  ASSERT_EQ(cuDeviceGetMemPool(&cur, 1), CUDA_SUCCESS);
  EXPECT_EQ(cur, def1);
  EXPECT_EQ(free_mem(), f1);
  ASSERT_EQ(cuMemFreeAsync(p, s1), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s1), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f1 + 6 * MiB);
  EXPECT_EQ(cuStreamDestroy(s1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
}

TEST_F(Pools, UsedAndReservedMoveAsExpected) {
  CUmemoryPool p = make_pool(0);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&a, 3 * MiB, p, s_), CUDA_SUCCESS);  // one 4 MiB block
  ASSERT_EQ(cuMemAllocFromPoolAsync(&b, 1, p, s_), CUDA_SUCCESS);        // one 2 MiB block
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 6 * MiB);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
  EXPECT_EQ(free_mem(), baseline_ - 6 * MiB);

  ASSERT_EQ(cuMemFreeAsync(a, s_), CUDA_SUCCESS);
  // Freed in stream order, still reserved until the next synchronization.
  ASSERT_EQ(cuStreamQuery(s_), CUDA_SUCCESS);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 2 * MiB);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
  ASSERT_EQ(cuStreamSynchronize(s_), CUDA_SUCCESS);  // threshold 0: the free block goes
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
  EXPECT_EQ(free_mem(), baseline_ - 2 * MiB);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 6 * MiB);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 6 * MiB);

  // High watermarks reset to the current value, and only with 0; currents are read-only.
  cuuint64_t v = 5;
  EXPECT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_VALUE);
  v = 0;
  ASSERT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v), CUDA_SUCCESS);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 2 * MiB);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 2 * MiB);

  int off = 0, got = 1;
  ASSERT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &got), CUDA_SUCCESS);
  EXPECT_EQ(got, 0);
  cuuint64_t threshold = 64 * MiB;
  ASSERT_EQ(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold), CUDA_SUCCESS);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 64 * MiB);

  ASSERT_EQ(cuMemFreeAsync(b, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s_), CUDA_SUCCESS);  // below the threshold: kept
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
  EXPECT_EQ(attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  ASSERT_EQ(cuMemPoolDestroy(p), CUDA_SUCCESS);  // gives its free block back
  EXPECT_EQ(free_mem(), baseline_);
}

TEST_F(Pools, FreedBlockIsReused) {
  keep_everything(pool0_);
  CUdeviceptr a = 0, b = 0, c = 0, big = 0;
  ASSERT_EQ(cuMemAllocAsync(&a, 4 * MiB, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(a, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s_), CUDA_SUCCESS);
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
  ASSERT_EQ(cuMemAllocAsync(&b, 3 * MiB, s_), CUDA_SUCCESS);  // fits the freed block
  EXPECT_EQ(b, a);
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
  ASSERT_EQ(cuMemAllocAsync(&big, 64 * MiB, s_), CUDA_SUCCESS);  // does not fit: a new block
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 68 * MiB);
  ASSERT_EQ(cuMemFreeAsync(big, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s_), CUDA_SUCCESS);
  // A small request does not pin the large free block.
  ASSERT_EQ(cuMemAllocAsync(&c, 2 * MiB, s_), CUDA_SUCCESS);
  EXPECT_NE(c, big);
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 70 * MiB);
  ASSERT_EQ(cuMemFreeAsync(b, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(c, s_), CUDA_SUCCESS);
}

TEST_F(Pools, TrimAndSynchronizationGiveCapacityBack) {
  keep_everything(pool0_);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAllocAsync(&p, GiB, s_), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), baseline_ - GiB);
  ASSERT_EQ(cuMemFreeAsync(p, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s_), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), baseline_ - GiB);  // held by the pool: above no threshold
  ASSERT_EQ(cuMemPoolTrimTo(pool0_, 2 * GiB), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), baseline_ - GiB);  // within what it may keep
  ASSERT_EQ(cuMemPoolTrimTo(pool0_, 0), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), baseline_);
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);

  // With the default threshold each kind of synchronization releases the free blocks.
  cuuint64_t zero = 0;
  ASSERT_EQ(cuMemPoolSetAttribute(pool0_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&p, GiB, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(p, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamQuery(s_), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), baseline_ - GiB);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), baseline_);

  CUevent e;
  ASSERT_EQ(cuEventCreate(&e, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&p, GiB, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(p, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(e, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(e), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), baseline_);
  EXPECT_EQ(cuEventDestroy(e), CUDA_SUCCESS);
}

TEST_F(Pools, OutOfMemoryAtCapacityAndTrimmingBeforeFailing) {
  keep_everything(pool0_);
  // 80 GB minus the context: nine 8 GiB blocks fit, the tenth does not.
  std::vector<CUdeviceptr> chunks;
  CUresult r = CUDA_SUCCESS;
  while (chunks.size() < 20) {
    CUdeviceptr p = 0;
    if ((r = cuMemAllocAsync(&p, 8 * GiB, s_)) != CUDA_SUCCESS) break;
    chunks.push_back(p);
  }
  EXPECT_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(chunks.size(), 9u);
  for (auto p : chunks) ASSERT_EQ(cuMemFreeAsync(p, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s_), CUDA_SUCCESS);
  // The pool holds 72 GiB free: other allocation paths see the device as full...
  EXPECT_EQ(free_mem(), baseline_ - 72 * GiB);
  CUdeviceptr plain = 0;
  EXPECT_EQ(cuMemAlloc(&plain, 16 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
  // ...while the pool itself gives back its unused blocks to serve a request none of them fits.
  CUdeviceptr big = 0;
  ASSERT_EQ(cuMemAllocAsync(&big, 16 * GiB, s_), CUDA_SUCCESS);
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 16 * GiB);
  ASSERT_EQ(cuMemFreeAsync(big, s_), CUDA_SUCCESS);

  // A pool's maximum size is a capacity of its own.
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  props.maxSize = 8 * MiB;
  CUmemoryPool small = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&small, &props), CUDA_SUCCESS);
  CUdeviceptr x = 0, y = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&x, 6 * MiB, small, s_), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&y, 4 * MiB, small, s_), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemFreeAsync(x, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolDestroy(small), CUDA_SUCCESS);
}

TEST_F(Pools, AsyncAllocCopyFreeRoundTrip) {
  const size_t n = 3 * MiB + 17;
  std::vector<unsigned char> in(n), out(n, 0);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
  CUdeviceptr d = 0, e = 0;
  ASSERT_EQ(cuMemAllocAsync(&d, n, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&e, n, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8Async(d, 0xee, n, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(d, in.data(), n, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoDAsync(e, d, n, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(d, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(out.data(), e, n, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(e, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s_), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  // The range reported for pool memory is the size asked for.
  CUdeviceptr f = 0, base = 0;
  size_t size = 0;
  ASSERT_EQ(cuMemAllocAsync(&f, n, s_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetAddressRange(&base, &size, f + 5), CUDA_SUCCESS);
  EXPECT_EQ(base, f);
  EXPECT_EQ(size, n);
  // Freed synchronously with cuMemFree, pool memory goes back to its pool.
  EXPECT_EQ(cuMemFree(f), CUDA_SUCCESS);
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
}

TEST_F(Pools, BadHandlesAndInput) {
  auto bogus = reinterpret_cast<CUmemoryPool>(uintptr_t{0x1234560});
  cuuint64_t v = 0;
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemPoolGetAttribute(bogus, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemPoolSetAttribute(bogus, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemPoolTrimTo(bogus, 0), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemPoolDestroy(bogus), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&p, 1, bogus, s_), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuDeviceSetMemPool(0, bogus), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemPoolGetAttribute(nullptr, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolGetAttribute(pool0_, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolGetAttribute(pool0_, static_cast<CUmemPool_attribute>(999), &v), CUDA_ERROR_INVALID_VALUE);

  // A destroyed pool is a stale handle.
  CUmemoryPool gone = make_pool(0);
  ASSERT_EQ(cuMemPoolDestroy(gone), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolDestroy(gone), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&p, 1, gone, s_), CUDA_ERROR_INVALID_HANDLE);

  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 42};
  CUmemoryPool q = nullptr;
  EXPECT_EQ(cuMemPoolCreate(&q, &props), CUDA_ERROR_INVALID_DEVICE);
  props.location.id = 0;
  props.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
  EXPECT_EQ(cuMemPoolCreate(&q, &props), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolCreate(&q, nullptr), CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(cuMemAllocAsync(nullptr, 16, s_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocAsync(&p, 0, s_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocAsync(&p, SIZE_MAX, s_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAllocAsync(&p, 100 * GiB, s_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAllocAsync(&p, 16, reinterpret_cast<CUstream>(uintptr_t{0xdead0})), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemFreeAsync(0x1000, s_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFreeAsync(0, s_), CUDA_ERROR_INVALID_VALUE);

  // A free on a dead stream loses nothing; a second free of one pointer is refused.
  ASSERT_EQ(cuMemAllocAsync(&p, 16, s_), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(p, reinterpret_cast<CUstream>(uintptr_t{0xdead0})), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cuMemFreeAsync(p, s_), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(p, s_), CUDA_ERROR_INVALID_VALUE);

  // Access: the owner always has read-write; other devices none until granted.
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  ASSERT_EQ(cuMemPoolGetAccess(&f, pool0_, &loc), CUDA_SUCCESS);
  EXPECT_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  loc.id = 1;
  ASSERT_EQ(cuMemPoolGetAccess(&f, pool0_, &loc), CUDA_SUCCESS);
  EXPECT_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  CUmemAccessDesc d{{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  ASSERT_EQ(cuMemPoolSetAccess(pool0_, &d, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolGetAccess(&f, pool0_, &loc), CUDA_SUCCESS);
  EXPECT_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  ASSERT_EQ(cuMemPoolSetAccess(pool0_, &d, 1), CUDA_SUCCESS);
  d.location.id = 0;
  EXPECT_EQ(cuMemPoolSetAccess(pool0_, &d, 1), CUDA_ERROR_INVALID_VALUE);
  d.location.id = 99;
  EXPECT_EQ(cuMemPoolSetAccess(pool0_, &d, 1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuMemPoolSetAccess(bogus, &d, 1), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemPoolGetAccess(&f, pool0_, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Pools, EightThreadsAllocateOnTheirOwnStreams) {
  constexpr int kThreads = 8, kRounds = 40;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      if (cuCtxSetCurrent(ctx0_) != CUDA_SUCCESS) { ++failures[t]; return; }
      CUstream s;
      if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) { ++failures[t]; return; }
      for (int i = 0; i < kRounds; ++i) {
        const size_t n = 4096 + static_cast<size_t>((t * 977 + i * 131) % 50000);
        std::vector<unsigned char> out(n, 0);
        CUdeviceptr d = 0;
        if (cuMemAllocAsync(&d, n, s) != CUDA_SUCCESS) { ++failures[t]; break; }
        const auto value = static_cast<unsigned char>(t * 16 + i);
        bool ok = cuMemsetD8Async(d, value, n, s) == CUDA_SUCCESS &&
                  cuMemcpyDtoHAsync(out.data(), d, n, s) == CUDA_SUCCESS &&
                  cuMemFreeAsync(d, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS;
        for (size_t k = 0; ok && k < n; ++k) ok = out[k] == value;
        if (!ok) ++failures[t];
      }
      cuStreamDestroy(s);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(attr(pool0_, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_GE(attr(pool0_, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 2 * MiB);
}

}  // namespace
