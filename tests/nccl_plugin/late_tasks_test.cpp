// A send/recv kernel of a communicator of more than two ranks on the sim backend whose NCCL tasks
// come only after its thread's next driver call (NCCL's host-stream path; vgpu/sim/exec/nccl_p2p.h):
// - it is placed before that call does anything, on its own: an event recorded right after the
//   launch comes after the kernel;
// - its arrival is posted once its tasks come after all, so that the peer that did learn its own
//   tasks in time, and waits for it, starts after it instead of waiting out the 600 s limit.
// The driver is the sim backend (linked), the plugin is vgpu's (loaded as NCCL would), and the test
// plays NCCL: its profiler events around each launch, a 4-rank communicator's ranks 0 and 1 as two
// threads on GPUs 0 and 1.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "profiler_fixture.h"

using namespace vtest;

namespace {

constexpr uint64_t kComm = 0x5eed;
constexpr int kRanks = 4;
constexpr size_t kCount = 1 << 18;  // floats: 1 MiB
constexpr int kBusy = 400;           // kernels the sender runs first (the fallback duration each)

void* start(void* ctx, const ncclProfilerEventDescr_v5_t& d) {
  void* h = nullptr;
  EXPECT_EQ(profiler().v5->startEvent(ctx, &h, const_cast<ncclProfilerEventDescr_v5_t*>(&d)), ncclSuccess);
  return h;
}
void stop(void* h) { EXPECT_EQ(profiler().v5->stopEvent(h), ncclSuccess); }

struct Rank {
  int rank = 0;
  void* ctx = nullptr;  // its profiler context
  CUcontext cu = nullptr;
  CUmodule module = nullptr;
  CUfunction kernel = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr buf = 0;
};

// One ncclSend/ncclRecv as NCCL reports it up to its kernel launch (the driver's launch inside
// the KernelLaunch event): the group and the call. Its plan and task come later (tasks()).
struct Call {
  void* group = nullptr;
  void* api = nullptr;
};
Call launch(Rank& r, bool send) {
  ncclProfilerEventDescr_v5_t g{};
  g.type = ncclProfileGroupApi;
  Call c;
  c.group = start(r.ctx, g);
  ncclProfilerEventDescr_v5_t a{};
  a.type = ncclProfileP2pApi;
  a.parentObj = c.group;
  a.p2pApi.func = send ? "Send" : "Recv";
  a.p2pApi.count = kCount;
  a.p2pApi.datatype = "ncclFloat32";
  c.api = start(r.ctx, a);
  ncclProfilerEventDescr_v5_t k{};
  k.type = ncclProfileKernelLaunch;
  k.parentObj = c.group;
  void* kh = start(r.ctx, k);
  int* flag = nullptr;
  void* params[] = {&flag};
  EXPECT_EQ(cuLaunchKernel(r.kernel, 1, 1, 1, 32, 1, 1, 0, r.stream, params, nullptr), CUDA_SUCCESS);
  stop(kh);
  return c;
}
// The end of the call and its group (ncclGroupEnd returning; the driver counts a group's calls as
// one bracket of the thread's clock, so only after it is the thread's next call its own).
void end(const Call& c) {
  stop(c.api);
  stop(c.group);
}
// The call's plan and its one P2p task (NCCL's hostStreamPlanTask): the plan's end tells the
// driver that the launch's tasks are all known.
void tasks(Rank& r, const Call& c, bool send, int peer) {
  ncclProfilerEventDescr_v5_t p{};
  p.type = ncclProfileGroup;
  void* plan = start(r.ctx, p);
  ncclProfilerEventDescr_v5_t t{};
  t.type = ncclProfileP2p;
  t.parentObj = c.api;
  t.p2p.func = send ? "Send" : "Recv";
  t.p2p.buff = reinterpret_cast<void*>(r.buf);
  t.p2p.datatype = "ncclFloat32";
  t.p2p.count = kCount;
  t.p2p.peer = peer;
  t.p2p.parentGroup = plan;
  stop(start(r.ctx, t));
  stop(plan);
}

float elapsed_ms(CUevent a, CUevent b) {
  float ms = -1;
  EXPECT_EQ(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
  return ms;
}

TEST(LateTasks, AKernelPlacedBeforeItsTasksCameStillReleasesItsPeer) {
  ASSERT_NE(profiler().v5, nullptr);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  int devices = 0;
  ASSERT_EQ(cuDeviceGetCount(&devices), CUDA_SUCCESS);
  ASSERT_GE(devices, 2);
  std::ifstream in(NCCL_KERNEL_FATBIN, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(image.empty());
  Rank ranks[2];
  void* others[2] = {nullptr, nullptr};  // ranks 2 and 3: this process holds every rank
  for (int r = 0; r < kRanks; ++r) {
    int mask = 0;
    void*& ctx = r < 2 ? ranks[r].ctx : others[r - 2];
    ASSERT_EQ(profiler().v5->init(&ctx, kComm, &mask, "late", 1, kRanks, r, nullptr), ncclSuccess);
  }
  for (int r = 0; r < 2; ++r) {
    Rank& k = ranks[r];
    k.rank = r;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&k.cu, r), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(k.cu), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleLoadData(&k.module, image.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&k.kernel, k.module, "ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE"), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&k.stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&k.buf, kCount * sizeof(float)), CUDA_SUCCESS);
  }

  float busy_ms = -1, send_ms = -1, receive_ms = -1;
  // The receive is timed from an event recorded before either thread starts: a thread's clock
  // may be handed the other's on the way (a condition variable the other signalled), so an
  // event the receiving thread recorded itself could already lie past the send's arrival.
  CUevent receive_begin;
  ASSERT_EQ(cuCtxSetCurrent(ranks[1].cu), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&receive_begin, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(receive_begin, ranks[1].stream), CUDA_SUCCESS);
  std::thread sender([&] {
    Rank& r = ranks[0];
    ASSERT_EQ(cuCtxSetCurrent(r.cu), CUDA_SUCCESS);
    CUevent begin, busy, after;
    for (CUevent* e : {&begin, &busy, &after}) ASSERT_EQ(cuEventCreate(e, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    ASSERT_EQ(cuEventRecord(begin, r.stream), CUDA_SUCCESS);
    int* flag = nullptr;
    void* params[] = {&flag};
    for (int i = 0; i < kBusy; ++i)  // not bracketed by NCCL's events: plain kernels
      ASSERT_EQ(cuLaunchKernel(r.kernel, 1, 1, 1, 32, 1, 1, 0, r.stream, params, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuEventRecord(busy, r.stream), CUDA_SUCCESS);
    const Call c = launch(r, /*send=*/true);
    end(c);                                                    // its tasks not started yet
    ASSERT_EQ(cuEventRecord(after, r.stream), CUDA_SUCCESS);  // before its tasks: the kernel goes first
    tasks(r, c, /*send=*/true, /*peer=*/1);                    // late: as from NCCL's host stream
    ASSERT_EQ(cuStreamSynchronize(r.stream), CUDA_SUCCESS);
    busy_ms = elapsed_ms(begin, busy);
    send_ms = elapsed_ms(busy, after);
  });
  std::thread receiver([&] {
    Rank& r = ranks[1];
    ASSERT_EQ(cuCtxSetCurrent(r.cu), CUDA_SUCCESS);
    CUevent after;
    ASSERT_EQ(cuEventCreate(&after, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    const Call c = launch(r, /*send=*/false);
    tasks(r, c, /*send=*/false, /*peer=*/0);  // in time: it meets the send, which it waits for
    end(c);
    ASSERT_EQ(cuEventRecord(after, r.stream), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(r.stream), CUDA_SUCCESS);
    receive_ms = elapsed_ms(receive_begin, after);
  });
  sender.join();
  receiver.join();
  std::printf("sender's kernels %.3f ms, then its send %.6f ms; the receive, from before both threads, %.3f ms\n", busy_ms,
              send_ms, receive_ms);
  // The send kernel lies between the events around its launch, not after them.
  EXPECT_GT(send_ms, 1e-3) << "the event recorded right after the launch came before the kernel";
  // The receive started no earlier than the send's arrival: after the sender's busy kernels.
  EXPECT_GT(busy_ms, 0.1);
  EXPECT_GE(receive_ms, 0.5 * busy_ms) << "the receive did not wait for its sender";
  for (void* ctx : others) EXPECT_EQ(profiler().v5->finalize(ctx), ncclSuccess);
  for (Rank& r : ranks) EXPECT_EQ(profiler().v5->finalize(r.ctx), ncclSuccess);
}

}  // namespace
