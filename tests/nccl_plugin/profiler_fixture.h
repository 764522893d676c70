// Test helpers: NCCL's profiler events as NCCL 2.28+ sends them to the profiler vgpu exports
// beside its net plugin (ncclProfiler_v5/_v6), and transfers whose two ends carry NCCL's proxy
// step handles, as NCCL's net transport hands them to isend/irecv.
#pragma once

#include "abi/profiler_v5.h"
#include "abi/profiler_v6.h"
#include "plugin_fixture.h"

namespace vtest {

struct Profiler {
  ncclProfiler_v5_t* v5 = nullptr;
  ncclProfiler_v6_t* v6 = nullptr;
  uint64_t (*current_launch)() = nullptr;
  int (*launch_transfers)(uint64_t, double*, uint64_t*) = nullptr;
  void (*forget_launch)(uint64_t) = nullptr;
  void (*set_launch_clock)(LaunchClockFn) = nullptr;
  void (*set_clock)(ClockFn) = nullptr;
};

inline Profiler& profiler() {
  static Profiler p = [] {
    Profiler q;
    void* dl = plugin().dl;
    if (dl == nullptr) return q;
    q.v5 = static_cast<ncclProfiler_v5_t*>(dlsym(dl, "ncclProfiler_v5"));
    q.v6 = static_cast<ncclProfiler_v6_t*>(dlsym(dl, "ncclProfiler_v6"));
    // The driver's half of the contract, read the way the driver reads it.
    q.current_launch = plugin().side.current_launch;
    q.launch_transfers = plugin().side.launch_transfers;
    q.forget_launch = plugin().side.forget_launch;
    q.set_launch_clock = &vtest::set_launch_clock;
    q.set_clock = &vtest::set_clock;
    return q;
  }();
  return p;
}

// One communicator's profiler context, and the events NCCL starts on it (through v5 or v6).
class Comm {
 public:
  template <class Descr> static Descr describe(uint64_t type, void* parent, void* plan, const char* func = nullptr) {
    Descr d{};
    d.type = type;
    d.parentObj = parent;
    if (type == ncclProfileColl) d.coll.parentGroup = plan;
    if (type == ncclProfileP2p) d.p2p.parentGroup = plan;
    if (type == ncclProfileCollApi) d.collApi.func = func;
    return d;
  }
  explicit Comm(bool v6 = false) : v6_(v6) {
    int mask = 0;
    void** ctx = &ctx_;
    EXPECT_EQ(v6 ? profiler().v6->init(ctx, 1, &mask, "test", 1, 2, 0, nullptr)
                 : profiler().v5->init(ctx, 1, &mask, "test", 1, 2, 0, nullptr),
              ncclSuccess);
    mask_ = mask;
  }
  ~Comm() { EXPECT_EQ(profiler().v5->finalize(ctx_), ncclSuccess); }
  int mask() const { return mask_; }
  void* context() const { return ctx_; }

  void* start(uint64_t type, void* parent, void* plan = nullptr, const char* func = nullptr) {
    void* h = nullptr;
    if (v6_) {
      ncclProfilerEventDescr_v6_t d = describe<ncclProfilerEventDescr_v6_t>(type, parent, plan, func);
      EXPECT_EQ(profiler().v6->startEvent(ctx_, &h, &d), ncclSuccess);
    } else {
      ncclProfilerEventDescr_v5_t d = describe<ncclProfilerEventDescr_v5_t>(type, parent, plan, func);
      EXPECT_EQ(profiler().v5->startEvent(ctx_, &h, &d), ncclSuccess);
    }
    return h;
  }
  static void stop(void* h) { EXPECT_EQ(profiler().v5->stopEvent(h), ncclSuccess); }

  // KernelLaunch of `group`: the tag the driver reads from inside the launch.
  uint64_t launch(void* group) {
    void* h = start(ncclProfileKernelLaunch, group);
    const uint64_t tag = profiler().current_launch();
    stop(h);
    EXPECT_EQ(profiler().current_launch(), 0u) << "the launch ended";
    return tag;
  }
  // One task of a plan, down to a proxy step of it: the step handle NCCL puts beside the transfer.
  void* task_step(void* api, void* plan, uint64_t type = ncclProfileColl) {
    void* task = start(type, api, plan);
    void* op = start(ncclProfileProxyOp, task);
    void* step = start(ncclProfileProxyStep, op);
    stop(task);  // NCCL ends the task event before its proxy work (ops and steps) runs
    return step;
  }

 private:
  bool v6_;
  void* ctx_ = nullptr;
  int mask_ = 0;
};

// The connection from GPU 0 to GPU `dst` (1 to 3), made on first use and kept.
inline Pair& pair_to(int dst) {
  static Pair pairs[4];
  Pair& q = pairs[dst & 3];
  if (q.send == nullptr) q = gpu_pair(0, dst);
  return q;
}

// One transfer from GPU 0 to GPU `to_gpu` whose ends NCCL tagged with these step handles; returns
// the completions of the send and of the receive.
struct Tagged {
  vgpu_nccl_completion send{}, recv{};
};
inline Tagged transfer(void* send_step, void* recv_step, size_t bytes = 4096, int to_gpu = 1) {
  Pair& p = pair_to(to_gpu);
  const auto& n = net();
  Tagged out;
  std::vector<unsigned char> src(bytes, 0x5a), dst(bytes, 0);
  void *smr = nullptr, *rmr = nullptr, *sreq = nullptr, *rreq = nullptr;
  EXPECT_EQ(n.regMr(p.send, src.data(), bytes, NCCL_PTR_HOST, &smr), ncclSuccess);
  EXPECT_EQ(n.regMr(p.recv, dst.data(), bytes, NCCL_PTR_HOST, &rmr), ncclSuccess);
  ncclProxyEventHandle_v5_t send_pair{send_step, nullptr}, recv_pair{recv_step, nullptr};
  EXPECT_EQ(n.isend(p.send, src.data(), bytes, 0, smr, &send_pair, &sreq), ncclSuccess);
  void* d[1] = {dst.data()};
  size_t s[1] = {bytes};
  int t[1] = {0};
  void* m[1] = {rmr};
  void* ph[1] = {&recv_pair};
  EXPECT_EQ(n.irecv(p.recv, 1, d, s, t, m, ph, &rreq), ncclSuccess);
  EXPECT_EQ(wait_all({rreq}), ncclSuccess);
  EXPECT_EQ(plugin().last_completion(&out.recv), 0);
  EXPECT_EQ(wait_all({sreq}), ncclSuccess);
  EXPECT_EQ(plugin().last_completion(&out.send), 0);
  EXPECT_TRUE(src == dst);
  EXPECT_EQ(n.deregMr(p.send, smr), ncclSuccess);
  EXPECT_EQ(n.deregMr(p.recv, rmr), ncclSuccess);
  return out;
}

}  // namespace vtest
