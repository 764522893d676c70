// Hand-built clusters with round numbers, so that expected times can be worked out by hand.
#pragma once

#include "simcore/cluster_spec.h"

namespace simcore::testing {

inline constexpr double kNvlinkBw = 400e9;  // per GPU per direction
inline constexpr double kNicBw = 50e9;
inline constexpr double kPcieBw = 64e9;
inline constexpr double kHbmBw = 2e12;      // copies run at half of it

// nodes x gpus, NVSwitch, one NIC per GPU, every payload at line rate, no latency anywhere, `nodes_per_leaf` nodes a leaf.
inline ClusterSpec small_cluster(int nodes, int gpus, int nodes_per_leaf = 32) {
  ClusterSpec c;
  c.source = "test";
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.model.id = "TEST";
  c.model.memory_bw = kHbmBw;
  c.model.pcie_bw = kPcieBw;
  c.model.nvlink_bw = kNvlinkBw;
  c.nvlink.present = true;
  c.nvlink.nvswitch = true;
  c.nvlink.bw_per_gpu = kNvlinkBw;
  c.nvlink.latency_s = 0;
  c.nvlink.efficiency = 1;  // expected times use the raw figures above
  c.nic.per_node = gpus;
  c.nic.rail_optimized = true;
  c.nic.bw = kNicBw;
  c.nic.latency_s = 0;
  c.fabric.kind = "leaf-spine";
  c.fabric.nodes_per_leaf = nodes_per_leaf;
  c.fabric.oversubscription = 1.0;
  c.fabric.link_bw = kNicBw;
  c.fabric.latency_s = 0;
  return c;
}

}  // namespace simcore::testing
