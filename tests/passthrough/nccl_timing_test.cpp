// NCCL kernels under the passthrough backend take the virtual time of their own transfers. The
// "real driver" is the sim backend; the test plays NCCL: it launches two collectives' kernels
// back to back (the host ahead of the transfers, as any training loop is), bracketing each
// launch in NCCL's profiler KernelLaunch event, and only then moves each collective's bytes
// through vgpu's net plugin with its proxy step handle. The program's own events must show each
// kernel lasting its own transfer's virtual time, the second starting when the first ends; by
// launch order alone the first would get nothing (its window closed at the second launch).
// A real NCCL kernel runs until its transfers are done; the sim's kernels finish at once, so
// each one here waits on the stream for a host flag the test raises once its transfer is done.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "profiler_fixture.h"
#include "on_passthrough.h"

using namespace vtest;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kHostSlackMs = 1.0;
#else
constexpr double kHostSlackMs = 0.05;
#endif

float virtual_ms(CUevent a, CUevent b) {
  float ms = -1;
  EXPECT_EQ(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
  return ms;
}

}  // namespace

TEST(NcclTiming, EachNcclKernelLastsItsOwnTransfers) {
  ASSERT_TRUE(running_on_passthrough());
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  std::ifstream in(NCCL_KERNEL_FATBIN, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(image.empty());
  CUmodule module = nullptr;
  CUfunction kernel = nullptr;
  ASSERT_EQ(cuModuleLoadData(&module, image.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&kernel, module, "ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE"), CUDA_SUCCESS);
  ASSERT_NE(plugin().ctx, nullptr);  // NCCL loaded the plugin (and so its profiler) before launching

  CUevent a, m, b;
  for (CUevent* e : {&a, &m, &b}) ASSERT_EQ(cuEventCreate(e, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  Comm comm;
  auto launch = [&](void* group) {
    void* h = comm.start(ncclProfileKernelLaunch, group);
    CUdeviceptr flag = 0;
    void* params[] = {&flag};
    EXPECT_EQ(cuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
    Comm::stop(h);
  };
  void* g1 = comm.start(ncclProfileGroupApi, nullptr);
  void* api1 = comm.start(ncclProfileCollApi, g1);
  void* g2 = comm.start(ncclProfileGroupApi, nullptr);
  void* api2 = comm.start(ncclProfileCollApi, g2);
  void* host_flag = nullptr;
  CUdeviceptr flag = 0;
  ASSERT_EQ(cuMemHostAlloc(&host_flag, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  ASSERT_EQ(cuMemHostGetDevicePointer(&flag, host_flag, 0), CUDA_SUCCESS);
  auto* flag_word = static_cast<uint32_t*>(host_flag);  // read by the GPU side: atomically
  auto raise = [flag_word](uint32_t v) { __atomic_store_n(flag_word, v, __ATOMIC_RELEASE); };
  raise(0);
  ASSERT_EQ(cuStreamWaitValue32(nullptr, flag, 1, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(a, nullptr), CUDA_SUCCESS);
  launch(g1);
  ASSERT_EQ(cuEventRecord(m, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitValue32(nullptr, flag, 2, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
  launch(g2);
  ASSERT_EQ(cuEventRecord(b, nullptr), CUDA_SUCCESS);
  // NCCL starts a plan's tasks after its launch and ends the plan's event right after
  // (hostStreamPlanTask), before any of its transfers: the sim backend under this passthrough
  // waits for that end to learn the kernel's buffers (its collectives' data).
  void* plan1 = comm.start(ncclProfileGroup, nullptr);
  void* s1 = comm.task_step(api1, plan1);
  Comm::stop(plan1);
  void* plan2 = comm.start(ncclProfileGroup, nullptr);
  void* s2 = comm.task_step(api2, plan2);
  Comm::stop(plan2);
  // GPU 0 -> GPU 1 over NVLink (payload 337.5 GB/s): 45 MB and 90 MB, ~133 and ~267 us.
  Tagged t1 = transfer(s1, s1, 45'000'000);
  raise(1);  // the first kernel had its data: it ends
  ASSERT_EQ(cuEventSynchronize(m), CUDA_SUCCESS);
  // A send may leave after its kernel ended (the kernel only had to fill NCCL's buffer): it
  // still starts from its own kernel's start, not from what the GPU runs by then.
  Tagged late = transfer(s1, s1, 4096, /*dst=*/2);
  EXPECT_EQ(late.send.launch, t1.send.launch);
  EXPECT_DOUBLE_EQ(late.send.start, t1.send.start);
  Tagged t2 = transfer(s2, s2, 90'000'000);
  raise(2);
  ASSERT_NE(t1.send.launch, 0u);
  ASSERT_NE(t2.send.launch, t1.send.launch);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);

  const double d1 = t1.send.finish - t1.send.start, d2 = t2.send.finish - t2.send.start;
  EXPECT_NEAR(d1, 45e6 / 337.5e9, 5e-6);
  EXPECT_NEAR(d2, 90e6 / 337.5e9, 5e-6);
  // The second collective's transfer starts when its kernel starts: when the first kernel ends
  // (or, if this thread took longer than the first transfer to issue it, as under the
  // sanitizers, at its issue).
  EXPECT_GE(t2.send.start, t1.send.finish - 1e-9);
  EXPECT_LE(t2.send.start, t1.send.finish + kHostSlackMs * 1e-3);
  // Each kernel lasts its own transfer: the first from its start (the host's time to issue it
  // after `a` aside: the launch latency and this thread's CPU time), the second from the first's
  // end to its own transfer's end.
  const float first = virtual_ms(a, m), second = virtual_ms(m, b);
  EXPECT_GE(first, d1 * 1e3 - 1e-3);
  EXPECT_LE(first, d1 * 1e3 + kHostSlackMs);
  EXPECT_NEAR(second, (t2.send.finish - t1.send.finish) * 1e3, 1e-3);
  EXPECT_GE(second, d2 * 1e3 - 1e-3);

  for (void* h : {api1, g1, api2, g2}) Comm::stop(h);
  for (CUevent e : {a, m, b}) cuEventDestroy(e);
  cuMemFreeHost(host_flag);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(0);
}
