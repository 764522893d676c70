// The passthrough backend through the driver ABI, on CI: its "real driver" is vgpu's own sim
// backend (VGPU_REAL_LIBCUDA points at it) with every virtual device on physical device 0
// (VGPU_PHYSICAL_DEVICES=0), which is the shape of the product: 8 virtual GPUs on one.
#include <cuda.h>
#include <cudaProfiler.h>
#include <dlfcn.h>
#include <cstdlib>
#include <gtest/gtest.h>

#include <string>

#include <set>
#include <vector>
#include "on_passthrough.h"

namespace {

// The library these tests link is vgpu's passthrough build, not the sim that serves as its real
// driver (both are libcuda.so.1).

class Passthrough : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(running_on_passthrough());
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void TearDown() override {
    CUcontext c;
    while (cuCtxPopCurrent(&c) == CUDA_SUCCESS && c != nullptr) {}
  }
  static CUcontext primary(int dev) {
    CUcontext c = nullptr;
    EXPECT_EQ(cuDevicePrimaryCtxRetain(&c, dev), CUDA_SUCCESS);
    return c;
  }
};

TEST_F(Passthrough, ShowsTheVirtualDevices) {
  int n = 0;
  ASSERT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  EXPECT_EQ(n, 8);
  std::set<std::string> uuids, buses;
  for (int d = 0; d < n; ++d) {
    CUuuid u;
    ASSERT_EQ(cuDeviceGetUuid_v2(&u, d), CUDA_SUCCESS);
    uuids.insert(std::string(u.bytes, 16));
    char bus[32];
    ASSERT_EQ(cuDeviceGetPCIBusId(bus, sizeof bus, d), CUDA_SUCCESS);
    buses.insert(bus);
    size_t total = 0;
    ASSERT_EQ(cuDeviceTotalMem(&total, d), CUDA_SUCCESS);
    EXPECT_EQ(total, 85017493504u);
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);
  CUdevice dev;
  EXPECT_EQ(cuDeviceGet(&dev, 8), CUDA_ERROR_INVALID_DEVICE);
  int v = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 9), CUDA_ERROR_INVALID_DEVICE);
}

// Eight virtual devices share the sim's device 0 here: with VGPU_SHARED_GPU_BLOCKING=1 (set for this
// test's process in meson.build) their real contexts wait blocking (a rank's synchronization would
// otherwise spin a core for as long as every rank's work takes), unless the program chose a
// scheduling mode; the program still reads the flags it asked for.
TEST_F(Passthrough, ContextsSharingAGpuWaitBlockingButReportTheProgramsFlags) {
  void* real = dlopen(std::getenv("VGPU_REAL_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(real, nullptr) << "the real driver (the sim) is loaded by now";
  auto real_get_flags = reinterpret_cast<CUresult (*)(unsigned*)>(dlsym(real, "cuCtxGetFlags"));
  ASSERT_NE(real_get_flags, nullptr);
  ASSERT_EQ(cuDevicePrimaryCtxSetFlags(5, CU_CTX_SCHED_SPIN), CUDA_SUCCESS);
  for (int d : {3, 5}) {
    ASSERT_EQ(cuCtxSetCurrent(primary(d)), CUDA_SUCCESS);
    unsigned seen = 99, underneath = 99;
    ASSERT_EQ(cuCtxGetFlags(&seen), CUDA_SUCCESS);
    ASSERT_EQ(real_get_flags(&underneath), CUDA_SUCCESS);
    if (d == 3) {
      EXPECT_EQ(seen & CU_CTX_SCHED_MASK, unsigned{CU_CTX_SCHED_AUTO});
      EXPECT_EQ(underneath & CU_CTX_SCHED_MASK, unsigned{CU_CTX_SCHED_BLOCKING_SYNC});
    } else {
      EXPECT_EQ(seen & CU_CTX_SCHED_MASK, unsigned{CU_CTX_SCHED_SPIN}) << "the program's choice stands";
      EXPECT_EQ(underneath & CU_CTX_SCHED_MASK, unsigned{CU_CTX_SCHED_SPIN});
    }
    EXPECT_EQ(cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
  }
  dlclose(real);
}

// cuProfilerStart/Stop reach the real driver (here the sim's, which wants a current context)
// and come back with its answer; they also bound VGPU_CLOCK_REPORT (tests/timing/clock_report_test).
TEST_F(Passthrough, ProfilerRangesGoToTheRealDriver) {
  EXPECT_EQ(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_EQ(cuCtxSetCurrent(primary(0)), CUDA_SUCCESS);
  EXPECT_EQ(cuProfilerStart(), CUDA_SUCCESS);
  EXPECT_EQ(cuProfilerStop(), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST_F(Passthrough, EachVirtualDeviceIsItsOwnRealContext) {
  std::set<CUcontext> seen;
  for (int d = 0; d < 8; ++d) {
    CUcontext c = primary(d);
    ASSERT_NE(c, nullptr);
    seen.insert(c);
    ASSERT_EQ(cuCtxSetCurrent(c), CUDA_SUCCESS);
    CUdevice got = -1;
    ASSERT_EQ(cuCtxGetDevice(&got), CUDA_SUCCESS);
    EXPECT_EQ(got, d);
    EXPECT_EQ(cuCtxGetDevice_v2(&got, c), CUDA_SUCCESS);
    EXPECT_EQ(got, d);
    unsigned flags = 0;
    int active = 0;
    EXPECT_EQ(cuDevicePrimaryCtxGetState(d, &flags, &active), CUDA_SUCCESS);
    EXPECT_EQ(active, 1);
    CUcontext again = primary(d);
    EXPECT_EQ(again, c);  // one primary context per virtual device
    EXPECT_EQ(cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
  }
  EXPECT_EQ(seen.size(), 8u);
  // A created context belongs to the device it was created for.
  CUcontext created = nullptr;
  ASSERT_EQ(cuCtxCreate(&created, nullptr, 0, 6), CUDA_SUCCESS);
  CUdevice got = -1;
  EXPECT_EQ(cuCtxGetDevice(&got), CUDA_SUCCESS);
  EXPECT_EQ(got, 6);
  EXPECT_EQ(cuCtxDestroy(created), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDestroy(primary(2)), CUDA_ERROR_INVALID_CONTEXT);  // not the caller's to destroy
}

TEST_F(Passthrough, MemoryIsChargedToTheVirtualDevice) {
  ASSERT_EQ(cuCtxSetCurrent(primary(1)), CUDA_SUCCESS);
  size_t free1 = 0, total = 0, free2 = 0, after1 = 0, after2 = 0;
  ASSERT_EQ(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, 85017493504u);
  EXPECT_EQ(free1, 84465090560u);  // what a real H100 shows after its context is made
  ASSERT_EQ(cuCtxSetCurrent(primary(2)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&free2, &total), CUDA_SUCCESS);

  ASSERT_EQ(cuCtxSetCurrent(primary(1)), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 1ull << 30), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&after1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free1 - after1, 1ull << 30);
  int ordinal = -1;
  ASSERT_EQ(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 12345), CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 1);

  ASSERT_EQ(cuCtxSetCurrent(primary(2)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&after2, &total), CUDA_SUCCESS);
  EXPECT_EQ(after2, free2);  // device 2 did not pay for device 1's gigabyte
  CUdeviceptr too_big = 0;
  EXPECT_EQ(cuMemAlloc(&too_big, total + 1), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(primary(1)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&after1, &total), CUDA_SUCCESS);
  EXPECT_EQ(after1, free1);
  EXPECT_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);  // freed twice: the real driver's answer
}

TEST_F(Passthrough, VmmLocationsAreTranslatedBothWays) {
  ASSERT_EQ(cuCtxSetCurrent(primary(5)), CUDA_SUCCESS);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 5;  // only physical device 0 exists under the test's real driver
  size_t gran = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  ASSERT_GT(gran, 0u);
  size_t before = 0, after = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo(&before, &total), CUDA_SUCCESS);
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, 4 * gran, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&after, &total), CUDA_SUCCESS);
  EXPECT_EQ(before - after, 4 * gran);
  CUmemAllocationProp back{};
  ASSERT_EQ(cuMemGetAllocationPropertiesFromHandle(&back, h), CUDA_SUCCESS);
  EXPECT_EQ(back.location.id, 5);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 4 * gran, 0, h, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 4 * gran, &access, 1), CUDA_SUCCESS);
  std::vector<int> in(1024, 7), out(1024, 0);
  ASSERT_EQ(cuMemcpyHtoD(va, in.data(), 4096), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), va, 4096), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  ASSERT_EQ(cuMemUnmap(va, 4 * gran), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 4 * gran), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&after, &total), CUDA_SUCCESS);
  EXPECT_EQ(after, before);
  prop.location.id = 8;
  EXPECT_EQ(cuMemCreate(&h, gran, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(Passthrough, MemoryPoolsOfVirtualDevices) {
  ASSERT_EQ(cuCtxSetCurrent(primary(6)), CUDA_SUCCESS);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 6;  // physical device 0 under the test's real driver
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = props.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_EQ(cuMemPoolSetAccess(pool, &access, 1), CUDA_SUCCESS);
  CUmemAccess_flags flags{};
  CUmemLocation where = props.location;
  EXPECT_EQ(cuMemPoolGetAccess(&flags, pool, &where), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(cuMemPoolDestroy(pool), CUDA_SUCCESS);
  props.location.id = 8;
  EXPECT_EQ(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(Passthrough, PeerAccessBetweenVirtualDevicesOfOneGpu) {
  int can = 0;
  ASSERT_EQ(cuDeviceCanAccessPeer(&can, 0, 3), CUDA_SUCCESS);
  EXPECT_EQ(can, 1);
  ASSERT_EQ(cuCtxSetCurrent(primary(0)), CUDA_SUCCESS);
  CUcontext peer = primary(3);
  EXPECT_EQ(cuCtxEnablePeerAccess(peer, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxEnablePeerAccess(peer, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  EXPECT_EQ(cuCtxDisablePeerAccess(peer), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDisablePeerAccess(peer), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
}

TEST_F(Passthrough, StreamsKnowTheirVirtualDevice) {
  ASSERT_EQ(cuCtxSetCurrent(primary(4)), CUDA_SUCCESS);
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdevice d = -1;
  ASSERT_EQ(cuStreamGetDevice(s, &d), CUDA_SUCCESS);
  EXPECT_EQ(d, 4);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST_F(Passthrough, AnEventIsRecordedOnlyOnItsOwnVirtualDevice) {
  // Virtual devices 0 and 1 share the real device 0, whose driver would take the record: vgpu
  // refuses it as a real driver refuses an event of another device.
  ASSERT_EQ(cuCtxSetCurrent(primary(0)), CUDA_SUCCESS);
  CUevent e = nullptr;
  ASSERT_EQ(cuEventCreate(&e, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(primary(1)), CUDA_SUCCESS);
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  EXPECT_EQ(cuEventRecord(e, s), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cuCtxSetCurrent(primary(0)), CUDA_SUCCESS);
  EXPECT_EQ(cuEventRecord(e, nullptr), CUDA_SUCCESS);  // on its own device it is recorded
  EXPECT_EQ(cuEventSynchronize(e), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(cuEventDestroy(e), CUDA_SUCCESS);
}

}  // namespace
