// Builds the link table of topology.h from a ClusterSpec; routes are computed on demand from
// the table's layout (a handful of index calculations), so nothing per GPU pair is stored.
#include "simcore/topology.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"

namespace simcore {
namespace {

bool positive(double v) { return std::isfinite(v) && v > 0; }

// A bandwidth or the fallback, logging once when the configured value is unusable.
double bandwidth_or(double value, double fallback, const char* what) {
  if (positive(value)) return value;
  vgpu::log::once(vgpu::log::Level::warn, std::string("simcore-topology-") + what,
                  fmt::format("simcore: {} bandwidth {} is unusable; using {} bytes/s", what,
                              value, fallback));
  return fallback;
}

// A payload efficiency in (0, 1], else 1 (logged once).
double efficiency_or_one(double value, const char* what) {
  if (std::isfinite(value) && value > 0 && value <= 1) return value;
  vgpu::log::once(vgpu::log::Level::warn, std::string("simcore-efficiency-") + what,
                  fmt::format("simcore: {} efficiency {} is not in (0, 1]; using 1", what, value));
  return 1.0;
}

double latency_or_zero(double value) { return std::isfinite(value) && value > 0 ? value : 0.0; }

constexpr double kPcieGen5x16 = 63e9;
constexpr double kNic400G = 50e9;
constexpr double kHbmFallback = 2e12;

}  // namespace

Topology::Topology(const ClusterSpec& c) {
  const int nodes = std::max(1, c.nodes);
  gpus_per_node_ = std::max(1, c.gpus_per_node);
  gpus_ = nodes * gpus_per_node_;
  nics_per_node_ = std::max(1, c.nic.per_node);
  nodes_per_leaf_ = std::max(1, c.fabric.nodes_per_leaf);
  rail_leaves_ = c.fabric.kind == "rail-optimized";

  const double hbm = bandwidth_or(c.model.memory_bw, kHbmFallback, "HBM") / 2;
  const double pcie = positive(c.model.pcie_bw) ? c.model.pcie_bw : kPcieGen5x16;
  // The fabric carries the NICs' packets: the NIC's payload efficiency applies to its links too.
  const double nic_eff = efficiency_or_one(c.nic.efficiency, "NIC");
  const double nic = bandwidth_or(c.nic.bw, kNic400G, "NIC") * nic_eff;
  const double fabric_link = (positive(c.fabric.link_bw) ? c.fabric.link_bw : nic / nic_eff) * nic_eff;
  const double oversub = positive(c.fabric.oversubscription) ? c.fabric.oversubscription : 1.0;
  const double nvlink = (positive(c.nvlink.bw_per_gpu) ? c.nvlink.bw_per_gpu : c.model.nvlink_bw) *
                        efficiency_or_one(c.nvlink.efficiency, "NVLink");
  const double nv_lat = latency_or_zero(c.nvlink.latency_s);
  const double nic_lat = latency_or_zero(c.nic.latency_s);
  const double hop_lat = latency_or_zero(c.fabric.latency_s);

  if (!c.nvlink.present || !positive(nvlink)) intra_ = Intra::pcie;
  else if (c.nvlink.nvswitch || gpus_per_node_ == 1) intra_ = Intra::nvswitch;
  else intra_ = Intra::nvlink_mesh;

  hbm_ = static_cast<LinkId>(links_.size());
  for (int g = 0; g < gpus_; ++g) add(LinkKind::hbm, hbm, 0, g);
  if (intra_ == Intra::nvswitch) {
    nv_up_ = static_cast<LinkId>(links_.size());
    for (int g = 0; g < gpus_; ++g) add(LinkKind::nvlink_up, nvlink, nv_lat, g);
    nv_down_ = static_cast<LinkId>(links_.size());
    for (int g = 0; g < gpus_; ++g) add(LinkKind::nvlink_down, nvlink, 0, g);
  } else if (intra_ == Intra::nvlink_mesh) {
    // Row src, column dst (the diagonal is unused but keeps the indexing trivial).
    nv_peer_ = static_cast<LinkId>(links_.size());
    const double per_peer = nvlink / (gpus_per_node_ - 1);
    for (int g = 0; g < gpus_; ++g)
      for (int j = 0; j < gpus_per_node_; ++j)
        add(LinkKind::nvlink_peer, per_peer, nv_lat, g, node_of(g) * gpus_per_node_ + j);
  }
  pcie_up_ = static_cast<LinkId>(links_.size());
  for (int g = 0; g < gpus_; ++g) add(LinkKind::pcie_up, pcie, 0, g);
  pcie_down_ = static_cast<LinkId>(links_.size());
  for (int g = 0; g < gpus_; ++g) add(LinkKind::pcie_down, pcie, 0, g);

  const int nics = nodes * nics_per_node_;
  nic_up_ = static_cast<LinkId>(links_.size());
  for (int n = 0; n < nics; ++n) add(LinkKind::nic_up, nic, nic_lat, n);
  nic_down_ = static_cast<LinkId>(links_.size());
  for (int n = 0; n < nics; ++n) add(LinkKind::nic_down, nic, hop_lat, n);

  const int groups = (nodes + nodes_per_leaf_ - 1) / nodes_per_leaf_;
  leaves_ = rail_leaves_ ? groups * nics_per_node_ : groups;
  std::vector<int> ports(leaves_, 0);
  for (int n = 0; n < nics; ++n) ++ports[leaf_of_nic(n)];
  std::vector<double> uplink(leaves_);
  for (int l = 0; l < leaves_; ++l) {
    const double wanted = ports[l] * nic / oversub;
    const double count = std::max(1.0, std::ceil(wanted / fabric_link - 1e-9));
    uplink[l] = count * fabric_link;
  }
  leaf_up_ = static_cast<LinkId>(links_.size());
  for (int l = 0; l < leaves_; ++l) add(LinkKind::leaf_up, uplink[l], hop_lat, l);
  leaf_down_ = static_cast<LinkId>(links_.size());
  for (int l = 0; l < leaves_; ++l) add(LinkKind::leaf_down, uplink[l], hop_lat, l);

  // A PCIe link carries a node-local flow only without NVLink, and a NIC serves one GPU only
  // when there are as many NICs as GPUs (nic_of()).
  if (intra_ != Intra::pcie && nics_per_node_ == gpus_per_node_)
    twin_ = pcie >= nic ? Twin::pcie : Twin::nic;

  places_.resize(gpus_);
  for (int g = 0; g < gpus_; ++g) {
    const int n = nic_of(g);
    places_[g] = Place{node_of(g), n, leaf_of_nic(n)};
  }
}

LinkId Topology::add(LinkKind kind, double capacity, double latency, int owner, int peer) {
  links_.push_back(Link{kind, capacity, latency, owner, peer});
  costs_.push_back(LinkCost{latency, capacity});
  const uint32_t bit = 1u << static_cast<int>(kind);
  LinkCost& k = kind_cost_[static_cast<int>(kind)];
  if (!(kind_seen_ & bit)) {
    kind_seen_ |= bit;
    kind_same_latency_ |= bit;
    kind_same_capacity_ |= bit;
    k = LinkCost{latency, capacity};
  } else {
    if (k.latency != latency) kind_same_latency_ &= ~bit;
    if (k.capacity != capacity) kind_same_capacity_ &= ~bit;
  }
  return static_cast<LinkId>(links_.size() - 1);
}

int Topology::nic_of(int gpu) const {
  return node_of(gpu) * nics_per_node_ + (gpu % gpus_per_node_) % nics_per_node_;
}

int Topology::leaf_of_nic(int nic) const {
  const int group = (nic / nics_per_node_) / nodes_per_leaf_;
  return rail_leaves_ ? group * nics_per_node_ + nic % nics_per_node_ : group;
}

Route Topology::build_route(int src, int dst, bool sharing, bool with_latency, double* narrowest) const {
  Route r;
  auto push = [&](LinkId id, LinkKind kind) {
    r.links[r.count++] = id;
    if (with_latency) r.latency += latency_of(id, kind);
    if (narrowest) *narrowest = std::min(*narrowest, capacity_of(id, kind));
  };
  const Place& ps = places_[src];
  const Place& pd = places_[dst];
  if (src == dst) {
    push(hbm_ + src, LinkKind::hbm);
  } else if (ps.node == pd.node) {
    switch (intra_) {
      case Intra::nvswitch:
        push(nv_up_ + src, LinkKind::nvlink_up);
        push(nv_down_ + dst, LinkKind::nvlink_down);
        break;
      case Intra::nvlink_mesh:
        push(nv_peer_ + static_cast<LinkId>(src) * gpus_per_node_ + (dst - pd.node * gpus_per_node_),
             LinkKind::nvlink_peer);
        break;
      case Intra::pcie:
        push(pcie_up_ + src, LinkKind::pcie_up);
        push(pcie_down_ + dst, LinkKind::pcie_down);
        break;
    }
  } else {
    const int ns = ps.nic, nd = pd.nic;
    const int ls = ps.leaf, ld = pd.leaf;
    // sharing: the twin left out still adds its latency.
    const bool skip_pcie = sharing && twin_ == Twin::pcie, skip_nic = sharing && twin_ == Twin::nic;
    auto push_or_skip = [&](LinkId id, LinkKind kind, bool skip) {
      if (!skip) push(id, kind);
      else if (with_latency) r.latency += latency_of(id, kind);
    };
    push_or_skip(pcie_up_ + src, LinkKind::pcie_up, skip_pcie);
    push_or_skip(nic_up_ + ns, LinkKind::nic_up, skip_nic);
    if (ls != ld) {
      push(leaf_up_ + ls, LinkKind::leaf_up);
      push(leaf_down_ + ld, LinkKind::leaf_down);
    }
    push_or_skip(nic_down_ + nd, LinkKind::nic_down, skip_nic);
    push_or_skip(pcie_down_ + dst, LinkKind::pcie_down, skip_pcie);
  }
  return r;
}

std::string Topology::link_name(LinkId id) const {
  if (id >= links_.size()) return "link?";
  const Link& l = links_[id];
  switch (l.kind) {
    case LinkKind::hbm: return fmt::format("gpu{}.hbm", l.owner);
    case LinkKind::nvlink_up: return fmt::format("gpu{}.nvlink-up", l.owner);
    case LinkKind::nvlink_down: return fmt::format("gpu{}.nvlink-down", l.owner);
    case LinkKind::nvlink_peer: return fmt::format("gpu{}->gpu{}.nvlink", l.owner, l.peer);
    case LinkKind::pcie_up: return fmt::format("gpu{}.pcie-up", l.owner);
    case LinkKind::pcie_down: return fmt::format("gpu{}.pcie-down", l.owner);
    case LinkKind::nic_up: return fmt::format("nic{}.up", l.owner);
    case LinkKind::nic_down: return fmt::format("nic{}.down", l.owner);
    case LinkKind::leaf_up: return fmt::format("leaf{}.up", l.owner);
    case LinkKind::leaf_down: return fmt::format("leaf{}.down", l.owner);
  }
  return "link?";
}

}  // namespace simcore
