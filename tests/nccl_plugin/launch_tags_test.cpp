// NCCL's profiler events, as NCCL 2.28+ sends them to the profiler vgpu exports beside its net
// plugin, tie every transfer to its kernel launch: the tag the driver reads from inside the
// launch (the contract's current_launch) is the tag the transfers of that launch's collective
// carry into their completions and into the contract's launch_transfers. Driven through the ABI tables
// (ncclProfiler_v5/_v6, ncclNetPlugin_v12) as NCCL does; cluster 2 nodes x 4 GPUs.
#include <set>
#include <thread>
#include <type_traits>

#include "profiler_fixture.h"

using namespace vtest;

namespace {

class LaunchTags : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(plugin().ctx, nullptr);
    ASSERT_NE(profiler().v5, nullptr);
    ASSERT_NE(profiler().v6, nullptr);
    ASSERT_NE(profiler().current_launch, nullptr);
    ASSERT_NE(profiler().launch_transfers, nullptr);
  }
};

}  // namespace

TEST_F(LaunchTags, BothProfilerVersionsActivateTheChainFromTransferToLaunch) {
  EXPECT_STREQ(profiler().v5->name, "vgpu");
  EXPECT_STREQ(profiler().v6->name, "vgpu");
  for (bool v6 : {false, true}) {
    Comm c(v6);
    for (int bit : {ncclProfileGroupApi, ncclProfileCollApi, ncclProfileP2pApi, ncclProfileKernelLaunch,
                    ncclProfileGroup, ncclProfileColl, ncclProfileP2p, ncclProfileProxyOp, ncclProfileProxyStep})
      EXPECT_NE(c.mask() & bit, 0) << "event type bit " << bit;
    // KernelCh would make NCCL add proxy work to every kernel: never asked for.
    EXPECT_EQ(c.mask() & ncclProfileKernelCh, 0);
  }
  ASSERT_NE(plugin().handshake, nullptr);
  EXPECT_EQ(plugin().side.version, VGPU_NCCL_CONTRACT_VERSION);
  EXPECT_EQ(plugin().side.size, sizeof(vgpu_nccl_plugin_side));
}

TEST_F(LaunchTags, BothEndsOfATransferCarryTheirKernelLaunch) {
  for (bool v6 : {false, true}) {
    Comm c(v6);
    void* group = c.start(ncclProfileGroupApi, nullptr);
    void* api = c.start(ncclProfileCollApi, group);
    Comm::stop(api);  // NCCL ends the API event before the launch
    const uint64_t launch = c.launch(group);
    EXPECT_NE(launch, 0u);
    void* plan = c.start(ncclProfileGroup, nullptr);
    void* step = c.task_step(api, plan);
    Tagged t = transfer(step, step);
    EXPECT_EQ(t.send.launch, launch);
    EXPECT_EQ(t.recv.launch, launch);
    Comm::stop(plan);
    Comm::stop(group);

    double finish = -1;
    uint64_t count = 0;
    ASSERT_EQ(profiler().launch_transfers(launch, &finish, &count), 0);
    EXPECT_EQ(count, 2u);
    EXPECT_DOUBLE_EQ(finish, std::max(t.send.finish, t.recv.finish));
    profiler().forget_launch(launch);
    EXPECT_EQ(profiler().launch_transfers(launch, &finish, &count), -1);
  }
}

TEST_F(LaunchTags, PlansMatchTheLaunchesOfTheirGroupInOrderWhicheverComesFirst) {
  Comm c;
  // Launches first (NCCL launches, then starts each plan's tasks)...
  void* group = c.start(ncclProfileGroupApi, nullptr);
  void* api1 = c.start(ncclProfileCollApi, group);
  void* api2 = c.start(ncclProfileCollApi, group);
  const uint64_t l1 = c.launch(group), l2 = c.launch(group);
  EXPECT_NE(l1, l2);
  void* plan1 = c.start(ncclProfileGroup, nullptr);
  void* s1 = c.task_step(api1, plan1);
  void* s1b = c.task_step(api2, plan1);  // a second collective of the same plan (one kernel)
  void* plan2 = c.start(ncclProfileGroup, nullptr);
  void* s2 = c.task_step(api2, plan2);
  EXPECT_EQ(transfer(s1, s1).send.launch, l1);
  EXPECT_EQ(transfer(s1b, s1b).send.launch, l1);
  EXPECT_EQ(transfer(s2, s2).send.launch, l2);
  // ...or plans first (their host callback ran before the launch call returned).
  void* g2 = c.start(ncclProfileGroupApi, nullptr);
  void* api3 = c.start(ncclProfileP2pApi, g2);
  void* plan3 = c.start(ncclProfileGroup, nullptr);
  void* s3 = c.task_step(api3, plan3, ncclProfileP2p);
  void* plan4 = c.start(ncclProfileGroup, nullptr);
  void* s4 = c.task_step(api3, plan4, ncclProfileP2p);
  const uint64_t l3 = c.launch(g2), l4 = c.launch(g2);
  EXPECT_EQ(transfer(s3, s3).send.launch, l3);
  EXPECT_EQ(transfer(s4, s4).recv.launch, l4);
  std::set<uint64_t> distinct{l1, l2, l3, l4};
  EXPECT_EQ(distinct.size(), 4u);
  for (void* h : {api1, api2, plan1, plan2, group, api3, plan3, plan4, g2}) Comm::stop(h);
}

TEST_F(LaunchTags, CommunicatorsInOneGroupEachKeepTheirOwnOrder) {
  // One thread's group over two communicators (as a single process driving two GPUs does).
  Comm a, b;
  void* group = a.start(ncclProfileGroupApi, nullptr);
  void* api_a = a.start(ncclProfileCollApi, group);
  void* api_b = b.start(ncclProfileCollApi, group);
  const uint64_t la = a.launch(group);
  const uint64_t lb = b.launch(group);
  EXPECT_NE(la, lb);
  void* plan_b = b.start(ncclProfileGroup, nullptr);  // b's plan runs its tasks first
  void* sb = b.task_step(api_b, plan_b);
  void* plan_a = a.start(ncclProfileGroup, nullptr);
  void* sa = a.task_step(api_a, plan_a);
  Tagged t = transfer(sa, sb);  // a sends to b
  EXPECT_EQ(t.send.launch, la);
  EXPECT_EQ(t.recv.launch, lb);
  for (void* h : {api_a, api_b, plan_a, plan_b, group}) Comm::stop(h);
}

TEST_F(LaunchTags, WhatCannotBeTracedCarriesNoTagAndBreaksNothing) {
  Comm c;
  // A launch whose group vgpu never saw.
  void* h = c.start(ncclProfileKernelLaunch, nullptr);
  EXPECT_NE(h, nullptr);
  EXPECT_EQ(profiler().current_launch(), 0u);
  Comm::stop(h);
  // Tasks under a parent that is no handle of vgpu's (a real pointer, as another profiler's).
  int foreign = 0;
  void* step = c.task_step(&foreign, &foreign);
  EXPECT_EQ(transfer(step, step).send.launch, 0u);
  // NCCL's pair with no step handle (the step event type inactive), and no pair at all.
  EXPECT_EQ(transfer(nullptr, nullptr).recv.launch, 0u);
  // Events vgpu does not follow, and stops of handles it never gave.
  EXPECT_EQ(c.start(ncclProfileProxyCtrl, nullptr), nullptr);
  EXPECT_EQ(c.start(ncclProfileKernelCh, nullptr), nullptr);
  EXPECT_EQ(c.start(ncclProfileNetPlugin, nullptr), nullptr);
  Comm::stop(nullptr);
  Comm::stop(&foreign);
  void* null_handle = nullptr;
  EXPECT_EQ(profiler().v5->startEvent(nullptr, &null_handle, nullptr), ncclSuccess);
  EXPECT_EQ(profiler().v5->startEvent(nullptr, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(profiler().v5->recordEventState(nullptr, 0, nullptr), ncclSuccess);
  double f = 0;
  EXPECT_EQ(profiler().launch_transfers(0, &f, nullptr), -1);
  EXPECT_EQ(profiler().launch_transfers(12345, nullptr, nullptr), -1);
  // A plan of a group retired long ago: its tag is unknown, not another group's.
  void* old_group = c.start(ncclProfileGroupApi, nullptr);
  void* old_api = c.start(ncclProfileCollApi, old_group);
  Comm::stop(old_api);
  Comm::stop(old_group);
  for (int i = 0; i < 9000; ++i) Comm::stop(c.start(ncclProfileGroupApi, nullptr));
  void* plan = c.start(ncclProfileGroup, nullptr);
  void* late = c.task_step(old_api, plan);
  EXPECT_EQ(transfer(late, late).send.launch, 0u);
  Comm::stop(plan);
}

namespace {
// Launch clock for the next test: launch -> its kernel's virtual start.
std::atomic<uint64_t> g_first{0}, g_second{0};
double launch_clock(int, uint64_t launch) {
  if (launch == g_first.load()) return 100.0;
  if (launch == g_second.load()) return 200.0;
  return -1;
}
double gpu_clock(int) { return 300.0; }  // what transfers of an unknown launch would get
}  // namespace

TEST_F(LaunchTags, EachKernelIsTimedByItsOwnTransfersWhenTheHostRunsAhead) {
  // The host launches two collectives before any of their transfers move (as a training loop
  // does): attribution by launch order would give the first kernel nothing and the second both.
  // With launch tags each kernel gets its own, each starting at its own kernel's virtual start.
  ASSERT_NE(profiler().set_launch_clock, nullptr);
  ASSERT_NE(profiler().set_clock, nullptr);
  Comm c;
  void* group = c.start(ncclProfileGroupApi, nullptr);
  void* api1 = c.start(ncclProfileCollApi, group);
  const uint64_t l1 = c.launch(group);
  void* plan1 = c.start(ncclProfileGroup, nullptr);
  void* s1 = c.task_step(api1, plan1);
  void* g2 = c.start(ncclProfileGroupApi, nullptr);
  void* api2 = c.start(ncclProfileCollApi, g2);
  const uint64_t l2 = c.launch(g2);
  void* plan2 = c.start(ncclProfileGroup, nullptr);
  void* s2 = c.task_step(api2, plan2);
  g_first = l1;
  g_second = l2;
  profiler().set_launch_clock(&launch_clock);
  profiler().set_clock(&gpu_clock);
  const size_t bytes = 45'000'000;  // 0 -> 1 over NVLink: ~133 us at 337.5 GB/s
  Tagged first = transfer(s1, s1, bytes);
  Tagged second = transfer(s2, s2, bytes);
  profiler().set_launch_clock(nullptr);
  profiler().set_clock(nullptr);
  EXPECT_DOUBLE_EQ(first.send.start, 100.0);
  EXPECT_DOUBLE_EQ(second.send.start, 200.0);
  EXPECT_NEAR(first.send.finish - first.send.start, bytes / 337.5e9, 5e-6);
  double f1 = 0, f2 = 0;
  uint64_t n1 = 0, n2 = 0;
  ASSERT_EQ(profiler().launch_transfers(l1, &f1, &n1), 0);
  ASSERT_EQ(profiler().launch_transfers(l2, &f2, &n2), 0);
  EXPECT_EQ(n1, 2u);
  EXPECT_EQ(n2, 2u);
  EXPECT_DOUBLE_EQ(f1, first.send.finish);
  EXPECT_DOUBLE_EQ(f2, second.send.finish);
  EXPECT_LT(f1, 101.0);
  EXPECT_GT(f2, 200.0);
  for (void* h : {api1, plan1, group, api2, plan2, g2}) Comm::stop(h);
}

namespace {
// Launch clock of the ring test: three ranks' kernels, the first begun last.
std::atomic<uint64_t> g_ring[3] = {};
double ring_clock(int, uint64_t launch) {
  const double starts[3] = {300.0, 200.0, 150.0};
  for (int i = 0; i < 3; ++i)
    if (launch == g_ring[i].load()) return starts[i];
  return -1;
}
}  // namespace

// A ring forwards what it received: the kernel of rank 2, which hears only from rank 1, cannot end
// before rank 0 began, because rank 1 passed on rank 0's data. Each rank's `ready` (when all ranks
// it depends on had begun, which the driver times the collective from) is therefore the latest
// start of every rank upstream, carried from receive to send (on 8 ranks of one H200 a rank's
// all-reduce ended before another rank had begun it).
TEST_F(LaunchTags, ARingPassesOnWhenEveryRankUpstreamBegan) {
  ASSERT_NE(plugin().side.launch_window, nullptr);
  Comm c;
  void* groups[3];
  void* apis[3];
  void* plans[3];
  void* steps[3];
  for (int i = 0; i < 3; ++i) {
    groups[i] = c.start(ncclProfileGroupApi, nullptr);
    apis[i] = c.start(ncclProfileCollApi, groups[i]);
    g_ring[i] = c.launch(groups[i]);
    plans[i] = c.start(ncclProfileGroup, nullptr);
    steps[i] = c.task_step(apis[i], plans[i]);
  }
  profiler().set_launch_clock(&ring_clock);
  transfer(steps[0], steps[1]);  // rank 0 (began at 300) -> rank 1 (200)
  transfer(steps[1], steps[2]);  // rank 1 -> rank 2 (150), after rank 1 heard from rank 0
  profiler().set_launch_clock(nullptr);
  double ready = -1, last = -1;
  uint64_t n = 0;
  ASSERT_EQ(plugin().side.launch_window(g_ring[1], &ready, &last, &n), 0);
  EXPECT_DOUBLE_EQ(ready, 300.0);
  ASSERT_EQ(plugin().side.launch_window(g_ring[2], &ready, &last, &n), 0);
  EXPECT_DOUBLE_EQ(ready, 300.0) << "rank 2 knew only that its neighbour began at 200";
  for (int i = 0; i < 3; ++i) {
    for (void* h : {apis[i], plans[i], groups[i]}) Comm::stop(h);
    profiler().forget_launch(g_ring[i]);
  }
}

TEST_F(LaunchTags, ManyThreadsLaunchingAtOnceGetDistinctTags) {
  constexpr int kThreads = 8, kGroups = 300;
  std::vector<std::vector<uint64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Comm c(i % 2 == 1);
      for (int g = 0; g < kGroups; ++g) {
        void* group = c.start(ncclProfileGroupApi, nullptr);
        void* api = c.start(ncclProfileCollApi, group);
        Comm::stop(api);
        seen[i].push_back(c.launch(group));
        void* plan = c.start(ncclProfileGroup, nullptr);
        void* task = c.start(ncclProfileColl, api, plan);
        void* op = c.start(ncclProfileProxyOp, task);
        for (int s = 0; s < 8; ++s) Comm::stop(c.start(ncclProfileProxyStep, op));
        for (void* h : {op, task, plan, group}) Comm::stop(h);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<uint64_t> all;
  for (const auto& v : seen) {
    for (uint64_t tag : v) {
      EXPECT_NE(tag, 0u);
      all.insert(tag);
    }
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kGroups));
}

namespace {

// An API event of `group` (CollApi or P2pApi: one call's function, count and datatype) started
// through the v6 or the v5 descriptor; its handle.
void* api_event(Comm& c, bool v6, uint64_t type, void* group, const char* func, size_t count, const char* dtype) {
  void* h = nullptr;
  auto fill = [&](auto& d) {
    if (type == ncclProfileCollApi)
      d.collApi.func = func, d.collApi.count = count, d.collApi.datatype = dtype;
    else
      d.p2pApi.func = func, d.p2pApi.count = count, d.p2pApi.datatype = dtype;
  };
  if (v6) {
    auto d = Comm::describe<ncclProfilerEventDescr_v6_t>(type, group, nullptr);
    fill(d);
    EXPECT_EQ(profiler().v6->startEvent(c.context(), &h, &d), ncclSuccess);
  } else {
    auto d = Comm::describe<ncclProfilerEventDescr_v5_t>(type, group, nullptr);
    fill(d);
    EXPECT_EQ(profiler().v5->startEvent(c.context(), &h, &d), ncclSuccess);
  }
  return h;
}

// A send/recv entry of a launch's description: its function, bytes to other ranks, distinct
// other ranks and whether the rank's own share is among them (vgpu_nccl_operation).
void expect_p2p(const vgpu_nccl_operation& o, const char* func, uint64_t bytes, int peers, int self) {
  EXPECT_STREQ(o.func, func);
  EXPECT_EQ(o.bytes, bytes);
  EXPECT_EQ(o.peers, peers);
  EXPECT_EQ(o.self, self);
}

}  // namespace

// The one description of a launch (the contract's describe_launch) both backends time an NCCL
// kernel by: from inside the launch (the sim backend), the collective calls of its group on its
// communicator (CollApi events), one operation per call, all given to the group's first kernel
// on that communicator.
TEST_F(LaunchTags, ALaunchKnowsItsGroupsCollectiveCallsOnItsCommunicator) {
  const auto describe = plugin().side.describe_launch;
  ASSERT_NE(describe, nullptr);
  for (bool v6 : {false, true}) {
    Comm a(v6), b(v6);
    void* group = a.start(ncclProfileGroupApi, nullptr);
    auto call = [&](Comm& c, const char* func, size_t count, const char* type) {
      Comm::stop(api_event(c, v6, ncclProfileCollApi, group, func, count, type));
    };
    call(a, "AllReduce", 1000, "ncclFloat32");
    call(b, "AllGather", 77, "ncclBfloat16");
    call(a, "ReduceScatter", 5, "ncclWhatever");
    const uint64_t la = a.launch(group), la2 = a.launch(group), lb = b.launch(group);
    vgpu_nccl_launch out{};
    ASSERT_EQ(describe(la, &out), 0);
    ASSERT_EQ(out.count, 2);
    EXPECT_STREQ(out.op[0].func, "AllReduce");
    EXPECT_EQ(out.op[0].bytes, 4000u);
    EXPECT_EQ(out.comm_id, 1u);  // the fixture's communicator: id 1, 2 ranks, rank 0
    EXPECT_EQ(out.nranks, 2);
    EXPECT_EQ(out.rank, 0);
    EXPECT_STREQ(out.op[1].func, "ReduceScatter");
    EXPECT_EQ(out.op[1].bytes, 5u);  // unknown datatype: the count
    ASSERT_EQ(describe(la2, &out), 0);
    EXPECT_EQ(out.count, 0);  // a second kernel of the group: its calls went to the first
    ASSERT_EQ(describe(lb, &out), 0);
    ASSERT_EQ(out.count, 1);
    EXPECT_STREQ(out.op[0].func, "AllGather");
    EXPECT_EQ(out.op[0].bytes, 154u);
    EXPECT_EQ(describe(0, &out), -1);
    EXPECT_EQ(describe(la + 1000000, &out), -1);  // unknown launch
    EXPECT_EQ(describe(la, nullptr), -1);
    Comm::stop(group);
  }
}

namespace {

// A Coll or P2p event of `plan`'s kernel with what NCCL tells of the operation.
void* operation(Comm& c, uint64_t type, void* api, void* plan, const char* func, size_t count, const char* dtype,
                int peer = -1) {
  ncclProfilerEventDescr_v5_t d{};
  d.type = type;
  d.parentObj = api;
  if (type == ncclProfileColl) {
    d.coll.parentGroup = plan;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.datatype = dtype;
  } else {
    d.p2p.parentGroup = plan;
    d.p2p.func = func;
    d.p2p.count = count;
    d.p2p.datatype = dtype;
    d.p2p.peer = peer;
  }
  void* h = nullptr;
  EXPECT_EQ(profiler().v5->startEvent(c.context(), &h, &d), ncclSuccess);
  return h;
}

// The same description once the kernel's tasks are known (what the passthrough reads after
// the kernel completed): without the group's calls, its Coll tasks (one operation each); its
// Send/Recv tasks as one operation per kind, with the peers and the rank's own share.
TEST_F(LaunchTags, EachLaunchKnowsWhatItDoesForTheCollectiveModel) {
  const auto describe = plugin().side.describe_launch;
  ASSERT_NE(describe, nullptr);
  Comm c;  // 2 ranks on 1 node, this one rank 0
  // A coalesced group of two all-reduces whose API events the profiler did not see.
  void* group = c.start(ncclProfileGroupApi, nullptr);
  void* api = c.start(ncclProfileP2pApi, group);
  const uint64_t launch = c.launch(group);
  void* plan = c.start(ncclProfileGroup, nullptr);
  Comm::stop(operation(c, ncclProfileColl, api, plan, "AllReduce", 1000, "ncclFloat32"));
  Comm::stop(operation(c, ncclProfileColl, api, plan, "AllReduce", 500, "ncclBfloat16"));
  vgpu_nccl_launch w{};
  ASSERT_EQ(describe(launch, &w), 0);
  EXPECT_EQ(w.nranks, 2);
  EXPECT_EQ(w.nnodes, 1);
  ASSERT_EQ(w.count, 2);
  EXPECT_STREQ(w.op[0].func, "AllReduce");
  EXPECT_EQ(w.op[0].bytes, 1000u * 4);
  EXPECT_EQ(w.op[1].bytes, 500u * 2);
  Comm::stop(plan);
  Comm::stop(api);
  Comm::stop(group);

  // With the group's calls seen (CollApi), the calls describe the collectives and the tasks
  // that follow add nothing: one description, whichever backend asks and when.
  void* g1 = c.start(ncclProfileGroupApi, nullptr);
  ncclProfilerEventDescr_v5_t d = Comm::describe<ncclProfilerEventDescr_v5_t>(ncclProfileCollApi, g1, nullptr);
  d.collApi.func = "AllReduce", d.collApi.count = 1000, d.collApi.datatype = "ncclFloat32";
  void* coll_api = nullptr;
  ASSERT_EQ(profiler().v5->startEvent(c.context(), &coll_api, &d), ncclSuccess);
  const uint64_t launch1 = c.launch(g1);
  void* plan1 = c.start(ncclProfileGroup, nullptr);
  Comm::stop(operation(c, ncclProfileColl, coll_api, plan1, "AllReduce", 1000, "ncclFloat32"));
  ASSERT_EQ(describe(launch1, &w), 0);
  ASSERT_EQ(w.count, 1);
  EXPECT_EQ(w.op[0].bytes, 4000u);
  Comm::stop(plan1);
  Comm::stop(coll_api);
  Comm::stop(g1);

  // An all-to-all's sends include the rank's own share (a local copy, no bytes on a link).
  void* g2 = c.start(ncclProfileGroupApi, nullptr);
  void* p2p_api = c.start(ncclProfileP2pApi, g2);
  const uint64_t launch2 = c.launch(g2);
  void* plan2 = c.start(ncclProfileGroup, nullptr);
  Comm::stop(operation(c, ncclProfileP2p, p2p_api, plan2, "Send", 256, "ncclUint8", /*peer=*/0));
  Comm::stop(operation(c, ncclProfileP2p, p2p_api, plan2, "Send", 256, "ncclUint8", /*peer=*/1));
  Comm::stop(operation(c, ncclProfileP2p, p2p_api, plan2, "Recv", 256, "ncclUint8", /*peer=*/1));
  ASSERT_EQ(describe(launch2, &w), 0);
  ASSERT_EQ(w.count, 2);
  expect_p2p(w.op[0], "Send", 256u, 1, 1);
  EXPECT_STREQ(w.op[1].func, "Recv");
  EXPECT_EQ(w.op[1].self, 0);
  Comm::stop(plan2);
  Comm::stop(p2p_api);
  Comm::stop(g2);
  // A launch the profiler never saw.
  EXPECT_EQ(describe(launch2 + 1000000, &w), -1);
}

// A send/recv group's calls (P2pApi events) describe its kernel from the launch on, as the
// collectives' do: NCCL starts the kernel's P2p tasks only after the launch, where the sim
// backend times it. The calls name no peer: one Send per rank of the communicator is an
// all-to-all (the rank's own share among them, kept off the link); otherwise each call a peer.
// The tasks that follow (they name the peers) describe the kernel from then on, exactly: the
// same here, where the calls told it right; an uneven all-to-all's true bytes below.
TEST_F(LaunchTags, ASendRecvGroupsCallsDescribeItsKernelAtTheLaunch) {
  const auto describe = plugin().side.describe_launch;
  ASSERT_NE(describe, nullptr);
  for (bool v6 : {false, true}) {
    Comm c(v6);  // 2 ranks, this one rank 0
    auto call = [&](void* group, const char* func, size_t count) {
      return api_event(c, v6, ncclProfileP2pApi, group, func, count, "ncclFloat32");
    };
    // A send to the next rank and a receive from the one before (a pipeline stage's exchange).
    void* g1 = c.start(ncclProfileGroupApi, nullptr);
    void* send = call(g1, "Send", 1000);
    void* recv = call(g1, "Recv", 1000);
    const uint64_t l1 = c.launch(g1);
    vgpu_nccl_launch w{};
    ASSERT_EQ(describe(l1, &w), 0);
    ASSERT_EQ(w.count, 2);
    expect_p2p(w.op[0], "Send", 4000u, 1, 0);
    EXPECT_STREQ(w.op[1].func, "Recv");
    EXPECT_EQ(w.op[1].bytes, 4000u);
    void* plan1 = c.start(ncclProfileGroup, nullptr);
    Comm::stop(operation(c, ncclProfileP2p, send, plan1, "Send", 1000, "ncclFloat32", /*peer=*/1));
    Comm::stop(operation(c, ncclProfileP2p, recv, plan1, "Recv", 1000, "ncclFloat32", /*peer=*/1));
    ASSERT_EQ(describe(l1, &w), 0);
    ASSERT_EQ(w.count, 2);  // the tasks told the same
    EXPECT_EQ(w.op[0].bytes, 4000u);
    for (void* h : {plan1, send, recv, g1}) Comm::stop(h);

    // An all-to-all: a send to and a receive from every rank, its own included.
    void* g2 = c.start(ncclProfileGroupApi, nullptr);
    std::vector<void*> calls;
    for (int peer = 0; peer < 2; ++peer) {
      calls.push_back(call(g2, "Send", 128));
      calls.push_back(call(g2, "Recv", 128));
    }
    const uint64_t l2 = c.launch(g2);
    ASSERT_EQ(describe(l2, &w), 0);
    ASSERT_EQ(w.count, 2);
    expect_p2p(w.op[0], "Send", 512u, 1, 1);  // to the other rank; the own share stays
    EXPECT_EQ(w.op[1].self, 1);
    // Its tasks: 100 floats to itself and 156 to the other rank (the calls' even split guessed
    // 128 each): the other rank's 624 bytes stand from then on.
    void* plan2 = c.start(ncclProfileGroup, nullptr);
    Comm::stop(operation(c, ncclProfileP2p, calls[0], plan2, "Send", 100, "ncclFloat32", /*peer=*/0));
    Comm::stop(operation(c, ncclProfileP2p, calls[2], plan2, "Send", 156, "ncclFloat32", /*peer=*/1));
    ASSERT_EQ(describe(l2, &w), 0);
    ASSERT_GE(w.count, 1);
    expect_p2p(w.op[0], "Send", 624u, 1, 1);
    Comm::stop(plan2);
    for (void* h : calls) Comm::stop(h);
    Comm::stop(g2);
  }
}

// The contract's launch_tasks: the buffers of each task of a launch as NCCL's Coll/P2p events
// describe them (what the sim backend moves a collective's data by), complete once the plan's
// event ended; through either descriptor version.
template <class Descr> void* coll_task(Comm& c, ncclProfiler_v5_t* v5, ncclProfiler_v6_t* v6, void* api, void* plan,
                                       const char* func, const void* send, void* recv, size_t count, int root) {
  Descr d = Comm::describe<Descr>(ncclProfileColl, api, plan);
  d.coll.func = func, d.coll.sendBuff = send, d.coll.recvBuff = recv, d.coll.count = count;
  d.coll.datatype = "ncclFloat32", d.coll.root = root;
  void* h = nullptr;
  if constexpr (std::is_same_v<Descr, ncclProfilerEventDescr_v6_t>)
    EXPECT_EQ(v6->startEvent(c.context(), &h, &d), ncclSuccess);
  else
    EXPECT_EQ(v5->startEvent(c.context(), &h, &d), ncclSuccess);
  return h;
}

TEST_F(LaunchTags, ALaunchTellsItsTasksBuffersOnceItsPlanEnded) {
  const auto tasks = plugin().side.launch_tasks;
  ASSERT_NE(tasks, nullptr);
  for (bool v6 : {false, true}) {
    Comm c(v6);
    void* group = c.start(ncclProfileGroupApi, nullptr);
    void* api = c.start(ncclProfileCollApi, group);
    const uint64_t launch = c.launch(group);
    vgpu_nccl_task t[4]{};
    int n = -1;
    EXPECT_EQ(tasks(launch, t, 4, &n), 0) << "known, its tasks not started yet";
    EXPECT_EQ(n, 0);
    void* plan = c.start(ncclProfileGroup, nullptr);
    char a[16], b[64];
    void* h1 = v6 ? coll_task<ncclProfilerEventDescr_v6_t>(c, profiler().v5, profiler().v6, api, plan, "AllGather", a, b, 4, 0)
                  : coll_task<ncclProfilerEventDescr_v5_t>(c, profiler().v5, profiler().v6, api, plan, "AllGather", a, b, 4, 0);
    void* h2 = v6 ? coll_task<ncclProfilerEventDescr_v6_t>(c, profiler().v5, profiler().v6, api, plan, "Broadcast", b, b, 16, 1)
                  : coll_task<ncclProfilerEventDescr_v5_t>(c, profiler().v5, profiler().v6, api, plan, "Broadcast", b, b, 16, 1);
    Comm::stop(h1);
    Comm::stop(h2);
    EXPECT_EQ(tasks(launch, t, 4, &n), 0) << "the plan's event has not ended: more tasks may come";
    Comm::stop(plan);
    ASSERT_EQ(tasks(launch, t, 4, &n), 1);
    ASSERT_EQ(n, 2);
    EXPECT_STREQ(t[0].func, "AllGather");
    EXPECT_STREQ(t[0].datatype, "ncclFloat32");
    EXPECT_EQ(t[0].send, static_cast<const void*>(a));
    EXPECT_EQ(t[0].recv, static_cast<void*>(b));
    EXPECT_EQ(t[0].count, 4u);
    EXPECT_STREQ(t[1].func, "Broadcast");
    EXPECT_EQ(t[1].root, 1);
    EXPECT_EQ(t[1].count, 16u);
    EXPECT_EQ(tasks(launch, t, 1, &n), 1);  // room for one: one written
    EXPECT_EQ(n, 1);
    Comm::stop(api);
    Comm::stop(group);
    EXPECT_EQ(tasks(launch + 1000000, t, 4, &n), -1) << "a launch the profiler never saw";
    EXPECT_EQ(tasks(launch, nullptr, 4, &n), -1);
  }
}

// The contract's launch_tasks_done: the plan's end tells the driver, once, that the launch's
// tasks are all known (the sim backend holds a send/recv kernel of a larger communicator until
// then: only its tasks name its peers), with no lock of the plugin held: the driver reads the
// tasks from inside the call.
std::vector<uint64_t> g_done;
int g_done_count = -2;
void tasks_done(uint64_t launch) {
  g_done.push_back(launch);
  vgpu_nccl_task t[4]{};
  int n = 0;
  g_done_count = plugin().side.launch_tasks(launch, t, 4, &n) == 1 ? n : -1;
}

TEST_F(LaunchTags, ThePlansEndTellsTheDriverThatItsLaunchsTasksAreKnown) {
  for (bool v6 : {false, true}) {
    g_done.clear();
    g_done_count = -2;
    driver_clocks().tasks_done = &tasks_done;
    ASSERT_TRUE(hand_over_clocks());
    Comm c(v6);
    void* group = c.start(ncclProfileGroupApi, nullptr);
    void* api = c.start(ncclProfileCollApi, group);
    const uint64_t launch = c.launch(group);
    void* plan = c.start(ncclProfileGroup, nullptr);
    char a[16], b[64];
    void* h = v6 ? coll_task<ncclProfilerEventDescr_v6_t>(c, profiler().v5, profiler().v6, api, plan, "AllGather", a, b, 4, 0)
                 : coll_task<ncclProfilerEventDescr_v5_t>(c, profiler().v5, profiler().v6, api, plan, "AllGather", a, b, 4, 0);
    Comm::stop(h);
    Comm::stop(api);
    EXPECT_TRUE(g_done.empty()) << "the plan has not ended: more tasks may come";
    Comm::stop(plan);
    EXPECT_EQ(g_done, std::vector<uint64_t>{launch}) << "v6 " << v6;
    EXPECT_EQ(g_done_count, 1) << "the tasks are readable from inside the call";
    Comm::stop(group);
    EXPECT_EQ(g_done.size(), 1u) << "once per launch";
    driver_clocks() = DriverClocks{};
    ASSERT_TRUE(hand_over_clocks());
  }
}

}  // namespace

// The contract's local_ranks: how many of a communicator's ranks this process holds, counted
// from the profiler contexts NCCL opens (one per rank's communicator) and closes.
TEST_F(LaunchTags, LocalRanksCountTheOpenContextsOfACommunicator) {
  const auto local = plugin().side.local_ranks;
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local(1), 0);
  {
    Comm a;
    EXPECT_EQ(local(1), 1);
    {
      Comm b(true);
      EXPECT_EQ(local(1), 2);
      EXPECT_EQ(local(2), 0);  // another communicator
    }
    EXPECT_EQ(local(1), 1);
  }
  EXPECT_EQ(local(1), 0);
}

// The profiler's callbacks are vgpu's own work, which the real job does not do: each is bracketed
// by the driver's own_work hooks (contracts/nccl_plugin.h), so the thread's virtual clock is not
// charged for it (nccl-tests' small sizes are bound by the host: ~10 callbacks an iteration). A
// driver that hands over only one of the pair gets neither call (a begin without its end would
// leave the clock paused).
namespace {
std::atomic<int> g_begins{0}, g_ends{0}, g_depth{0}, g_deepest{0};
void own_begin() {
  ++g_begins;
  const int d = ++g_depth;
  if (d > g_deepest) g_deepest = d;
}
void own_end() {
  ++g_ends;
  --g_depth;
}
void one_launch(Comm& c) {
  void* group = c.start(ncclProfileGroupApi, nullptr);
  void* api = c.start(ncclProfileCollApi, group);
  Comm::stop(api);
  c.launch(group);
  Comm::stop(group);
}
}  // namespace

TEST_F(LaunchTags, EveryCallbackIsBracketedAsTheDriversOwnWork) {
  for (bool v6 : {false, true}) {
    Comm c(v6);
    g_begins = g_ends = g_deepest = 0;
    driver_clocks().own_work_begin = &own_begin;
    driver_clocks().own_work_end = &own_end;
    ASSERT_TRUE(hand_over_clocks());
    one_launch(c);
    // three starts and three stops
    EXPECT_EQ(g_begins.load(), 6) << "v6 " << v6;
    EXPECT_EQ(g_ends.load(), 6);
    EXPECT_EQ(g_depth.load(), 0);
    EXPECT_EQ(g_deepest.load(), 1);

    driver_clocks().own_work_end = nullptr;  // half a pair: neither is called
    ASSERT_TRUE(hand_over_clocks());
    one_launch(c);
    EXPECT_EQ(g_begins.load(), 6);
    EXPECT_EQ(g_ends.load(), 6);
    driver_clocks().own_work_begin = nullptr;
    ASSERT_TRUE(hand_over_clocks());
  }
}

// NCCL's host cost model (contracts/nccl_plugin.h nccl_group_*, issue 18): the driver hears of
// each group on the calling thread, each call in it with its rank's communicator and whether it
// is an all-reduce, each kernel launch (before NCCL's cuLaunchKernel), and the group's end, in
// that order; with only some of the four hooks handed over, none is called.
namespace {
std::vector<std::string> g_group_calls;
void group_begin() { g_group_calls.push_back("begin"); }
void group_operation(uint64_t comm, int all_reduce) {
  g_group_calls.push_back("op " + std::to_string(comm) + " " + std::to_string(all_reduce));
}
void group_launch() { g_group_calls.push_back("launch"); }
void group_end() { g_group_calls.push_back("end"); }
}  // namespace

TEST_F(LaunchTags, TheDriverHearsOfEachGroupItsCallsAndLaunches) {
  for (bool v6 : {false, true}) {
    Comm a(v6), b(v6);  // two ranks of one communicator, driven by one thread (nccl-tests -g 2)
    const auto id = [](const Comm& c) { return std::to_string(reinterpret_cast<uintptr_t>(c.context())); };
    g_group_calls.clear();
    driver_clocks().group_begin = &group_begin;
    driver_clocks().group_operation = &group_operation;
    driver_clocks().group_launch = &group_launch;
    driver_clocks().group_end = &group_end;
    ASSERT_TRUE(hand_over_clocks());
    void* group = a.start(ncclProfileGroupApi, nullptr);
    Comm::stop(a.start(ncclProfileCollApi, group, nullptr, "AllReduce"));
    Comm::stop(b.start(ncclProfileCollApi, group, nullptr, "AllGather"));
    a.launch(group);
    b.launch(group);
    Comm::stop(group);
    EXPECT_EQ(g_group_calls, (std::vector<std::string>{"begin", "op " + id(a) + " 1", "op " + id(b) + " 0", "launch",
                                                       "launch", "end"}))
        << "v6 " << v6;

    g_group_calls.clear();
    driver_clocks().group_end = nullptr;  // three of four: none is called
    ASSERT_TRUE(hand_over_clocks());
    one_launch(a);
    EXPECT_TRUE(g_group_calls.empty());
    driver_clocks() = DriverClocks{};
    ASSERT_TRUE(hand_over_clocks());
  }
}
