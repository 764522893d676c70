// The VGPU_* environment overrides (documented in simcore/cluster_config.h).
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cstdlib>

#include "cluster_draft.h"
#include "common/settings.h"
#include "simcore/gpu_catalog.h"

namespace simcore::detail {
namespace {

ConfigError env_error(std::string message) { return ConfigError{"environment", 0, 0, std::move(message)}; }

using vgpu::settings::Id;

// The registry declares these variables with the ranges enforced here (and its README table shows
// them); this parser is stricter than the registry's "log and use the default": a malformed
// value fails the cluster load, because a cluster of the wrong size is worse than none.
static_assert(vgpu::settings::spec(Id::nodes).max == kMaxNodes);
static_assert(vgpu::settings::spec(Id::gpus_per_node).max == kMaxGpusPerNode);
static_assert(vgpu::settings::spec(Id::device_count).max == kMaxTotalGpus);

// The variable's value, or nullopt when unset or empty.
std::optional<std::string_view> lookup(const EnvLookup& env, Id id) {
  const char* v = env ? env(vgpu::settings::spec(id).name.data()) : vgpu::settings::raw(id);
  if (!v || !*v) return std::nullopt;
  return std::string_view(v);
}

// A whole-string decimal integer in [lo, hi] (surrounding blanks allowed).
std::optional<int64_t> integer(std::string_view s, int64_t lo, int64_t hi) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

class EnvReader {
 public:
  explicit EnvReader(const EnvLookup& env) : env_(env) {}

  // The integer variable `id` in its declared range; nullopt when unset. Sets error_ when malformed.
  std::optional<int> get_int(Id id) {
    const auto& spec = vgpu::settings::spec(id);
    const std::string_view name = spec.name;
    const auto lo = static_cast<int64_t>(spec.min), hi = static_cast<int64_t>(spec.max);
    auto text = lookup(env_, id);
    if (!text || error_) return std::nullopt;
    auto v = integer(*text, lo, hi);
    if (!v) error_ = env_error(fmt::format("{}: expected an integer between {} and {}, got \"{}\"", name, lo, hi, *text));
    return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
  }

  std::optional<ConfigError> apply(ClusterDraft& d) {
    const auto nodes = get_int(Id::nodes);
    const auto per_node = get_int(Id::gpus_per_node);
    const auto count = get_int(Id::device_count);
    if (error_) return error_;
    if (nodes) d.spec.nodes = *nodes;
    if (per_node) d.spec.gpus_per_node = *per_node;
    if (count) {
      if (auto e = split(*count, nodes, per_node, d.spec)) return e;
    }

    if (auto name = lookup(env_, Id::gpu_model)) {
      const GpuModel* m = find_gpu_model(*name);
      if (!m)
        return env_error(fmt::format("VGPU_GPU_MODEL: unknown GPU model \"{}\"; known models: {}", *name,
                                     known_gpu_models()));
      d.spec.model = *m;
    }
    if (auto text = lookup(env_, Id::memory)) {
      const auto bytes = parse_bytes(*text);
      if (!bytes || *bytes == 0 || *bytes > kMaxMemoryBytes)
        return env_error(fmt::format(
            "VGPU_MEMORY: expected a capacity like \"80GiB\" (more than 0, at most 4 TiB), got \"{}\"", *text));
      d.memory = bytes;
    }
    return std::nullopt;
  }

 private:
  // VGPU_DEVICE_COUNT: total GPUs, split over nodes as the other two variables allow.
  static std::optional<ConfigError> split(int count, std::optional<int> nodes, std::optional<int> per_node,
                                          ClusterSpec& spec) {
    if (nodes && per_node) {
      if (*nodes * *per_node == count) return std::nullopt;
      return env_error(fmt::format("VGPU_DEVICE_COUNT={} disagrees with VGPU_NODES={} x VGPU_GPUS_PER_NODE={}",
                                   count, *nodes, *per_node));
    }
    if (nodes) {
      if (count % *nodes != 0 || count / *nodes > kMaxGpusPerNode)
        return env_error(fmt::format("VGPU_DEVICE_COUNT={} cannot be split into VGPU_NODES={} nodes of at most "
                                     "{} GPUs each", count, *nodes, kMaxGpusPerNode));
      spec.gpus_per_node = count / *nodes;
      return std::nullopt;
    }
    if (per_node) {
      if (count % *per_node != 0)
        return env_error(fmt::format("VGPU_DEVICE_COUNT={} is not a multiple of VGPU_GPUS_PER_NODE={}", count,
                                     *per_node));
      if (count / *per_node > kMaxNodes)
        return env_error(fmt::format("VGPU_DEVICE_COUNT={} with VGPU_GPUS_PER_NODE={} needs more than {} nodes",
                                     count, *per_node, kMaxNodes));
      spec.nodes = count / *per_node;
      return std::nullopt;
    }
    if (count > kMaxGpusPerNode)
      return env_error(fmt::format("VGPU_DEVICE_COUNT={} GPUs do not fit in one node (at most {}); set "
                                   "VGPU_NODES or VGPU_GPUS_PER_NODE too", count, kMaxGpusPerNode));
    spec.nodes = 1;
    spec.gpus_per_node = count;
    return std::nullopt;
  }

  const EnvLookup& env_;
  std::optional<ConfigError> error_;
};

}  // namespace

std::optional<ConfigError> apply_environment(const EnvLookup& env, ClusterDraft& draft) {
  return EnvReader(env).apply(draft);
}

}  // namespace simcore::detail
