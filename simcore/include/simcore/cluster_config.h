// Loading the cluster description: the embedded default (simcore/cluster/default_cluster.toml,
// compiled in), a user's TOML file named by VGPU_CONFIG, and environment overrides, in that
// order. The schema is documented at the top of default_cluster.toml.
//
// Layers: a user file is read over the embedded default (keys it leaves out keep the default's
// values); the environment is applied last. Values given nowhere are derived: memory capacity and
// NVLink bandwidth from the GPU model, NICs per node from GPUs per node (one per GPU), fabric
// link bandwidth from the NIC bandwidth. Explicit values, from the file or the environment, win.
//
// Environment overrides:
//   VGPU_NODES          nodes, 1..65536
//   VGPU_GPUS_PER_NODE  GPUs per node, 1..64
//   VGPU_DEVICE_COUNT   total GPUs. With VGPU_NODES: GPUs per node = count / nodes; with
//                       VGPU_GPUS_PER_NODE: nodes = count / GPUs per node (either must divide
//                       exactly; all three must agree); alone: one node of `count` GPUs.
//   VGPU_GPU_MODEL      catalog id or alias, e.g. H100, H200-141GB, A100, B200
//   VGPU_MEMORY         capacity per GPU, as in the file: bytes or "80GiB", "141 GB"
// An empty variable counts as unset.
//
// None of these functions throws or aborts: every failure comes back as a ConfigError naming the
// file (or "environment"), line, column and the problem.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "simcore/cluster_spec.h"

namespace simcore {

struct ConfigResult {
  std::optional<ClusterSpec> cluster;
  ConfigError error;
  bool ok() const { return cluster.has_value(); }
};

// Reads an environment variable; nullptr when unset. An empty function means the process
// environment, read through the settings registry (vgpu/common/settings.h), which declares these
// variables and their ranges.
using EnvLookup = std::function<const char*(const char* name)>;

// The embedded default, without environment overrides: 1 node x 8 H100-SXM-80GB, NVSwitch at
// 450 GB/s per direction per GPU, one 400 Gb/s NIC per GPU (rail-optimized), leaf-spine fabric.
ClusterSpec default_cluster();

// VGPU_CONFIG's file if set, else the embedded default; then the environment overrides.
ConfigResult load_cluster_config(const EnvLookup& env = {});
// `toml_text` read over the embedded default, then the environment. `source_name` names the text
// in errors and in ClusterSpec::source.
ConfigResult parse_cluster_config(std::string_view toml_text, std::string_view source_name,
                                  const EnvLookup& env = {});
ConfigResult load_cluster_config_file(const std::string& path, const EnvLookup& env = {});

// A short human summary, several lines.
std::string describe(const ClusterSpec& cluster);

// The quantity syntax of the file and the environment; std::nullopt when `text` is not one.
//   bytes:     "80GiB", "80 GB", "141GB", "512MiB" (KB/MB/GB/TB are powers of 1000,
//              KiB/MiB/GiB/TiB of 1024; units are case-insensitive)
//   bandwidth: bytes or bits per second: "450GB/s", "400Gb/s", "400 Gbps", "25 GiB/s".
//              'B' is a byte, 'b' a bit; the result is in bytes/s ("400Gb/s" = 50e9)
//   duration:  "1us", "1.5 us", "500ns", "2ms", "1s" (also "µs"); the result is in seconds
std::optional<uint64_t> parse_bytes(std::string_view text);
std::optional<double> parse_bandwidth(std::string_view text);
std::optional<double> parse_duration(std::string_view text);

}  // namespace simcore
