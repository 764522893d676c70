// Topology::sharing_route() leaves out a link that carries exactly the flows of a narrower one
// (a GPU's PCIe link beside its own NIC's link). The max-min rates must not change: on random
// clusters (NVSwitch, NVLink mesh, PCIe only; one NIC per GPU or shared NICs; PCIe wider or
// narrower than the NIC; leaf-spine and rail-optimized) and random flow sets, a solver fed the
// full routes and one fed the sharing routes give every flow the same rate.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "flow_solver.h"
#include "simcore/engine.h"
#include "simcore/topology.h"
#include "test_clusters.h"

namespace simcore {
namespace {

std::vector<LinkKind> kinds(const Topology& t, const Route& r) {
  std::vector<LinkKind> out;
  for (int i = 0; i < r.count; ++i) out.push_back(t.links()[r.links[i]].kind);
  return out;
}

TEST(SharingRoute, DropsTheWiderOfAGpusPcieLinkAndItsOwnNic) {
  // PCIe (64 GB/s) wider than the NIC (50 GB/s): the PCIe links go.
  const Topology t(testing::small_cluster(4, 4, 2));
  EXPECT_EQ(kinds(t, t.sharing_route(1, 5)), (std::vector<LinkKind>{LinkKind::nic_up, LinkKind::nic_down}));
  EXPECT_EQ(kinds(t, t.sharing_route(1, 9)),
            (std::vector<LinkKind>{LinkKind::nic_up, LinkKind::leaf_up, LinkKind::leaf_down, LinkKind::nic_down}));
  EXPECT_EQ(t.sharing_route(1, 9).latency, t.route(1, 9).latency);
  EXPECT_EQ(kinds(t, t.sharing_route(0, 3)), kinds(t, t.route(0, 3)));  // inside a node: as is
  // PCIe narrower: the NIC links go.
  ClusterSpec narrow = testing::small_cluster(4, 4, 2);
  narrow.model.pcie_bw = 32e9;
  const Topology n(narrow);
  EXPECT_EQ(kinds(n, n.sharing_route(1, 5)), (std::vector<LinkKind>{LinkKind::pcie_up, LinkKind::pcie_down}));
  // Two GPUs per NIC: a NIC carries flows of two PCIe links, nothing is left out.
  ClusterSpec shared = testing::small_cluster(4, 4, 2);
  shared.nic.per_node = 2;
  const Topology s(shared);
  EXPECT_EQ(kinds(s, s.sharing_route(1, 5)), kinds(s, s.route(1, 5)));
  // No NVLink: PCIe links carry node-local flows too, nothing is left out.
  ClusterSpec pcie_only = testing::small_cluster(4, 4, 2);
  pcie_only.nvlink.present = false;
  const Topology p(pcie_only);
  EXPECT_EQ(kinds(p, p.sharing_route(1, 5)), kinds(p, p.route(1, 5)));
}

TEST(SharingRoute, MaxMinRatesEqualThoseOverFullRoutes) {
  std::mt19937_64 rng(11);
  int compared = 0, shortened = 0;
  for (int round = 0; round < 300; ++round) {
    const int gpus_per_node = 1 + static_cast<int>(rng() % 8);
    ClusterSpec c = testing::small_cluster(1 + static_cast<int>(rng() % 6), gpus_per_node,
                                           1 + static_cast<int>(rng() % 3));
    c.nic.per_node = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % gpus_per_node) : gpus_per_node;
    c.model.pcie_bw = rng() % 2 ? 64e9 : 32e9;
    c.nvlink.present = rng() % 5 != 0;
    c.nvlink.nvswitch = rng() % 3 != 0;
    if (rng() % 3 == 0) c.fabric.kind = "rail-optimized";
    c.fabric.oversubscription = rng() % 2 ? 1.0 : 3.0;
    const Topology t(c);
    detail::FlowSolver full(t, SolverMode::incremental), sharing(t, SolverMode::incremental);
    const int flows = 1 + static_cast<int>(rng() % 60);
    for (uint32_t f = 0; f < static_cast<uint32_t>(flows); ++f) {
      const int src = static_cast<int>(rng() % t.gpu_count());
      const int dst = static_cast<int>(rng() % t.gpu_count());
      shortened += t.sharing_route(src, dst).count < t.route(src, dst).count;
      full.attach(f, t.route(src, dst), 0.0, true);
      sharing.attach(f, t.sharing_route(src, dst), 0.0, true);
    }
    full.solve([](uint32_t, double) {});
    sharing.solve([](uint32_t, double) {});
    for (uint32_t f = 0; f < static_cast<uint32_t>(flows); ++f) {
      ASSERT_NEAR(sharing.rate(f), full.rate(f), 1e-12 * full.rate(f)) << "round " << round << " flow " << f;
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(shortened, 100);  // the case under test did occur
}

// sharing_route(src, dst, narrowest) reads a link's capacity and latency through its kind's
// when every link of the kind agrees (Topology::capacity_of()): the answer must stay the
// least capacity() and the sum of latencies of its own links, also where leaves differ (a last
// leaf with fewer nodes has fewer, narrower uplinks). Fails if leaf uplinks are read through
// the first leaf's.
TEST(SharingRoute, NarrowestCapacityAndLatencyAreThoseOfItsOwnLinks) {
  std::mt19937_64 rng(5);
  int uneven = 0, pairs = 0;
  for (int round = 0; round < 60; ++round) {
    ClusterSpec c = testing::small_cluster(2 + static_cast<int>(rng() % 5), 1 + static_cast<int>(rng() % 4),
                                           1 + static_cast<int>(rng() % 2));
    c.fabric.link_bw = 10e9;  // uplinks narrower than a NIC, in counts that follow the leaf's ports
    c.fabric.oversubscription = 4.0;
    c.nic.latency_s = 1e-6 * static_cast<double>(1 + rng() % 3);
    c.fabric.latency_s = 1e-7 * static_cast<double>(1 + rng() % 3);
    if (rng() % 3 == 0) c.fabric.kind = "rail-optimized";
    if (rng() % 4 == 0) c.model.pcie_bw = 32e9;  // the NIC links are left out instead
    const Topology t(c);
    double leaf0 = 0;  // the first leaf's uplink
    for (const Link& l : t.links())
      if (l.kind == LinkKind::leaf_up && l.owner == 0) leaf0 = l.capacity;
    for (int src = 0; src < t.gpu_count(); ++src)
      for (int dst = 0; dst < t.gpu_count(); ++dst) {
        double narrowest = 0;
        const Route r = t.sharing_route(src, dst, narrowest);
        double want = std::numeric_limits<double>::infinity();
        for (int i = 0; i < r.count; ++i) want = std::min(want, t.capacity(r.links[i]));
        ASSERT_EQ(narrowest, want) << "round " << round << " " << src << "->" << dst;
        const Route full = t.route(src, dst);
        double latency = 0;
        for (int i = 0; i < full.count; ++i) latency += t.links()[full.links[i]].latency;
        ASSERT_EQ(r.latency, latency) << "round " << round << " " << src << "->" << dst;
        ASSERT_EQ(t.sharing_route(src, dst).latency, latency);
        for (int i = 0; i < r.count; ++i) {
          const Link& l = t.links()[r.links[i]];
          if (l.kind == LinkKind::leaf_up && l.capacity != leaf0 && l.capacity == narrowest) ++uneven;
        }
        ++pairs;
      }
  }
  EXPECT_GT(pairs, 1000);
  EXPECT_GT(uneven, 0);  // a leaf unlike the first one was some route's narrowest link
}

// The simulator keeps the routes it asked for on clusters of up to 256 GPUs, a row per source GPU
// made when first asked: an engine nobody gave a flow holds no table (the whole one was 2.6 MB
// at 256 GPUs, written as the engine was made), and one flow makes one row. Same answer.
TEST(SharingRoute, TheSimulatorsRouteTableGrowsARowPerSourceAsked) {
  const ClusterSpec c = testing::small_cluster(32, 8);  // 256 GPUs
  EngineOptions o;
  o.record_timeline = false;
  const auto e = make_engine(c, o);
  const size_t table = 256 * 256 * sizeof(Route);
  const size_t empty = e->stats().history_bytes;
  EXPECT_LT(empty, table / 4);
  FlowSpec f;
  f.src_gpu = 3;
  f.dst_gpu = 200;
  f.bytes = 1 << 20;
  const EventId id = e->add_flow(f);
  const Topology t(c);
  double narrowest = 0;
  const Route r = t.sharing_route(3, 200, narrowest);
  EXPECT_DOUBLE_EQ(e->query(id)->finish, (1 << 20) / narrowest + r.latency);  // alone: its narrowest link
  const size_t one = e->stats().history_bytes;
  EXPECT_GE(one, empty + 256 * sizeof(Route));
  EXPECT_LT(one, empty + table / 4);
}

}  // namespace
}  // namespace simcore
