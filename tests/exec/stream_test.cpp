// Streams, events and virtual time of the sim backend, through the driver API of the built
// libcuda.so.1 (embedded default cluster: 8 x H100, PCIe 63 GB/s, kCopyLatency 2 us).
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "../passthrough/virtual_clock_reader.h"

// The per-thread-default-stream variants, which cuda.h declares only for its own build.
extern "C" CUresult CUDAAPI cuStreamGetId_ptsz(CUstream, unsigned long long*);
extern "C" CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream, CUhostFn, void*);

namespace {

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

constexpr double kPcie = 63e9 * 0.87;  // H100 catalog, bytes/s, times the [pcie] efficiency
constexpr double kCopyLatency = 2e-6;

class Exec : public ::testing::Test {
 protected:
  void SetUp() override {
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
  }
  CUcontext ctx = nullptr;
};

struct Gate {  // a host function that blocks its stream until opened
  std::atomic<bool> open{false};
  std::atomic<bool> entered{false};
  static void CUDA_CB fn(void* p) {
    auto* g = static_cast<Gate*>(p);
    g->entered = true;
    while (!g->open) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
};

// Queues 32 MiB of host-to-device copy (about 0.5 ms of virtual time) so that the stream runs
// behind its issuing thread: what follows is then timed by stream order alone, not by how much
// CPU time the test spends between its calls.
// Queues `copies` 32 MiB host-to-device copies (0.6 ms of virtual time each) on `s`, so the host's
// own calls after it (slow under a sanitizer on a loaded machine) stay hidden behind the queue.
void busy(CUstream s, int copies = 1) {
  static std::vector<unsigned char> host(32 << 20, 0);
  static CUdeviceptr d = 0;
  if (d == 0) ASSERT_EQ(cuMemAlloc(&d, host.size()), CUDA_SUCCESS);
  for (int i = 0; i < copies; ++i)
    ASSERT_EQ(cuMemcpyHtoDAsync(d, host.data(), host.size(), s), CUDA_SUCCESS);
}

float elapsed(CUevent a, CUevent b) {
  float ms = -1;
  EXPECT_EQ(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
  return ms;
}

TEST_F(Exec, HostFunctionWriteIsSeenByTheCopyAfterIt) {
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  const size_t n = 4096;
  std::vector<unsigned char> host(n, 0), back(n, 0);
  CUdeviceptr d;
  OK(cuMemAlloc(&d, n));
  Gate gate;
  OK(cuLaunchHostFunc(s, Gate::fn, &gate));
  struct Fill { unsigned char* p; size_t n; } fill{host.data(), n};
  OK(cuLaunchHostFunc(s, [](void* p) { auto* f = static_cast<Fill*>(p); std::memset(f->p, 42, f->n); }, &fill));
  OK(cuMemcpyHtoDAsync(d, host.data(), n, s));
  OK(cuMemcpyDtoHAsync(back.data(), d, n, s));
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(back[0], 0);  // nothing after the blocked host function ran
  gate.open = true;
  OK(cuStreamSynchronize(s));
  EXPECT_EQ(back[0], 42);
  EXPECT_EQ(back[n - 1], 42);
  EXPECT_EQ(cuStreamQuery(s), CUDA_SUCCESS);
  OK(cuMemFree(d));
  OK(cuStreamDestroy(s));
}

// A poll loop that switches its context or asks for its device between two questions (nccl-tests
// sets the device for each GPU it polls) is still waiting: the work's virtual finish, not the
// real time it spun, moves its clock (timing/thread_clock.h, enter_neutral). The gated host
// function keeps the stream busy for 30 ms of real time and takes no virtual time.
TEST_F(Exec, PollingThroughContextCallsIsStillWaiting) {
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  OK(cuStreamSynchronize(s));
  Gate gate;
  OK(cuLaunchHostFunc(s, Gate::fn, &gate));
  // The opener is made before the clock is read: making a thread is the caller's own CPU work
  // (6 ms of it under ThreadSanitizer), which the clock rightly charges.
  std::atomic<bool> go{false};
  std::thread opener([&gate, &go] {
    while (!go.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    gate.open = true;
  });
  const double t0 = vgpu_test::virtual_now();
  const auto real0 = std::chrono::steady_clock::now();
  go = true;
  int polls = 0;
  while (cuStreamQuery(s) == CUDA_ERROR_NOT_READY) {
    ++polls;
    CUcontext c = nullptr;
    CUdevice d = 0;
    int sms = 0;
    EXPECT_EQ(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxSetCurrent(c), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxGetDevice(&d), CUDA_SUCCESS);
    EXPECT_EQ(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d), CUDA_SUCCESS);
  }
  opener.join();
  const double waited = vgpu_test::virtual_now() - t0;
  const double real = std::chrono::duration<double>(std::chrono::steady_clock::now() - real0).count();
  ASSERT_GT(polls, 10);
  ASSERT_GE(real, 0.025);
  EXPECT_LT(waited, 0.005) << "spun " << real << " s real, " << polls << " polls";
  OK(cuStreamDestroy(s));
}

TEST_F(Exec, HostFunctionRunsOnADriverThread) {
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  struct R { std::thread::id id; } r;
  OK(cuLaunchHostFunc(s, [](void* p) { static_cast<R*>(p)->id = std::this_thread::get_id(); }, &r));
  OK(cuStreamSynchronize(s));
  EXPECT_NE(r.id, std::this_thread::get_id());
  EXPECT_NE(r.id, std::thread::id());
  OK(cuStreamDestroy(s));
}

TEST_F(Exec, CrossStreamWaitOrdersWork) {
  CUstream a, b;
  OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e;
  OK(cuEventCreate(&e, 0));
  Gate gate;
  std::atomic<int> order{0};
  struct Mark { std::atomic<int>* order; int seen = -1; } in_b{&order};
  OK(cuLaunchHostFunc(a, Gate::fn, &gate));
  OK(cuLaunchHostFunc(a, [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }, &order));
  OK(cuEventRecord(e, a));
  OK(cuStreamWaitEvent(b, e, 0));
  OK(cuLaunchHostFunc(b, [](void* p) { auto* m = static_cast<Mark*>(p); m->seen = m->order->load(); }, &in_b));
  EXPECT_EQ(cuEventQuery(e), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(in_b.seen, -1);
  gate.open = true;
  OK(cuStreamSynchronize(b));
  EXPECT_EQ(in_b.seen, 1);
  OK(cuEventQuery(e));
  OK(cuEventDestroy(e));
  OK(cuStreamDestroy(a));
  OK(cuStreamDestroy(b));
}

TEST_F(Exec, PrioritiesAndFlagsAreReported) {
  CUstream s;
  int p = 1;
  unsigned f = 9;
  OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -3));
  OK(cuStreamGetPriority(s, &p));
  EXPECT_EQ(p, -3);
  OK(cuStreamGetFlags(s, &f));
  EXPECT_EQ(f, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
  CUcontext c = nullptr;
  OK(cuStreamGetCtx(s, &c));
  EXPECT_EQ(c, ctx);
  CUdevice dev = -1;
  OK(cuStreamGetDevice(s, &dev));
  EXPECT_EQ(dev, 0);
  OK(cuStreamDestroy(s));
  OK(cuStreamCreateWithPriority(&s, 0, -100));  // clamped to the greatest priority
  OK(cuStreamGetPriority(s, &p));
  EXPECT_EQ(p, -5);
  OK(cuStreamDestroy(s));
  OK(cuStreamCreateWithPriority(&s, 0, 7));
  OK(cuStreamGetPriority(s, &p));
  EXPECT_EQ(p, 0);
  OK(cuStreamDestroy(s));
}

TEST_F(Exec, PerThreadDefaultStreamIsPerThread) {
  unsigned long long here = 0, here0 = 0, legacy = 0, other = 0;
  OK(cuStreamGetId(CU_STREAM_PER_THREAD, &here));
  OK(cuStreamGetId_ptsz(nullptr, &here0));
  OK(cuStreamGetId(nullptr, &legacy));
  EXPECT_EQ(here, here0);
  EXPECT_NE(here, legacy);
  CUresult r = CUDA_ERROR_UNKNOWN;
  std::thread t([&] {
    cuCtxSetCurrent(ctx);
    r = cuStreamGetId(CU_STREAM_PER_THREAD, &other);
  });
  t.join();
  OK(r);
  EXPECT_NE(other, here);
  // Without a current context the default stream has no meaning.
  std::thread t2([&] { r = cuStreamQuery(nullptr); });
  t2.join();
  EXPECT_EQ(r, CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(Exec, LegacyStreamWaitsForBlockingStreamsOnly) {
  CUstream blocking, nonblocking;
  OK(cuStreamCreate(&blocking, 0));
  OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  Gate g1, g2;
  std::atomic<int> flag{0};
  auto set = [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); };
  // Behind a blocked non-blocking stream the legacy stream still runs.
  OK(cuLaunchHostFunc(nonblocking, Gate::fn, &g2));
  OK(cuLaunchHostFunc(CU_STREAM_LEGACY, set, &flag));
  OK(cuStreamSynchronize(nullptr));
  EXPECT_EQ(flag.load(), 1);
  // Behind a blocked blocking stream it waits.
  flag = 0;
  OK(cuLaunchHostFunc(blocking, Gate::fn, &g1));
  OK(cuLaunchHostFunc(nullptr, set, &flag));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(flag.load(), 0);
  EXPECT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);
  g1.open = true;
  OK(cuStreamSynchronize(nullptr));
  EXPECT_EQ(flag.load(), 1);
  // ...and a blocking stream waits for earlier legacy work. The per-thread stream is blocking.
  Gate g3;
  flag = 0;
  OK(cuLaunchHostFunc(nullptr, Gate::fn, &g3));
  OK(cuLaunchHostFunc_ptsz(nullptr, set, &flag));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(flag.load(), 0);
  g3.open = true;
  OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  EXPECT_EQ(flag.load(), 1);
  g2.open = true;
  OK(cuCtxSynchronize());
  OK(cuStreamDestroy(blocking));
  OK(cuStreamDestroy(nonblocking));
}

TEST_F(Exec, SequentialCopiesTakeTheSumOfTheirDurations) {
  CUstream s;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const size_t n = 8 << 20;
  std::vector<unsigned char> host(n, 1);
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 2 * n));
  CUevent e0, e1, e2;
  OK(cuEventCreate(&e0, 0));
  OK(cuEventCreate(&e1, 0));
  OK(cuEventCreate(&e2, 0));
  busy(s, 4);
  OK(cuEventRecord(e0, s));
  OK(cuMemcpyHtoDAsync(d, host.data(), n, s));
  OK(cuEventRecord(e1, s));
  OK(cuMemcpyHtoDAsync(d + n, host.data(), n, s));
  OK(cuEventRecord(e2, s));
  OK(cuEventSynchronize(e2));
  const double one = (kCopyLatency + n / kPcie) * 1e3;  // ms
  EXPECT_NEAR(elapsed(e0, e1), one, one * 0.02);
  EXPECT_NEAR(elapsed(e0, e2), 2 * one, one * 0.04);
  OK(cuMemFree(d));
  for (CUevent e : {e0, e1, e2}) OK(cuEventDestroy(e));
  OK(cuStreamDestroy(s));
}

TEST_F(Exec, TwoStreamsOverlap) {
  CUstream a, b;
  OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  const size_t n = 8 << 20;
  std::vector<unsigned char> host(n, 1);
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 2 * n));
  CUevent start, end_a, end_b;
  OK(cuEventCreate(&start, 0));
  OK(cuEventCreate(&end_a, 0));
  OK(cuEventCreate(&end_b, 0));
  busy(a, 4);
  OK(cuEventRecord(start, a));
  OK(cuStreamWaitEvent(b, start, 0));
  OK(cuMemcpyHtoDAsync(d, host.data(), n, a));
  OK(cuMemcpyHtoDAsync(d + n, host.data(), n, b));
  OK(cuEventRecord(end_a, a));
  OK(cuEventRecord(end_b, b));
  OK(cuCtxSynchronize());
  const double one = (kCopyLatency + n / kPcie) * 1e3;
  EXPECT_NEAR(elapsed(start, end_a), one, one * 0.05);
  EXPECT_NEAR(elapsed(start, end_b), one, one * 0.05);  // not 2x: the streams overlap
  OK(cuMemFree(d));
  OK(cuStreamDestroy(a));
  OK(cuStreamDestroy(b));
}

TEST_F(Exec, PeerCopiesSharingALinkTakeTwiceAsLong) {
  CUcontext ctx1;
  OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  OK(cuCtxEnablePeerAccess(ctx1, 0));  // over NVLink only with peer access
  const size_t n = 64 << 20;
  CUdeviceptr src, dst;
  OK(cuMemAlloc(&src, 2 * n));
  OK(cuCtxSetCurrent(ctx1));
  OK(cuMemAlloc(&dst, 2 * n));
  OK(cuCtxSetCurrent(ctx));
  CUstream a, b;
  OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent s0, s1, ea, eb;
  for (CUevent* e : {&s0, &s1, &ea, &eb}) OK(cuEventCreate(e, 0));
  // Alone.
  busy(a, 10);
  OK(cuEventRecord(s0, a));
  OK(cuMemcpyPeerAsync(dst, ctx1, src, ctx, n, a));
  OK(cuEventRecord(ea, a));
  OK(cuStreamSynchronize(a));
  const float alone = elapsed(s0, ea);
  ASSERT_GT(alone, 0);
  // Two at once over the same 0 -> 1 path, queued behind 6 ms of copies: a loaded TSan run spent
  // 1.1 ms of host time between the record and the second copy, more than one busy copy hides.
  busy(a, 10);
  OK(cuEventRecord(s1, a));
  OK(cuStreamWaitEvent(b, s1, 0));
  OK(cuMemcpyPeerAsync(dst, ctx1, src, ctx, n, a));
  OK(cuMemcpyPeerAsync(dst + n, ctx1, src + n, ctx, n, b));
  OK(cuEventRecord(ea, a));
  OK(cuEventRecord(eb, b));
  OK(cuCtxSynchronize());
  EXPECT_NEAR(elapsed(s1, ea), 2 * alone, alone * 0.05);
  EXPECT_NEAR(elapsed(s1, eb), 2 * alone, alone * 0.05);
  OK(cuStreamDestroy(a));
  OK(cuStreamDestroy(b));
  OK(cuMemFree(src));
  OK(cuMemFree(dst));
}

// A peer copy without peer access is staged through host memory at the PCIe rate (with the
// measured efficiency); with it, it uses the NVLink path (the network model).
TEST_F(Exec, PeerCopiesWithoutPeerAccessGoThroughTheHost) {
  CUcontext ctx1;
  OK(cuDevicePrimaryCtxRetain(&ctx1, 2));
  const size_t n = 256 << 20;
  CUdeviceptr src, dst;
  OK(cuMemAlloc(&src, n));
  OK(cuCtxSetCurrent(ctx1));
  OK(cuMemAlloc(&dst, n));
  OK(cuCtxSetCurrent(ctx));
  CUstream a;
  OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CUevent e0, e1;
  for (CUevent* e : {&e0, &e1}) OK(cuEventCreate(e, 0));
  auto timed = [&]() -> float {
    // Behind about 1.2 ms of queued copies, so that this thread's CPU time between the record
    // and the copy (the first peer copy's set-up read 0.098 ms under ASan on a loaded machine)
    // stays hidden: e0..e1 is the copy alone.
    busy(a);
    busy(a);
    EXPECT_EQ(cuEventRecord(e0, a), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyPeerAsync(dst, ctx1, src, ctx, n, a), CUDA_SUCCESS);
    EXPECT_EQ(cuEventRecord(e1, a), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamSynchronize(a), CUDA_SUCCESS);
    return elapsed(e0, e1);
  };
  const float staged = timed();
  // H100: 63 GB/s x 0.87 (the [pcie] efficiency), two DMA latencies.
  EXPECT_NEAR(staged, (2 * kCopyLatency + n / kPcie) * 1e3, 0.01);
  OK(cuCtxEnablePeerAccess(ctx1, 0));
  const float direct = timed();
  EXPECT_LT(direct * 4, staged);  // 450 GB/s x 0.75 over NVLink
  OK(cuCtxDisablePeerAccess(ctx1));
  EXPECT_NEAR(timed(), staged, 0.01);
  OK(cuStreamDestroy(a));
  OK(cuMemFree(src));
  OK(cuMemFree(dst));
}

// "For transfers from device memory to device memory, no host-side synchronization is
// performed" by a synchronous copy: the calling thread's clock does not jump to the copy's end,
// while a device-to-host copy makes it wait.
TEST_F(Exec, SynchronousDeviceToDeviceCopyDoesNotWaitOnTheHost) {
  // The copy is queued behind several milliseconds of work on the legacy stream: had it made the
  // host wait, the host's clock would pass all of that work. The contrast does not depend on how
  // much CPU time this thread spends between its calls (a loaded, sanitized CI machine charged
  // 0.37 ms for the three calls below).
  const size_t n = 64 << 20;
  CUdeviceptr a, b;
  OK(cuMemAlloc(&a, n));
  OK(cuMemAlloc(&b, n));
  CUstream other;
  OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUevent before, after;
  for (CUevent* e : {&before, &after}) OK(cuEventCreate(e, 0));
  OK(cuCtxSynchronize());
  constexpr int kQueued = 8;  // 8 x 32 MiB over PCIe: about 4.9 ms queued on the legacy stream
  for (int i = 0; i < kQueued; ++i) busy(nullptr);
  const double queued = kQueued * (kCopyLatency + (32 << 20) / kPcie) * 1e3;
  OK(cuEventRecord(before, other));
  OK(cuMemcpyDtoD(b, a, n));
  OK(cuEventRecord(after, other));  // what the host reached meanwhile
  OK(cuCtxSynchronize());
  EXPECT_LT(elapsed(before, after), 0.5 * queued);
  // A device-to-host copy behind the same queue makes the host wait for all of it.
  std::vector<unsigned char> host(n);
  for (int i = 0; i < kQueued; ++i) busy(nullptr);
  OK(cuEventRecord(before, other));
  OK(cuMemcpyDtoH(host.data(), a, host.size()));
  OK(cuEventRecord(after, other));
  OK(cuCtxSynchronize());
  EXPECT_GT(elapsed(before, after), queued);
  OK(cuStreamDestroy(other));
  OK(cuMemFree(a));
  OK(cuMemFree(b));
}

TEST_F(Exec, SynchronizeMovesTheThreadClockToTheFinish) {
  // A stream whose work ends later in virtual time than a second, idle stream: an event
  // recorded on the idle stream after synchronizing lies after the work's end.
  CUstream a, b;
  OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  const size_t n = 32 << 20;
  std::vector<unsigned char> host(n, 1);
  CUdeviceptr d;
  OK(cuMemAlloc(&d, n));
  CUevent e0, e1, e2;
  for (CUevent* e : {&e0, &e1, &e2}) OK(cuEventCreate(e, 0));
  OK(cuEventRecord(e0, a));
  OK(cuMemcpyHtoDAsync(d, host.data(), n, a));
  OK(cuEventRecord(e1, a));
  OK(cuStreamSynchronize(a));
  OK(cuEventRecord(e2, b));
  OK(cuEventSynchronize(e2));
  EXPECT_GE(elapsed(e0, e2), elapsed(e0, e1));
  OK(cuMemFree(d));
  OK(cuStreamDestroy(a));
  OK(cuStreamDestroy(b));
}

TEST_F(Exec, EventErrors) {
  CUevent e, nt, never;
  OK(cuEventCreate(&e, 0));
  OK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
  OK(cuEventCreate(&never, 0));
  EXPECT_EQ(cuEventCreate(&e, 0x80), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuEventCreate(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  OK(cuEventRecord(e, nullptr));
  OK(cuEventRecord(nt, nullptr));
  OK(cuEventSynchronize(nt));
  float ms;
  EXPECT_EQ(cuEventElapsedTime(&ms, e, nt), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventElapsedTime(&ms, e, never), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventElapsedTime(nullptr, e, e), CUDA_ERROR_INVALID_VALUE);
  OK(cuEventQuery(never));  // never recorded: nothing pending
  OK(cuEventDestroy(never));
  EXPECT_EQ(cuEventDestroy(never), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventQuery(never), CUDA_ERROR_INVALID_HANDLE);
  OK(cuEventDestroy(e));
  OK(cuEventDestroy(nt));
}

TEST_F(Exec, BadStreamHandles) {
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  OK(cuStreamDestroy(s));
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamSynchronize(reinterpret_cast<CUstream>(0x1234)), CUDA_ERROR_INVALID_HANDLE);
  CUevent e;
  OK(cuEventCreate(&e, 0));
  EXPECT_EQ(cuStreamQuery(reinterpret_cast<CUstream>(e)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventRecord(reinterpret_cast<CUevent>(s), nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamWaitEvent(nullptr, reinterpret_cast<CUevent>(0x99), 0), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamCreate(&s, 0x4), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamCreate(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchHostFunc(nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  int p;
  EXPECT_EQ(cuStreamGetPriority(nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamGetPriority(s, &p), CUDA_ERROR_INVALID_HANDLE);
  OK(cuEventDestroy(e));
}

TEST_F(Exec, DestroyWithPendingWorkCompletesIt) {
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  Gate gate;
  std::atomic<int> flag{0};
  OK(cuLaunchHostFunc(s, Gate::fn, &gate));
  OK(cuLaunchHostFunc(s, [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); }, &flag));
  OK(cuStreamDestroy(s));
  gate.open = true;
  OK(cuCtxSynchronize());
  EXPECT_EQ(flag.load(), 1);
}

TEST_F(Exec, WaitValueBlocksUntilWritten) {
  CUstream waiter, writer;
  OK(cuStreamCreate(&waiter, CU_STREAM_NON_BLOCKING));
  OK(cuStreamCreate(&writer, CU_STREAM_NON_BLOCKING));
  CUdeviceptr word;
  OK(cuMemAlloc(&word, 64));
  OK(cuMemsetD32(word, 0, 1));
  std::atomic<int> flag{0};
  OK(cuStreamWaitValue32(waiter, word, 5, CU_STREAM_WAIT_VALUE_GEQ));
  OK(cuLaunchHostFunc(waiter, [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); }, &flag));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(cuStreamQuery(waiter), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(flag.load(), 0);
  OK(cuStreamWriteValue32(writer, word, 7, 0));
  OK(cuStreamSynchronize(waiter));
  EXPECT_EQ(flag.load(), 1);
  EXPECT_EQ(cuStreamWaitValue32(waiter, 0x10, 1, 0), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemFree(word));
  OK(cuStreamDestroy(waiter));
  OK(cuStreamDestroy(writer));
}

// Each submitting thread is a rank of the simulator whose floor is its own virtual clock. Two
// threads on two devices whose clocks lie far apart: the one behind still submits into the
// other's virtual past, and its work keeps its own times (it is neither moved up to the other
// thread's clock nor reordered after the other's work).
TEST_F(Exec, ThreadsWithFarApartClocksKeepTheirOwnTimes) {
  CUcontext ctx1;
  OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  const size_t big = 32 << 20, small = 8 << 20;
  static std::vector<unsigned char> host(big, 3);
  const double one_big = (kCopyLatency + big / kPcie) * 1e3, one_small = (kCopyLatency + small / kPcie) * 1e3;
  // Copies that move the first thread's clock about 18.4 ms ahead: the thread behind read 3.97 ms
  // of its own CPU time before its first copy in a loaded ASan CI run, and 3.8 ms in a plain one
  // (2026-11-29, against ~0.1 ms unloaded): its CPU clock counts what a loaded virtual machine took
  // (time the vCPU was not running the thread). With 16 copies (9.2 ms) the plain bound was 4.9.
  constexpr int kAhead = 32;
  constexpr double kMargin = 0.25;  // of the ahead thread's copies: at least 4.9 ms

  CUevent a0, a1, b0, b1, b2;
  for (CUevent* e : {&a0, &a1}) OK(cuEventCreate(e, 0));
  // Each thread's events belong to its own device: an event is recorded only on a stream of
  // its device (as the real driver requires).
  CUcontext ctx0;
  OK(cuCtxGetCurrent(&ctx0));
  OK(cuCtxSetCurrent(ctx1));
  for (CUevent* e : {&b0, &b1, &b2}) OK(cuEventCreate(e, 0));
  OK(cuCtxSetCurrent(ctx0));
  // Phases: 2 once both threads submitted (both are ranks), 10 once the first is far ahead. The
  // waits cost no CPU time, which would move a thread's clock.
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;
  auto advance = [&](int to) {
    std::lock_guard lock(mu);
    phase = to < 0 ? phase + 1 : to;
    cv.notify_all();
  };
  auto wait_for = [&](int p) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return phase >= p; });
  };
  std::atomic<int> failures{0};
  auto check = [&](CUresult r) { if (r != CUDA_SUCCESS) ++failures; };

  std::thread ahead([&] {  // device 0: runs far ahead in virtual time
    check(cuCtxSetCurrent(ctx));
    CUstream s;
    CUdeviceptr d;
    check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    check(cuMemAlloc(&d, big));
    check(cuEventRecord(a0, s));
    check(cuEventSynchronize(a0));
    advance(-1);
    wait_for(2);
    // a0 and a1 are taken in stream order (after the first copy, after the last), so the CPU
    // time this thread spends between its calls does not enter them.
    check(cuMemcpyHtoDAsync(d, host.data(), big, s));
    check(cuEventRecord(a0, s));
    for (int i = 1; i < kAhead; ++i) check(cuMemcpyHtoDAsync(d, host.data(), big, s));
    check(cuEventRecord(a1, s));
    check(cuStreamSynchronize(s));  // this thread's clock jumps to the copies' end
    advance(10);
    check(cuMemFree(d));
    check(cuStreamDestroy(s));
  });
  std::thread behind([&] {  // device 1: stays near where it started
    check(cuCtxSetCurrent(ctx1));
    CUstream s;
    CUdeviceptr d;
    check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    check(cuMemAlloc(&d, small));
    check(cuEventRecord(b0, s));
    check(cuEventSynchronize(b0));
    advance(-1);
    wait_for(10);  // in real time, only once the other thread is far ahead
    // Twelve copies (about 1.9 ms) queued first, so that this thread's CPU time for the record
    // and the next copy stays hidden behind them even under TSan on a loaded machine (one copy
    // of 0.155 ms did not: b1..b2 read 0.165 ms; four did not in a TSan CI run: 0.261 ms).
    for (int i = 0; i < 12; ++i) check(cuMemcpyHtoDAsync(d, host.data(), small, s));
    check(cuEventRecord(b1, s));  // in stream order, as a0 and a1
    check(cuMemcpyHtoDAsync(d, host.data(), small, s));
    check(cuEventRecord(b2, s));
    check(cuStreamSynchronize(s));
    check(cuMemFree(d));
    check(cuStreamDestroy(s));
  });
  ahead.join();
  behind.join();
  ASSERT_EQ(failures.load(), 0);

  std::printf("ahead: %.3f ms; behind: %.3f ms to its record, copy %.3f ms, %.3f ms before the "
              "other's end\n", elapsed(a0, a1), elapsed(b0, b1), elapsed(b1, b2), elapsed(b2, a1));
  EXPECT_NEAR(elapsed(a0, a1), (kAhead - 1) * one_big, kAhead * one_big * 0.02);
  // The thread behind spent well under a millisecond of CPU between its records in virtual time,
  // and its copy took its own duration, both in the past of the thread ahead.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (Under sanitizers this thread's own CPU time between the records is many times larger.)
  EXPECT_LT(elapsed(b0, b1), 0.5 * kAhead * one_big);
#endif
  EXPECT_NEAR(elapsed(b1, b2), one_small, one_small * 0.02);
  // Moved up to the other thread's clock, the copy would end at or after a1.
  EXPECT_GT(elapsed(b2, a1), kMargin * kAhead * one_big);
  for (CUevent e : {a0, a1, b0, b1, b2}) OK(cuEventDestroy(e));
  OK(cuDevicePrimaryCtxRelease(1));
}

TEST_F(Exec, ManyThreadsWithTheirOwnStreams) {
  constexpr int kThreads = 8, kIters = 100;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return void(++failures);
      CUstream s;
      if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return void(++failures);
      CUdeviceptr d;
      if (cuMemAlloc(&d, 256) != CUDA_SUCCESS) return void(++failures);
      std::atomic<int> count{0};
      unsigned char in[256], out[256];
      for (int i = 0; i < kIters; ++i) {
        std::memset(in, (t * 31 + i) & 0xff, sizeof in);
        if (cuLaunchHostFunc(s, [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }, &count) ||
            cuMemcpyHtoDAsync(d, in, sizeof in, s) || cuMemcpyDtoHAsync(out, d, sizeof out, s) ||
            cuStreamSynchronize(s))
          ++failures;
        if (out[0] != in[0] || out[255] != in[0]) ++failures;
      }
      if (count.load() != kIters) ++failures;
      cuMemFree(d);
      cuStreamDestroy(s);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
