// Routes, capacities and latencies of the topology built from a ClusterSpec.
#include "simcore/topology.h"

#include <gtest/gtest.h>

#include "test_clusters.h"

namespace simcore {
namespace {

using testing::small_cluster;

std::vector<LinkKind> kinds(const Topology& t, const Route& r) {
  std::vector<LinkKind> out;
  for (int i = 0; i < r.count; ++i) out.push_back(t.links()[r.links[i]].kind);
  return out;
}

TEST(Topology, RoutesByDistance) {
  Topology t(small_cluster(4, 4, 2));
  EXPECT_EQ(t.gpu_count(), 16);
  EXPECT_EQ(kinds(t, t.route(3, 3)), std::vector<LinkKind>{LinkKind::hbm});
  EXPECT_EQ(kinds(t, t.route(0, 3)), (std::vector<LinkKind>{LinkKind::nvlink_up, LinkKind::nvlink_down}));
  // Node 0 -> node 1: the same leaf.
  EXPECT_EQ(kinds(t, t.route(1, 5)), (std::vector<LinkKind>{LinkKind::pcie_up, LinkKind::nic_up,
                                                            LinkKind::nic_down, LinkKind::pcie_down}));
  // Node 0 -> node 2: through the spine.
  EXPECT_EQ(kinds(t, t.route(1, 9)),
            (std::vector<LinkKind>{LinkKind::pcie_up, LinkKind::nic_up, LinkKind::leaf_up,
                                   LinkKind::leaf_down, LinkKind::nic_down, LinkKind::pcie_down}));
}

TEST(Topology, Capacities) {
  ClusterSpec c = small_cluster(4, 4, 2);
  c.fabric.oversubscription = 2.0;
  Topology t(c);
  const auto& L = t.links();
  EXPECT_DOUBLE_EQ(L[t.route(2, 2).links[0]].capacity, testing::kHbmBw / 2);
  EXPECT_DOUBLE_EQ(L[t.route(0, 1).links[0]].capacity, testing::kNvlinkBw);
  const Route far = t.route(0, 8);
  EXPECT_DOUBLE_EQ(L[far.links[0]].capacity, testing::kPcieBw);
  EXPECT_DOUBLE_EQ(L[far.links[1]].capacity, testing::kNicBw);
  // 2 nodes x 4 NICs below a leaf, 2:1 oversubscribed: 4 NICs' worth of uplink.
  EXPECT_DOUBLE_EQ(L[far.links[2]].capacity, 4 * testing::kNicBw);
  EXPECT_EQ(t.leaf_count(), 2);
}

TEST(Topology, RailOptimizedLeaves) {
  ClusterSpec c = small_cluster(2, 4, 32);
  c.fabric.kind = "rail-optimized";
  Topology t(c);
  EXPECT_EQ(t.leaf_count(), 4);
  EXPECT_EQ(t.route(1, 5).count, 4);  // rail 1 to rail 1: one leaf
  EXPECT_EQ(t.route(1, 6).count, 6);  // rail 1 to rail 2: through the spine
  // Each rail leaf has 2 NIC ports below it.
  EXPECT_DOUBLE_EQ(t.links()[t.route(1, 6).links[2]].capacity, 2 * testing::kNicBw);
}

TEST(Topology, SharedNicsAndNoNvlink) {
  ClusterSpec c = small_cluster(2, 4, 32);
  c.nic.per_node = 2;  // GPU i uses NIC i mod 2
  c.nvlink.present = false;
  Topology t(c);
  EXPECT_EQ(t.route(0, 4).links[1], t.route(2, 4).links[1]);  // GPUs 0 and 2 share NIC 0
  EXPECT_NE(t.route(0, 4).links[1], t.route(1, 4).links[1]);
  EXPECT_EQ(kinds(t, t.route(0, 1)), (std::vector<LinkKind>{LinkKind::pcie_up, LinkKind::pcie_down}));
}

TEST(Topology, NvlinkMeshWithoutSwitch) {
  ClusterSpec c = small_cluster(1, 4);
  c.nvlink.nvswitch = false;
  Topology t(c);
  const Route r = t.route(1, 3);
  ASSERT_EQ(r.count, 1);
  EXPECT_EQ(t.links()[r.links[0]].kind, LinkKind::nvlink_peer);
  EXPECT_DOUBLE_EQ(t.links()[r.links[0]].capacity, testing::kNvlinkBw / 3);
  EXPECT_NE(t.route(1, 3).links[0], t.route(3, 1).links[0]);
  EXPECT_NE(t.route(1, 3).links[0], t.route(1, 2).links[0]);
}

TEST(Topology, LatencyIsTheSumAlongTheRoute) {
  ClusterSpec c = small_cluster(4, 2, 2);
  c.nvlink.latency_s = 1e-6;
  c.nic.latency_s = 2e-6;
  c.fabric.latency_s = 0.5e-6;
  Topology t(c);
  EXPECT_DOUBLE_EQ(t.route(0, 0).latency, 0);
  EXPECT_DOUBLE_EQ(t.route(0, 1).latency, 1e-6);
  EXPECT_DOUBLE_EQ(t.route(0, 2).latency, 2.5e-6);  // NIC + one leaf
  EXPECT_DOUBLE_EQ(t.route(0, 4).latency, 3.5e-6);  // NIC + leaf, spine, leaf
}

// The payload's share of the line rate scales NVLink links by nvlink.efficiency and NIC and
// fabric links by nic.efficiency; HBM and PCIe keep theirs.
TEST(Topology, EfficiencyScalesTheLinksItNames) {
  ClusterSpec c = small_cluster(2, 2, 1);
  c.nvlink.efficiency = 0.75;
  c.nic.efficiency = 0.5;
  Topology t(c);
  const Route intra = t.route(0, 1);
  for (int i = 0; i < intra.count; ++i)
    EXPECT_DOUBLE_EQ(t.links()[intra.links[i]].capacity, 0.75 * testing::kNvlinkBw);
  const Route inter = t.route(0, 2);  // pcie, nic, leaf, leaf, nic, pcie
  ASSERT_EQ(inter.count, 6);
  for (int i = 0; i < inter.count; ++i) {
    const Link& l = t.links()[inter.links[i]];
    double expected = 0.5 * testing::kNicBw;
    if (l.kind == LinkKind::pcie_up || l.kind == LinkKind::pcie_down) expected = testing::kPcieBw;
    if (l.kind == LinkKind::leaf_up || l.kind == LinkKind::leaf_down) expected *= 2;  // 2 NICs a leaf
    EXPECT_DOUBLE_EQ(l.capacity, expected) << t.link_name(inter.links[i]);
  }
  EXPECT_DOUBLE_EQ(t.links()[t.route(1, 1).links[0]].capacity, testing::kHbmBw / 2);
  // Out of (0, 1]: line rate (logged once).
  c.nvlink.efficiency = 0;
  c.nic.efficiency = 2;
  Topology u(c);
  EXPECT_DOUBLE_EQ(u.links()[u.route(0, 1).links[0]].capacity, testing::kNvlinkBw);
  EXPECT_DOUBLE_EQ(u.links()[u.route(0, 2).links[1]].capacity, testing::kNicBw);
}

TEST(Topology, UnusableValuesFallBack) {
  ClusterSpec c = small_cluster(2, 2);
  c.nic.bw = 0;
  c.nic.per_node = 0;
  c.model.memory_bw = -1;
  c.fabric.nodes_per_leaf = 0;
  Topology t(c);
  for (const Link& l : t.links()) EXPECT_GT(l.capacity, 0);
  EXPECT_EQ(t.route(0, 3).count, 6);  // one node per leaf now
}

}  // namespace
}  // namespace simcore
