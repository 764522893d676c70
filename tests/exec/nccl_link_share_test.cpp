// A collective's transfers on the fabric (vgpu/sim/exec/nccl_link_share.h), against simcore's
// engine alone (no driver, no NCCL: what CI without NCCL still checks). Each collective is
// submitted as the sim backend does: per rank an arrival at its start, a kernel of the model's
// time after every arrival, and an end after every kernel and the transfers' join.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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

}  // namespace
