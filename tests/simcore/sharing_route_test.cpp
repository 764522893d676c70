// Topology::sharing_route() leaves out a link that carries exactly the flows of a narrower one
// (a GPU's PCIe link beside its own NIC's link). The max-min rates must not change: on random
// clusters (NVSwitch, NVLink mesh, PCIe only; one NIC per GPU or shared NICs; PCIe wider or
// narrower than the NIC; leaf-spine and rail-optimized) and random flow sets, a solver fed the
// full routes and one fed the sharing routes give every flow the same rate.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "flow_solver.h"
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

}  // namespace
}  // namespace simcore
