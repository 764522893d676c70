// A collective's transfers on the fabric (vgpu/sim/exec/nccl_link_share.h), against simcore's
// engine alone (no driver, no NCCL: what CI without NCCL still checks). Each collective is
// submitted as the sim backend does: per rank an arrival at its start, a kernel of the model's
// time after every arrival, and an end after every kernel and the transfers' join.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "sim/exec/nccl_link_share.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"

namespace {

using namespace simcore;

ClusterSpec cluster_of(int nodes, int gpus_per_node, int nics_per_node = 0) {
  // The shape only: nothing else of the environment (VGPU_CONFIG) reaches the test.
  const std::string n = std::to_string(nodes), g = std::to_string(gpus_per_node);
  EnvLookup env = [&](const char* name) -> const char* {
    if (std::string(name) == "VGPU_NODES") return n.c_str();
    if (std::string(name) == "VGPU_GPUS_PER_NODE") return g.c_str();
    return nullptr;
  };
  ConfigResult config = load_cluster_config(env);
  EXPECT_TRUE(config.ok());
  ClusterSpec c = *config.cluster;
  if (nics_per_node > 0) c.nic.per_node = nics_per_node;
  return c;
}

CollectiveCall all_reduce(uint64_t bytes, std::vector<int> gpus) {
  CollectiveCall call;
  call.op = CollectiveOp::all_reduce;
  call.bytes = bytes;
  call.gpus = std::move(gpus);
  return call;
}

struct Placed {
  EventId end = kNoEvent;  // rank 0's end op
  double model = 0;        // the model's time
  bool flows = false;      // transfers were placed
};

// Submits `call` with every rank arriving at `start`; with_flows false: as before (no transfers).
Placed submit(Engine& engine, vgpu::NcclLinkShare& links, const ClusterSpec& cluster, const CollectiveCall& call,
              double start, bool with_flows = true) {
  Placed p;
  p.model = estimate_collective(cluster, call).seconds;
  const int n = static_cast<int>(call.gpus.size());
  std::vector<EventId> arrivals, kernels;
  for (int r = 0; r < n; ++r) {
    TaskSpec a;
    a.gpu = call.gpus[r];
    a.not_before = start;
    arrivals.push_back(engine.add_task(a));
  }
  for (int r = 0; r < n; ++r) {
    TaskSpec k;
    k.gpu = call.gpus[r];
    k.duration = p.model;
    k.after = arrivals;
    kernels.push_back(engine.add_task(k));
  }
  std::vector<EventId> after = kernels;
  if (with_flows) {
    vgpu::NcclLinkShare::Start s;
    s.after.assign(arrivals.begin(), arrivals.end());
    s.not_before = start;
    s.start_at_most = start;
    s.gpu = call.gpus[0];
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    const std::vector<uint64_t> joined = links.place(engine, {call}, ranks, s);
    p.flows = !joined.empty();
    after.insert(after.end(), joined.begin(), joined.end());
  }
  TaskSpec e;
  e.gpu = call.gpus[0];
  e.after = after;
  p.end = engine.add_task(e);
  return p;
}

double finish(Engine& engine, EventId id) { return engine.query(id)->finish; }
double bandwidth(const ClusterSpec& c, const CollectiveCall& call) {
  return estimate_collective(c, call).bandwidth_seconds;
}

TEST(NcclLinkShare, AloneACollectiveLastsExactlyTheModelsTime) {
  // Rings across nodes, inside a node, both, and one whose ranks alternate nodes on one NIC a node
  // (two of its own flows share each NIC: the flows' size allows for it).
  struct Case {
    ClusterSpec cluster;
    CollectiveCall call;
  };
  std::vector<Case> cases = {
      {cluster_of(2, 1), all_reduce(256u << 20, {0, 1})},
      {cluster_of(1, 8), all_reduce(256u << 20, {0, 1, 2, 3, 4, 5, 6, 7})},
      {cluster_of(2, 8), all_reduce(25u << 20, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})},
      {cluster_of(2, 2, 1), all_reduce(64u << 20, {0, 2, 1, 3})},
  };
  for (const Case& c : cases) {
    auto engine = make_engine(c.cluster);
    vgpu::NcclLinkShare links(c.cluster);
    const double start = 1.25e-3;
    const Placed p = submit(*engine, links, c.cluster, c.call, start);
    EXPECT_TRUE(p.flows);
    EXPECT_EQ(finish(*engine, p.end), start + p.model) << c.call.gpus.size() << " ranks";
  }
}

TEST(NcclLinkShare, TwoCollectivesOverOneNicEachLastAboutOneBandwidthPartLonger) {
  const ClusterSpec cluster = cluster_of(2, 1);
  auto engine = make_engine(cluster);
  vgpu::NcclLinkShare links(cluster);
  const CollectiveCall call = all_reduce(256u << 20, {0, 1});
  const Placed a = submit(*engine, links, cluster, call, 0);
  const Placed b = submit(*engine, links, cluster, call, 0);
  const double want = a.model + bandwidth(cluster, call);
  for (const Placed& p : {a, b}) {
    EXPECT_NEAR(finish(*engine, p.end), want, 0.001 * want);
    EXPECT_GT(finish(*engine, p.end), 1.8 * a.model);
  }
}

TEST(NcclLinkShare, CollectivesOnDisjointLinksAreNotSlowed) {
  const ClusterSpec cluster = cluster_of(2, 2);  // one NIC per GPU
  auto engine = make_engine(cluster);
  vgpu::NcclLinkShare links(cluster);
  const Placed a = submit(*engine, links, cluster, all_reduce(256u << 20, {0, 2}), 0);
  const Placed c = submit(*engine, links, cluster, all_reduce(256u << 20, {1, 3}), 0);
  EXPECT_EQ(finish(*engine, a.end), a.model);
  EXPECT_EQ(finish(*engine, c.end), c.model);
}

TEST(NcclLinkShare, ACollectiveBesideALongCopyOnItsLinkIsSlowed) {
  const ClusterSpec cluster = cluster_of(1, 2);
  auto engine = make_engine(cluster);
  vgpu::NcclLinkShare links(cluster);
  const CollectiveCall call = all_reduce(256u << 20, {0, 1});
  FlowSpec copy;
  copy.src_gpu = 0;
  copy.dst_gpu = 1;
  copy.bytes = 1ull << 30;
  ASSERT_NE(engine->add_flow(copy), kNoEvent);
  const Placed d = submit(*engine, links, cluster, call, 0);
  // Its transfer at half the NVLink's rate all along: one bandwidth part longer.
  const double want = d.model + bandwidth(cluster, call);
  EXPECT_NEAR(finish(*engine, d.end), want, 0.001 * want);
}

TEST(NcclLinkShare, SmallCollectivesPlaceNothing) {
  const ClusterSpec cluster = cluster_of(1, 8);
  auto engine = make_engine(cluster);
  vgpu::NcclLinkShare links(cluster);
  const Placed p = submit(*engine, links, cluster, all_reduce(4096, {0, 1, 2, 3, 4, 5, 6, 7}), 0);
  EXPECT_FALSE(p.flows);
  EXPECT_EQ(finish(*engine, p.end), p.model);
}

// The job's shared engine (shared_flows, sim26/sim30): each rank process places its own rank's
// flow there; alone they end by the collective's start plus the model's time, and two
// communicators whose rings cross one NIC from GPUs of different processes get the same finishes
// as when one process places every rank's flows.
std::vector<uint64_t> place_shared(vgpu::NcclLinkShare& links, Engine& engine, const std::vector<CollectiveCall>& calls,
                                   std::span<const int> ranks, double start) {
  const std::vector<FlowSpec> flows = links.shared_flows(calls, ranks, start);
  std::vector<EventId> ids(flows.size(), kNoEvent);
  engine.add_flows(flows, ids);
  std::erase(ids, kNoEvent);
  return {ids.begin(), ids.end()};
}

double latest_finish(Engine& engine, const std::vector<uint64_t>& ids) {
  double t = 0;
  for (uint64_t id : ids) t = std::max(t, finish(engine, id));
  return t;
}

TEST(NcclLinkShare, SharedFlowsAloneEndByTheModelsTime) {
  const ClusterSpec cluster = cluster_of(2, 2, 1);
  auto shared = make_engine(cluster);
  vgpu::NcclLinkShare links(cluster);
  const CollectiveCall call = all_reduce(256u << 20, {0, 2, 1, 3});
  const double start = 0.25, model = estimate_collective(cluster, call).seconds;
  std::vector<uint64_t> ids;
  for (int r = 0; r < 4; ++r) {  // one process per rank
    const int own[] = {r};
    const std::vector<uint64_t> got = place_shared(links, *shared, {call}, own, start);
    ASSERT_EQ(got.size(), 1u);
    ids.push_back(got[0]);
  }
  const double end = latest_finish(*shared, ids);
  EXPECT_LE(end, start + model);
  EXPECT_GT(end, start + model - 1e-5);
}

TEST(NcclLinkShare, SharedFlowsOfProcessesReadAsOneProcesss) {
  const ClusterSpec cluster = cluster_of(2, 2, 1);
  vgpu::NcclLinkShare links(cluster);
  const CollectiveCall a = all_reduce(256u << 20, {0, 1, 2, 3}), b = all_reduce(256u << 20, {0, 2, 1, 3});
  // One process: every rank's flows of A, then of B.
  auto one = make_engine(cluster);
  const int all[] = {0, 1, 2, 3};
  const std::vector<uint64_t> one_a = place_shared(links, *one, {a}, all, 0);
  const std::vector<uint64_t> one_b = place_shared(links, *one, {b}, all, 0);
  // Four processes, each its own rank's (in real time rank by rank, B before A on some).
  auto many = make_engine(cluster);
  std::vector<uint64_t> many_a, many_b;
  for (int r : {3, 1, 0, 2}) {
    const int own[] = {r};
    for (bool first_b : {r % 2 == 1, r % 2 == 0}) {
      const std::vector<uint64_t> got = place_shared(links, *many, {first_b ? b : a}, own, 0);
      (first_b ? many_b : many_a).insert((first_b ? many_b : many_a).end(), got.begin(), got.end());
    }
  }
  ASSERT_EQ(many_a.size(), 4u);
  ASSERT_EQ(many_b.size(), 4u);
  EXPECT_NEAR(latest_finish(*many, many_a), latest_finish(*one, one_a), 1e-9);
  EXPECT_NEAR(latest_finish(*many, many_b), latest_finish(*one, one_b), 1e-9);
  // And they do share node 0's NIC: later than alone.
  EXPECT_GT(latest_finish(*one, one_a), 1.2 * estimate_collective(cluster, a).seconds);
}

// Places an 8-GPU all-reduce's transfers for a caller that promised the engine a floor at the
// collective's start, as the sim backend's threads do; exits 0 when they were placed and nothing
// was logged at warn or above (VGPU_LOG_LEVEL=warn). Returns the exit code rather than exiting,
// so that its objects are gone before the child exits (LeakSanitizer reads what is left).
int place_at_a_promised_floor() {
  setenv("VGPU_LOG_LEVEL", "warn", 1);
  const ClusterSpec cluster = cluster_of(1, 8);
  auto engine = make_engine(cluster);
  vgpu::NcclLinkShare links(cluster);
  const CollectiveCall call = all_reduce(256u << 20, {0, 1, 2, 3, 4, 5, 6, 7});
  const double start = 8.5;
  engine->register_rank(0);
  engine->set_rank_floor(0, start);
  vgpu::NcclLinkShare::Start s;
  for (int gpu : call.gpus) {
    TaskSpec a;
    a.gpu = gpu;
    a.not_before = start;
    s.after.push_back(engine->add_task(a));
  }
  s.not_before = start;
  s.start_at_most = start;
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7};
  const bool placed = !links.place(*engine, {call}, ranks, s).empty();
  return placed && vgpu::log::lines_written_here() == 0 ? 0 : 1;
}

TEST(NcclLinkShareDeathTest, NothingIsPlacedBelowTheFloorTheCallerPromised) {
  // A task placed below the floor (one left at not_before 0) is moved up by the engine with a
  // warning, once a process (job logs showed one a rank): checked in a fresh child process,
  // where that warning has not been said yet.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(place_at_a_promised_floor()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
