// The host-time rule for polling (passthrough/thread_clock.h): a thread that spins on
// cuStreamQuery / cuEventQuery until its work is done reads, on its own (virtual) clock, the
// work's virtual duration, not the time it spent spinning. The "real driver" here
// (slow_overrides.cpp over the sim) keeps every launch's work busy for 30 ms of real time while
// its virtual duration is the sim's ~80 us: on a shared GPU the real work is much slower than the
// virtual cluster, and what nccl-tests measures with its host timer must not see that.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "virtual_clock_reader.h"

namespace {

using vgpu_test::virtual_now;

// Burns `seconds` of this thread's CPU time.
void busy_cpu(double seconds) {
  timespec start{}, t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  while (static_cast<double>(t.tv_sec - start.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec - start.tv_nsec) <
         seconds);
}

class Polling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    std::ifstream in(KERNELS_FATBIN, std::ios::binary);
    image_.assign(std::istreambuf_iterator<char>(in), {});
    ASSERT_EQ(cuModuleLoadData(&module_, image_.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&axpy_, module_, "axpy"), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&x_, 4 << 20), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&y_, 4 << 20), CUDA_SUCCESS);
    ASSERT_EQ(cuEventCreate(&done_, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    for (int i = 0; i < 6; ++i) axpy();  // the signature settles: its virtual duration is known
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuEventDestroy(done_);
    cuMemFree(x_);
    cuMemFree(y_);
    cuModuleUnload(module_);
    cuDevicePrimaryCtxRelease(0);
  }
  void axpy() {
    float a = 2;
    int n = 1 << 24;
    void* params[] = {&a, &x_, &y_, &n};
    ASSERT_EQ(cuLaunchKernel(axpy_, static_cast<unsigned>(n / 256), 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
              CUDA_SUCCESS);
  }
  // The virtual duration of one axpy, as the program's own events see it (behind queued work,
  // so that the events bracket the kernel alone, not this thread's time to launch it).
  float axpy_ms() {
    CUevent a, b;
    EXPECT_EQ(cuEventCreate(&a, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    EXPECT_EQ(cuEventCreate(&b, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    for (int i = 0; i < 4; ++i) axpy();
    EXPECT_EQ(cuEventRecord(a, nullptr), CUDA_SUCCESS);
    axpy();
    EXPECT_EQ(cuEventRecord(b, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cuEventSynchronize(b), CUDA_SUCCESS);
    float ms = -1;
    EXPECT_EQ(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
    cuEventDestroy(a);
    cuEventDestroy(b);
    return ms;
  }

  CUcontext ctx_ = nullptr;
  std::vector<char> image_;
  CUmodule module_ = nullptr;
  CUfunction axpy_ = nullptr;
  CUdeviceptr x_ = 0, y_ = 0;
  CUevent done_ = nullptr;
};

TEST_F(Polling, SpinningOnAStreamReadsTheVirtualDuration) {
  const double kernel = axpy_ms() * 1e-3;
  ASSERT_GT(kernel, 10e-6);
  const double t0 = virtual_now();
  const auto real0 = std::chrono::steady_clock::now();
  axpy();
  int polls = 0;
  while (cuStreamQuery(nullptr) == CUDA_ERROR_NOT_READY) ++polls;
  const double waited = virtual_now() - t0;
  const double real = std::chrono::duration<double>(std::chrono::steady_clock::now() - real0).count();
  ASSERT_GT(polls, 100) << "the stand-in driver did not keep the work busy";
  ASSERT_GE(real, 0.025);
  // The clock moved to the kernel's virtual finish: its duration, plus the launch's cost and
  // latency and this thread's few calls; not the 30 ms it spun.
  EXPECT_GE(waited, kernel);
  EXPECT_LT(waited, kernel + 2e-3) << "spun " << real << " s real";
}

TEST_F(Polling, SpinningOnAnEventReadsTheVirtualDuration) {
  const double kernel = axpy_ms() * 1e-3;
  const double t0 = virtual_now();
  axpy();
  ASSERT_EQ(cuEventRecord(done_, nullptr), CUDA_SUCCESS);
  int polls = 0;
  while (cuEventQuery(done_) == CUDA_ERROR_NOT_READY) {
    ++polls;
    (void)virtual_now();  // a poll loop that reads the clock (nccl-tests checks its timeout)
  }
  const double waited = virtual_now() - t0;
  ASSERT_GT(polls, 100);
  EXPECT_GE(waited, kernel);
  EXPECT_LT(waited, kernel + 2e-3);
}

TEST_F(Polling, WorkAfterAQueryIsStillCharged) {
  // PyTorch's allocator asks once about an event and carries on with real work: that work is the
  // program's, and a later call charges it.
  axpy();
  ASSERT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);
  const double t0 = virtual_now();
  busy_cpu(0.005);
  axpy();
  const double t1 = virtual_now();
  EXPECT_GE(t1 - t0, 0.0045);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST_F(Polling, AQueryThatFindsWorkDoneIsNoSynchronization) {
  // A query that answers "ready" without polling first leaves the clock alone: a host that runs
  // ahead of its GPU stays ahead.
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const double t0 = virtual_now();
  ASSERT_EQ(cuStreamQuery(nullptr), CUDA_SUCCESS);
  EXPECT_LT(virtual_now() - t0, 1e-3);
}

}  // namespace
