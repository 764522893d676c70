// The description of the virtual cluster: what the user configured, after the catalog and the
// environment overrides have been applied. Every component reads the cluster from here: the
// driver (device count, names, attributes, memory), the network simulator (topology), NVML and
// vgpu-smi. It is a plain value: build it once with load_cluster_config(), then share it const.
#pragma once

#include <cstdint>
#include <array>
#include <map>
#include <string>
#include <vector>

namespace simcore {

// Per-model facts from the catalog (gpu_catalog.cpp). Rates are in bytes/s and FLOP/s.
struct GpuModel {
  std::string id;          // catalog key, e.g. "H100-SXM-80GB"
  std::string name;        // what cuDeviceGetName / NVML report, e.g. "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  uint64_t memory_bytes = 0;       // what cuDeviceTotalMem reports on the real part
  double memory_bw = 0;            // HBM bandwidth, bytes/s
  double fp32_flops = 0;           // non-tensor FP32, FLOP/s
  double fp64_flops = 0;
  double tf32_tensor_flops = 0;    // dense
  double bf16_tensor_flops = 0;    // dense
  double fp8_tensor_flops = 0;     // dense (0 where the model has none)
  double pcie_bw = 0;              // host link, per direction, bytes/s
  int pcie_gen = 0, pcie_width = 0;
  double nvlink_bw = 0;            // aggregate per direction per GPU, bytes/s
  int nvlink_links = 0;
  double tdp_watts = 0;
  // Every CUdevice_attribute the model answers, keyed by its numeric value in cuda.h.
  std::map<int, int> attributes;
  // cuOccupancyMaxActiveClusters as measured on the real part: [b][s - 1] the clusters of s
  // blocks resident at once when b = 0, 1, 2 means 1, 2, 4 blocks fit an SM (a row is as long as
  // the sizes measured: past 16 too, which the real driver answers); empty when not measured.
  // Libraries size persistent grids by it (cuBLASLt's Hopper GEMMs launch 2 x 66 clusters on a
  // 132-SM part), and it follows no GPC arithmetic: it is kept as measured.
  std::vector<std::vector<int>> max_active_clusters;
};

// Defaults below are those of the embedded default cluster (simcore/cluster/default_cluster.toml;
// a test keeps them equal). A loaded ClusterSpec has every figure filled in, none left at 0.
struct NvlinkSpec {
  bool present = true;
  bool nvswitch = true;       // all GPUs of a node hang off one non-blocking switch
  double bw_per_gpu = 0;      // per direction, bytes/s (loaded: the model's nvlink_bw unless set)
  double latency_s = 1e-6;
  // The fraction of bw_per_gpu a transfer's payload gets (headers, flow control, the copying
  // SMs): 0.75 reproduces real NCCL 2.28 between two H200s (see default_cluster.toml).
  double efficiency = 0.75;
};

struct NicSpec {
  int per_node = 8;           // NICs per node (loaded: one per GPU unless set)
  bool rail_optimized = true; // NIC i of every node sits on rail (leaf) i
  double bw = 50e9;           // per NIC per direction, bytes/s (400 Gb/s)
  double latency_s = 2e-6;
  double efficiency = 1.0;    // the fraction of bw a payload gets (not calibrated: 1)
};

// The host link of every GPU (the model's pcie_bw is its line rate per direction).
struct PcieSpec {
  // The fraction of the line rate a copy's payload gets: 0.87 is what a pinned 256 MiB copy
  // reached on a real H100 SXM (Gen5 x16, 63 GB/s): 54.7 GB/s host to device, 55.2 device to
  // host (tests/data/nvidia_smi_h100_580/pcie_bw.txt).
  double efficiency = 0.87;
};

struct FabricSpec {
  std::string kind = "leaf-spine";  // "leaf-spine" or "rail-optimized"
  int nodes_per_leaf = 32;          // leaf-spine: nodes below one leaf switch
  double oversubscription = 1.0;    // downlink:uplink bandwidth ratio at each leaf
  double link_bw = 50e9;            // switch-to-switch link, bytes/s (loaded: NIC bw unless set)
  double latency_s = 0.5e-6;        // per switch hop
};

// The collective model's parameters (collective_model.h) for one link class and protocol, per
// collective: T = latency + (W + 2 sqrt(W * fill)) / bandwidth for W bytes on a rank's busiest
// link, bandwidth = link_share x the link's line rate (NVLink per GPU, or the NIC's payload
// rate). The defaults are fitted to real NCCL 2.28.9 between two NVLink-connected H100s
// (tests/data/nccl_tests_h100x2_nvlink.txt, tests/gpu/fidelity/fit_collectives.py); a GPU model
// with its own fit in the configuration (the H200's) takes that instead (cluster_draft.h).
struct CollectiveCost {
  double latency_s = 10e-6;
  double link_share = 0.75;   // the collective's bus bandwidth as a share of its link's line rate
  double fill_bytes = 0;      // pipeline fill
};
// Collectives in the order of simcore::CollectiveOp (collective_model.h).
inline constexpr int kCollectiveKinds = 7;
inline constexpr const char* kCollectiveKeys[kCollectiveKinds] = {
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send_recv", "all_to_all"};
struct ProtocolCosts {
  CollectiveCost op[kCollectiveKinds];
};
struct LinkCollectives {
  double ll_max_bytes = 3 * 1024 * 1024;  // LL below this buffer size, Simple from it
  double step_latency_s = 1e-6;           // each ring step beyond the two of a 2-rank ring
  ProtocolCosts ll, simple;
};
// NCCL's host cost of one group of operations on the thread that calls it (ncclGroupStart to
// ncclGroupEnd, or the implicit group of a single call): what a real job's thread spends in NCCL
// there, charged to its virtual clock in place of what NCCL spends under vgpu (NCCL then runs
// another transport, the net plugin, whose host path costs otherwise). For a group with work on
// C communicators and N operations in all:
//     T = group + sum over the communicators of communicator (all_reduce_communicator where its
//         first operation is an all-reduce) + operation x (N - C)
// Fitted to nccl-tests' host-bound loops on the H200 host of nvidia-h100-x2 (call 5 of
// docs/device_calls/2026-11-27c: one thread driving one or two GPUs, every collective; default_cluster.toml
// repeats these figures and says how well they fit).
struct NcclHostCosts {
  double group_s = 0.75e-6;
  double communicator_s = 6.5e-6;
  double all_reduce_communicator_s = 7.75e-6;
  double operation_s = 0;
  bool enabled = true;  // false: NCCL's host time under vgpu is charged as measured
};
struct CollectiveSpec {
  LinkCollectives nvlink;  // every rank in one node
  LinkCollectives nic;     // ranks on several nodes (not measured yet: derived from the NIC)
  NcclHostCosts host;
};
// The fitted defaults (default_cluster.toml holds the same; a test keeps them equal).
CollectiveSpec default_collectives();

struct ClusterSpec {
  std::string source;               // "embedded default" or the config file's path
  int nodes = 1;
  int gpus_per_node = 8;
  GpuModel model;
  uint64_t memory_bytes = 0;        // capacity per virtual GPU (default: model.memory_bytes)
  NvlinkSpec nvlink;
  NicSpec nic;
  FabricSpec fabric;
  PcieSpec pcie;
  CollectiveSpec collectives = default_collectives();

  int total_gpus() const { return nodes * gpus_per_node; }
  int node_of(int gpu) const { return gpu / gpus_per_node; }
  int local_index(int gpu) const { return gpu % gpus_per_node; }
};

// A precise diagnostic: which file, which line/column, what is wrong.
struct ConfigError {
  std::string file;   // path, or "environment" for a bad override
  int line = 0;       // 1-based; 0 when not tied to a line
  int column = 0;
  std::string message;
  std::string to_string() const;  // "file:line:col: message"
};

}  // namespace simcore
