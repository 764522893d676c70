// When an op starts, through the driver API: stream order, event waits, the legacy default
// stream's barrier and the per-thread default stream, as the program's own events report them.
// One program, run on both backends (tests/timing/meson.build: on the sim's libcuda.so.1, and
// on the passthrough's over the sim as its real driver): the rule is one (timing/stream_order.h)
// and must read the same through either.
//
// Every figure is relative to the virtual duration of one copy, measured here on the backend
// under test: an op that waits for N copies starts at least N copies later; one that does not
// wait starts within the test thread's own CPU time between two calls.
#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

// The per-thread-default-stream variants, which cuda.h declares only for its own build.
extern "C" CUresult CUDAAPI cuEventRecord_ptsz(CUevent, CUstream);

namespace {

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

// The driver-time table on both backends (by default the passthrough charges none of it:
// timing/driver_call_cost.h), so that one rule reads the same through either.
const bool kDriverTimeTable = [] { return ::setenv("VGPU_DRIVER_TIME", "table", 0) == 0; }();

// The thread's CPU time between calls read exactly: what a stream that waited for nothing reads
// is that time, and the estimate (timing/outside_cpu_time.h) charges a preempted short stretch
// its wall time until the clock's next exact reading (up to 1 ms a stretch). Under
// ThreadSanitizer on a loaded machine that read 0.93-1.04 copies (~0.5 ms each) in 4 of 12 runs
// (2026-11-27), and 5.5 copies in a clean-clone CI run (2026-11-28), which these rules are not about.
const bool kExactCpuClock = [] { return ::setenv("VGPU_CPU_CLOCK", "exact", 0) == 0; }();

constexpr int kCopies = 4;  // queued ahead of the op under test
// A wait that happened: at least this share of the copies it waited for (float event rounding).
constexpr float kWaited = 0.98f;
// No wait: below this share of them, two copies' worth.
constexpr float kNotWaited = 0.5f;

class StreamRules : public ::testing::Test {
 protected:
  void SetUp() override {
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx_, 0));
    OK(cuCtxSetCurrent(ctx_));
    host_.assign(kBytes, 1);
    OK(cuMemAlloc(&dev_, kBytes));
    OK(cuStreamCreate(&blocking_, CU_STREAM_DEFAULT));
    OK(cuStreamCreate(&non_blocking_, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&other_, CU_STREAM_NON_BLOCKING));
    for (CUevent* e : {&start_, &end_, &mark_}) OK(cuEventCreate(e, CU_EVENT_DEFAULT));
    // One copy's virtual duration on this backend: timed behind queued copies, so that stream
    // order alone places it; the least of three tries, as a thread that fell behind its queued
    // copies (its clock past their end) starts the timed one late, which only adds (a TSan CI run
    // on a loaded 2-core machine read 0.96 ms here and 0.61 for every copy after, 2026-11-29).
    copy_ms_ = std::numeric_limits<float>::infinity();
    for (int attempt = 0; attempt < 3; ++attempt) {
      copies(other_, kCopies);
      OK(cuEventRecord(start_, other_));
      copies(other_, 1);
      OK(cuEventRecord(end_, other_));
      OK(cuCtxSynchronize());
      copy_ms_ = std::min(copy_ms_, elapsed(start_, end_));
    }
    ASSERT_GT(copy_ms_, 0.1f);  // 32 MiB over PCIe: about half a millisecond
    // Every test starts with every stream idle.
    OK(cuCtxSynchronize());
  }
  void TearDown() override {
    cuCtxSynchronize();
    for (CUevent e : {start_, end_, mark_}) cuEventDestroy(e);
    for (CUstream s : {blocking_, non_blocking_, other_}) cuStreamDestroy(s);
    cuMemFree(dev_);
    cuDevicePrimaryCtxRelease(0);
  }
  void copies(CUstream s, int n) {
    for (int i = 0; i < n; ++i) OK(cuMemcpyHtoDAsync(dev_, host_.data(), kBytes, s));
  }
  static float elapsed(CUevent a, CUevent b) {
    float ms = -1;
    EXPECT_EQ(cuEventSynchronize(b), CUDA_SUCCESS);
    EXPECT_EQ(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
    return ms;
  }
  // From `start_` (recorded on `first` when it is idle) to `end_` recorded on `then` right after
  // kCopies copies were queued on `busy`: the virtual ms `then` waited, in copies.
  float waited_copies(CUstream first, CUstream busy, CUstream then) {
    EXPECT_EQ(cuEventRecord(start_, first), CUDA_SUCCESS);
    copies(busy, kCopies);
    EXPECT_EQ(cuEventRecord(end_, then), CUDA_SUCCESS);
    const float ms = elapsed(start_, end_);
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    return ms / copy_ms_;
  }

  static constexpr size_t kBytes = 32 << 20;
  CUcontext ctx_ = nullptr;
  std::vector<unsigned char> host_;
  CUdeviceptr dev_ = 0;
  CUstream blocking_ = nullptr, non_blocking_ = nullptr, other_ = nullptr;
  CUevent start_ = nullptr, end_ = nullptr, mark_ = nullptr;
  float copy_ms_ = 0;
};

TEST_F(StreamRules, AnOpStartsAfterTheOpBeforeItOnItsStream) {
  EXPECT_GE(waited_copies(non_blocking_, non_blocking_, non_blocking_), kWaited * kCopies);
  // Copies back to back: each starts where the one before it ends.
  copies(non_blocking_, kCopies);
  OK(cuEventRecord(start_, non_blocking_));
  copies(non_blocking_, 2);
  OK(cuEventRecord(end_, non_blocking_));
  EXPECT_NEAR(elapsed(start_, end_), 2 * copy_ms_, 0.02f * copy_ms_);
}

TEST_F(StreamRules, StreamsOnlyWaitForWhatTheyAreToldTo) {
  EXPECT_LT(waited_copies(other_, non_blocking_, other_), kNotWaited * kCopies);
  // cuStreamWaitEvent: `other_` waits for the event recorded behind the copies.
  OK(cuEventRecord(start_, other_));
  copies(non_blocking_, kCopies);
  OK(cuEventRecord(mark_, non_blocking_));
  OK(cuStreamWaitEvent(other_, mark_, 0));
  OK(cuEventRecord(end_, other_));
  EXPECT_GE(elapsed(start_, end_) / copy_ms_, kWaited * kCopies);
}

TEST_F(StreamRules, TheLegacyStreamWaitsForBlockingStreamsOnly) {
  EXPECT_GE(waited_copies(CU_STREAM_LEGACY, blocking_, CU_STREAM_LEGACY), kWaited * kCopies);
  EXPECT_LT(waited_copies(CU_STREAM_LEGACY, non_blocking_, CU_STREAM_LEGACY), kNotWaited * kCopies);
  // Stream 0 of a plain entry point is the legacy stream.
  EXPECT_GE(waited_copies(nullptr, blocking_, nullptr), kWaited * kCopies);
}

TEST_F(StreamRules, BlockingStreamsWaitForTheLegacyStream) {
  EXPECT_GE(waited_copies(blocking_, CU_STREAM_LEGACY, blocking_), kWaited * kCopies);
  EXPECT_LT(waited_copies(non_blocking_, CU_STREAM_LEGACY, non_blocking_), kNotWaited * kCopies);
  // Two blocking streams do not wait for each other.
  CUstream second;
  OK(cuStreamCreate(&second, CU_STREAM_DEFAULT));
  EXPECT_LT(waited_copies(second, blocking_, second), kNotWaited * kCopies);
  OK(cuStreamDestroy(second));
}

TEST_F(StreamRules, ThePerThreadDefaultStreamIsABlockingStream) {
  EXPECT_GE(waited_copies(CU_STREAM_PER_THREAD, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD), kWaited * kCopies);
  EXPECT_GE(waited_copies(CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, CU_STREAM_LEGACY), kWaited * kCopies);
  EXPECT_LT(waited_copies(non_blocking_, CU_STREAM_PER_THREAD, non_blocking_), kNotWaited * kCopies);
  // Stream 0 of a _ptsz entry point is the per-thread stream: behind its copies, not the legacy's.
  OK(cuEventRecord(start_, CU_STREAM_PER_THREAD));
  copies(CU_STREAM_PER_THREAD, kCopies);
  OK(cuEventRecord_ptsz(end_, nullptr));
  EXPECT_GE(elapsed(start_, end_) / copy_ms_, kWaited * kCopies);
  OK(cuCtxSynchronize());
  OK(cuEventRecord(start_, other_));
  copies(blocking_, kCopies);  // waited for by the legacy stream only
  OK(cuEventRecord_ptsz(end_, nullptr));
  EXPECT_LT(elapsed(start_, end_) / copy_ms_, kNotWaited * kCopies);
}

// cuStreamDestroy returns at once and the stream's queued work still runs: the legacy stream's
// next op waits for it as for a live blocking stream's, on both backends, from the destroy on
// (the sim once left the barrier when its real work drained, the passthrough at once).
TEST_F(StreamRules, DestroyedBlockingStreamsStayInTheLegacyStreamsBarrier) {
  for (const unsigned flags : {CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING}) {
    CUstream doomed;
    OK(cuStreamCreate(&doomed, flags));
    OK(cuEventRecord(start_, CU_STREAM_LEGACY));
    copies(doomed, kCopies);
    OK(cuStreamDestroy(doomed));
    OK(cuEventRecord(end_, CU_STREAM_LEGACY));
    const float waited = elapsed(start_, end_) / copy_ms_;
    if (flags == CU_STREAM_DEFAULT) {
      EXPECT_GE(waited, kWaited * kCopies);
    } else {
      EXPECT_LT(waited, kNotWaited * kCopies);
    }
    OK(cuCtxSynchronize());
  }
}

// The driver's own time per call is the program's time on both backends (the sim charges the
// real driver's measured cost, timing/driver_call_cost.h; the passthrough the least recent wall
// time of the real call, passthrough/thread_clock.h): 200 small async sets issued between two
// events on an idle stream put about 200 calls' worth of host time between those events, where
// the loop's own CPU time is a few microseconds.
TEST_F(StreamRules, ALoopOfSmallCallsCostsTheDriversTimePerCall) {
  constexpr int kCalls = 200;
  OK(cuEventRecord(start_, non_blocking_));
  for (int i = 0; i < kCalls; ++i) OK(cuMemsetD8Async(dev_, static_cast<unsigned char>(i), 4, other_));
  OK(cuEventRecord(end_, non_blocking_));
  const float ms = elapsed(start_, end_);
  OK(cuCtxSynchronize());
  // The sim: 200 x 2.57 us; the passthrough: 200 x the stand-in's own time per call (~1 us and up).
  EXPECT_GE(ms, kCalls * 0.5e-3f);
  EXPECT_LT(ms, 0.3f * copy_ms_ + kCalls * 0.1f);  // bounded by the calls' own real time at most
}

}  // namespace

