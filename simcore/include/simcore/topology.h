// The links of the virtual cluster and the route of a transfer between two GPUs.
//
// Links (each one direction, capacity in bytes/s, latency in seconds):
// - hbm[g]: a copy inside GPU g reads and writes every byte, so its capacity is memory_bw / 2.
// - NVLink with an NVSwitch: nvlink_up[g] (GPU -> switch) and nvlink_down[g] (switch -> GPU), each
//   nvlink.bw_per_gpu (falling back to model.nvlink_bw). The switch itself does not block.
//   nvlink.latency_s sits on the up link (one GPU-to-GPU transfer's latency).
//   Without a switch (nvswitch = false): one direct link per ordered pair of GPUs of a node,
//   bw_per_gpu / (gpus_per_node - 1) each (the GPU's NVLink ports split evenly over its peers).
//   Without NVLink (or with no NVLink bandwidth known): GPUs of a node talk over PCIe.
// - pcie_up[g], pcie_down[g]: the GPU's PCIe link (to the NIC or the host), model.pcie_bw per
//   direction (63 GB/s for Gen5 x16, the fallback when the model has none). Latency 0: the
//   PCIe hop is part of the NIC's latency.
// - nic_up[n], nic_down[n] per NIC: nic.bw each. GPU i of a node uses NIC (i mod per_node).
//   nic_up carries nic.latency_s (NIC to NIC, switches excluded), nic_down the leaf switch's hop
//   (fabric.latency_s).
// - leaf_up[l], leaf_down[l]: all uplinks of leaf l to the spine, aggregated into one link per
//   direction (ECMP spreading flows ideally). Its capacity: the NIC ports below the leaf times
//   nic.bw, divided by the oversubscription, rounded up to whole fabric.link_bw links. Each
//   carries one switch hop (fabric.latency_s): leaf_up the spine, leaf_down the far leaf.
//   The spine does not block.
// Every NVLink capacity above is multiplied by nvlink.efficiency, every NIC and fabric capacity
// by nic.efficiency: the payload's share of the line rate.
// Leaves: nodes are grouped by nodes_per_leaf. With fabric.kind "rail-optimized" every rail
// (NIC index) of a group has its own leaf; with "leaf-spine" all NICs of a group share one leaf.
//
// Routes: same GPU: hbm. Same node: nvlink_up(src), nvlink_down(dst) (or the direct link, or
// pcie_up(src), pcie_down(dst)). Other node: pcie_up(src), nic_up, [leaf_up, leaf_down when the
// two NICs hang off different leaves], nic_down, pcie_down(dst).
// So a transfer's latency is nvlink.latency_s inside a node, nic.latency_s + fabric.latency_s
// under one leaf, nic.latency_s + 3 * fabric.latency_s across the spine.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "simcore/cluster_spec.h"

namespace simcore {

using LinkId = uint32_t;
inline constexpr int kMaxRouteLinks = 6;

enum class LinkKind : uint8_t {
  hbm, nvlink_up, nvlink_down, nvlink_peer, pcie_up, pcie_down, nic_up, nic_down, leaf_up,
  leaf_down,
};

struct Link {
  LinkKind kind = LinkKind::hbm;
  double capacity = 0;  // bytes/s, > 0
  double latency = 0;   // seconds
  int owner = 0;        // GPU, NIC or leaf index (for names)
  int peer = -1;        // nvlink_peer: the destination GPU
};

struct Route {
  std::array<LinkId, kMaxRouteLinks> links{};
  int count = 0;
  double latency = 0;  // sum of the links' latencies
};

class Topology {
 public:
  // Never fails: values that make no sense (a bandwidth <= 0, 0 NICs, ...) fall back to the
  // documented defaults, each logged once.
  explicit Topology(const ClusterSpec& cluster);

  int gpu_count() const { return gpus_; }
  int node_of(int gpu) const { return gpu / gpus_per_node_; }
  int leaf_count() const { return leaves_; }
  // Precondition: both GPUs are in [0, gpu_count()).
  Route route(int src_gpu, int dst_gpu) const { return build_route(src_gpu, dst_gpu, false); }
  // The links of route() where the flow can meet other flows, for the max-min solver: a link
  // that carries exactly the same flows as a narrower (or equal) one is left out, since it can
  // never hold a flow below that one's share. With one NIC per GPU and the node's GPUs talking
  // over NVLink, a GPU's PCIe link carries only its cross-node flows, which are exactly the
  // flows of its NIC's link: the wider of the two goes, and a cross-node route shrinks from
  // 4 or 6 links to 2 or 4. The latency is route()'s. Same precondition.
  Route sharing_route(int src_gpu, int dst_gpu) const { return build_route(src_gpu, dst_gpu, true); }
  // sharing_route(), and its narrowest link's capacity in `narrowest` (the least of
  // capacity() over its links).
  Route sharing_route(int src_gpu, int dst_gpu, double& narrowest) const {
    narrowest = std::numeric_limits<double>::infinity();
    return build_route(src_gpu, dst_gpu, true, true, &narrowest);
  }
  // sharing_route() without its latency (left 0): what the simulator asks several times per
  // flow, where reading every link's latency was a cache miss per link on a large cluster.
  Route sharing_links(int src_gpu, int dst_gpu) const {
    return build_route(src_gpu, dst_gpu, true, /*with_latency=*/false);
  }

  const std::vector<Link>& links() const { return links_; }
  // links()[id].capacity, from the dense array beside the latencies that routes read (one
  // cache line per route's link for both, where a Link is 32 bytes).
  double capacity(LinkId id) const { return costs_[id].capacity; }
  std::string link_name(LinkId id) const;

 private:
  Route build_route(int src_gpu, int dst_gpu, bool sharing, bool with_latency = true,
                    double* narrowest = nullptr) const;
  LinkId add(LinkKind kind, double capacity, double latency, int owner, int peer = -1);
  // A link's latency and capacity through its kind's when every link of the kind has the same
  // (they do but for leaf uplinks of unequal leaves): a route then reads one small table, not
  // a line of costs_ per link (at 2048 GPUs, costs_ is 230 KB read at random, a last-level
  // miss per flow). The same values either way, summed in the same order: the same bits.
  double latency_of(LinkId id, LinkKind kind) const {
    return kind_same_latency_ & (1u << static_cast<int>(kind)) ? kind_cost_[static_cast<int>(kind)].latency
                                                                  : costs_[id].latency;
  }
  double capacity_of(LinkId id, LinkKind kind) const {
    return kind_same_capacity_ & (1u << static_cast<int>(kind)) ? kind_cost_[static_cast<int>(kind)].capacity
                                                                   : costs_[id].capacity;
  }
  int nic_of(int gpu) const;   // global NIC index
  int leaf_of_nic(int nic) const;

  // Where each GPU sits, worked out once: route() is on the simulator's hot path, and the
  // divisions behind these cost more than the rest of it.
  struct Place {
    int32_t node, nic, leaf;
  };

  std::vector<Link> links_;
  // links_[i]'s latency and capacity, dense: routes read the latency per flow, and a flow
  // submitted among others (Simulator::submit_flows()) its route's narrowest capacity.
  struct LinkCost {
    double latency = 0, capacity = 0;
  };
  std::vector<LinkCost> costs_;
  static constexpr int kLinkKinds = static_cast<int>(LinkKind::leaf_down) + 1;
  std::array<LinkCost, kLinkKinds> kind_cost_{};  // the first link's of each kind
  uint32_t kind_seen_ = 0, kind_same_latency_ = 0, kind_same_capacity_ = 0;  // bits by kind
  std::vector<Place> places_;
  int gpus_ = 0, gpus_per_node_ = 1, nics_per_node_ = 1, nodes_per_leaf_ = 1, leaves_ = 0;
  bool rail_leaves_ = false;
  // sharing_route(): which of a GPU's PCIe link and its NIC's link is left out (neither when a
  // PCIe link can carry flows its NIC does not).
  enum class Twin : uint8_t { none, pcie, nic } twin_ = Twin::none;
  enum class Intra { nvswitch, nvlink_mesh, pcie } intra_ = Intra::nvswitch;
  LinkId hbm_ = 0, nv_up_ = 0, nv_down_ = 0, nv_peer_ = 0, pcie_up_ = 0, pcie_down_ = 0;
  LinkId nic_up_ = 0, nic_down_ = 0, leaf_up_ = 0, leaf_down_ = 0;
};

}  // namespace simcore
