// The passthrough's per-virtual-device memory accounting at its edges, over the sim backend as
// its real driver: the 32-bit legacy entry points, a free racing another thread's allocation of
// the same address, allocations going with their destroyed context, and a VMM handle released
// while still mapped.
//
// Only virtual device 2 is used (see array_test.cpp: with one context on the real device, every
// refusal and every number seen is the virtual device's own).
//
// The sim's device memory is host memory from mmap(nullptr, ...): this executable interposes
// mmap and munmap to steer it where a case needs it (below 4 GiB for the 32-bit entry points,
// onto an address just freed for the race), forwarding everything else unchanged (they are
// exported with -rdynamic, so that the sim library, loaded later, binds to them).
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>
#include "on_passthrough.h"

namespace {

constexpr size_t kMiB = 1u << 20;
using DevPtrV1 = unsigned int;  // CUdeviceptr of the 32-bit entry points

std::atomic<bool> g_low_addresses{false};   // add MAP_32BIT to anonymous mappings
std::atomic<uintptr_t> g_hint{0};           // the next mapping of g_hint_len bytes goes here
std::atomic<size_t> g_hint_len{0};
std::atomic<uintptr_t> g_race_at{0};        // unmapping this runs g_race once, right after
void (*g_race)() = nullptr;

using MmapFn = void* (*)(void*, size_t, int, int, int, off_t);
using MunmapFn = int (*)(void*, size_t);

}  // namespace

extern "C" __attribute__((visibility("default"))) void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) __THROW {
  static const auto next = reinterpret_cast<MmapFn>(dlsym(RTLD_NEXT, "mmap"));
  if (addr == nullptr && (flags & MAP_ANONYMOUS)) {
    if (g_low_addresses.load()) flags |= MAP_32BIT;
    if (len == g_hint_len.load())
      if (const uintptr_t hint = g_hint.exchange(0); hint != 0) addr = reinterpret_cast<void*>(hint);
  }
  return next(addr, len, prot, flags, fd, off);
}

extern "C" __attribute__((visibility("default"))) int munmap(void* addr, size_t len) __THROW {
  static const auto next = reinterpret_cast<MunmapFn>(dlsym(RTLD_NEXT, "munmap"));
  const int r = next(addr, len);
  uintptr_t at = reinterpret_cast<uintptr_t>(addr);
  if (at != 0 && g_race_at.compare_exchange_strong(at, 0) && g_race) g_race();
  return r;
}

namespace {

class PassthroughMemory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(running_on_passthrough());
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 2), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  }
  void TearDown() override {
    g_low_addresses = false;
    g_hint = 0;
    g_race_at = 0;
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(2);
  }
  static size_t free_mem() {
    size_t f = 0, t = 0;
    EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
  }
  CUcontext ctx_ = nullptr;
};

// Programs built against old headers call the 32-bit entry points: charged like the 64-bit ones.
TEST_F(PassthroughMemory, LegacyEntryPointsAreCharged) {
  using AllocV1 = CUresult (*)(DevPtrV1*, unsigned int);
  using PitchV1 = CUresult (*)(DevPtrV1*, unsigned int*, unsigned int, unsigned int, unsigned int);
  using FreeV1 = CUresult (*)(DevPtrV1);
  auto alloc_v1 = reinterpret_cast<AllocV1>(dlsym(RTLD_DEFAULT, "cuMemAlloc"));
  auto pitch_v1 = reinterpret_cast<PitchV1>(dlsym(RTLD_DEFAULT, "cuMemAllocPitch"));
  auto free_v1 = reinterpret_cast<FreeV1>(dlsym(RTLD_DEFAULT, "cuMemFree"));
  ASSERT_NE(alloc_v1, nullptr);
  ASSERT_NE(pitch_v1, nullptr);
  ASSERT_NE(free_v1, nullptr);
  const size_t f0 = free_mem();

  g_low_addresses = true;  // so that the addresses fit 32 bits
  DevPtrV1 a = 0, b = 0;
  unsigned pitch = 0;
  ASSERT_EQ(alloc_v1(&a, 3 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(pitch_v1(&b, &pitch, 1000, 3000, 4), CUDA_SUCCESS);
  g_low_addresses = false;
  EXPECT_EQ(pitch, 1024u);
  // 3 MiB is two 2 MiB pages; 1024 x 3000 bytes is two more.
  EXPECT_EQ(f0 - free_mem(), 8 * kMiB);
  EXPECT_EQ(free_v1(a), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 4 * kMiB);
  EXPECT_EQ(free_v1(b), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);

  // Past what the virtual device has free, the 32-bit entry point refuses as the 64-bit one.
  std::vector<CUdeviceptr> fill;
  for (CUdeviceptr p = 0; free_mem() >= 3u << 30 && cuMemAlloc(&p, 2u << 30) == CUDA_SUCCESS;) fill.push_back(p);
  ASSERT_LT(free_mem(), 3u << 30);
  g_low_addresses = true;
  EXPECT_EQ(alloc_v1(&a, 3u << 30), CUDA_ERROR_OUT_OF_MEMORY);
  g_low_addresses = false;
  for (CUdeviceptr p : fill) EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

// The real free makes the address free for reuse: another thread allocating it before the freeing
// thread's bookkeeping keeps its own charge, and the freed allocation's charge goes back.
TEST_F(PassthroughMemory, FreeRacingAnAllocationOfTheSameAddress) {
  const size_t f0 = free_mem();
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 6 * kMiB), CUDA_SUCCESS);
  static CUdeviceptr p_static, q;
  static CUresult q_result;
  p_static = p;
  q = 0;
  q_result = CUDA_ERROR_UNKNOWN;
  // Right after the real driver unmaps p (inside the real cuMemFree), an allocation of 4 MiB is
  // handed p's address: what another thread could do at that moment, made to happen in order
  // here by running it inside the free.
  g_race = [] {
    g_hint_len = 4 * kMiB;
    g_hint = p_static;
    q_result = cuMemAlloc(&q, 4 * kMiB);
  };
  g_race_at = p;
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
  ASSERT_EQ(q_result, CUDA_SUCCESS);
  ASSERT_EQ(q, p) << "the race did not happen: the second allocation got another address";
  EXPECT_EQ(f0 - free_mem(), 4 * kMiB);  // the 4 MiB allocation's charge, not the freed one's
  EXPECT_EQ(cuMemFree(q), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

// A failed free keeps the charge (the record taken out first is put back).
TEST_F(PassthroughMemory, FailedFreeKeepsTheCharge) {
  const size_t f0 = free_mem();
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_NE(cuMemFree(p + 64), CUDA_SUCCESS);  // not the start of an allocation
  EXPECT_EQ(f0 - free_mem(), 4 * kMiB);
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

// cuCtxDestroy frees what was allocated in the context: its charge goes back.
TEST_F(PassthroughMemory, ContextDestroyGivesItsAllocationsBack) {
  const size_t f0 = free_mem();
  CUcontext own = nullptr;
  ASSERT_EQ(cuCtxCreate(&own, nullptr, 0, 2), CUDA_SUCCESS);
  const size_t f1 = free_mem();
  CUdeviceptr a = 0, b = 0;
  size_t pitch = 0;
  ASSERT_EQ(cuMemAlloc(&a, 6 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocPitch(&b, &pitch, 2048, 1024, 4), CUDA_SUCCESS);
  EXPECT_EQ(f1 - free_mem(), 8 * kMiB);
  ASSERT_EQ(cuCtxDestroy(own), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  // Allocations of the context that stays are not touched.
  CUdeviceptr c = 0;
  ASSERT_EQ(cuMemAlloc(&c, 2 * kMiB), CUDA_SUCCESS);
  CUcontext other = nullptr;
  ASSERT_EQ(cuCtxCreate(&other, nullptr, 0, 2), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(other), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 2 * kMiB);
  EXPECT_EQ(cuMemFree(c), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

// A VMM handle's memory lives until it is released and every mapping of it is unmapped.
TEST_F(PassthroughMemory, ReleasedHandleStaysChargedWhileMapped) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 2;
  size_t gran = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  const size_t size = 4 * kMiB > gran ? 4 * kMiB : gran;
  const size_t f0 = free_mem();
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), size);
  CUdeviceptr va1 = 0, va2 = 0;
  ASSERT_EQ(cuMemAddressReserve(&va1, size, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&va2, size, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va1, size, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va2, size, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), size) << "released but still mapped twice";
  ASSERT_EQ(cuMemUnmap(va1, size), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), size) << "released but still mapped once";
  ASSERT_EQ(cuMemUnmap(va2, size), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);

  // Unmapped first, released last: the release gives it back.
  ASSERT_EQ(cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va1, size, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va1, size), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), size);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  // A failed release keeps the charge.
  ASSERT_EQ(cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS);
  EXPECT_NE(cuMemRelease(h + 12345), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), size);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuMemAddressFree(va1, size), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(va2, size), CUDA_SUCCESS);
}

// A size whose page rounding would pass 2^64 is refused, not charged as nothing.
TEST_F(PassthroughMemory, SizesNear2To64AreRefused) {
  const size_t f0 = free_mem();
  CUdeviceptr p = 0;
  size_t pitch = 0;
  EXPECT_EQ(cuMemAlloc(&p, SIZE_MAX), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAlloc(&p, SIZE_MAX - (1u << 20)), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAllocPitch(&p, &pitch, SIZE_MAX - 100, 2, 4), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAllocPitch(&p, &pitch, size_t{1} << 40, size_t{1} << 30, 4), CUDA_ERROR_OUT_OF_MEMORY);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 2;
  CUmemGenericAllocationHandle h = 0;
  // Not a multiple of the granularity: the real driver's answer.
  EXPECT_EQ(cuMemCreate(&h, SIZE_MAX - (1u << 20), &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemCreate(&h, SIZE_MAX - (2u << 20) + 1, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(free_mem(), f0);
}

}  // namespace
