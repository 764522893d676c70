// Loading the cluster description: layers, file reading, the default, the summary.
#include "simcore/cluster_config.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cluster_draft.h"
#include "common/log.h"
#include "common/settings.h"
#include "simcore/gpu_catalog.h"

namespace simcore {
namespace detail {

CollectiveSpec unset_collectives() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CollectiveSpec s;
  for (LinkCollectives* l : {&s.nvlink, &s.nic}) {
    l->ll_max_bytes = l->step_latency_s = nan;
    for (ProtocolCosts* p : {&l->ll, &l->simple})
      for (CollectiveCost& c : p->op) c = {nan, nan, nan};
  }
  return s;
}

namespace {

// `over`'s given (non-NaN) figures replace `base`'s.
void lay_over(CollectiveSpec& base, const CollectiveSpec& over) {
  auto take = [](double& to, double from) {
    if (!std::isnan(from)) to = from;
  };
  const LinkCollectives* from[] = {&over.nvlink, &over.nic};
  LinkCollectives* to[] = {&base.nvlink, &base.nic};
  for (int i = 0; i < 2; ++i) {
    take(to[i]->ll_max_bytes, from[i]->ll_max_bytes);
    take(to[i]->step_latency_s, from[i]->step_latency_s);
    for (int k = 0; k < kCollectiveKinds; ++k) {
      const CollectiveCost* f[] = {&from[i]->ll.op[k], &from[i]->simple.op[k]};
      CollectiveCost* t[] = {&to[i]->ll.op[k], &to[i]->simple.op[k]};
      for (int j = 0; j < 2; ++j) {
        take(t[j]->latency_s, f[j]->latency_s);
        take(t[j]->link_share, f[j]->link_share);
        take(t[j]->fill_bytes, f[j]->fill_bytes);
      }
    }
  }
}

}  // namespace

ClusterSpec finish(const ClusterDraft& d) {
  ClusterSpec c = d.spec;
  if (auto it = d.model_collectives.find(c.model.id); it != d.model_collectives.end())
    lay_over(c.collectives, it->second.spec);
  c.memory_bytes = d.memory.value_or(c.model.memory_bytes);
  c.nvlink.bw_per_gpu = d.nvlink_bw.value_or(c.model.nvlink_bw);
  c.nic.per_node = d.nic_per_node.value_or(c.gpus_per_node);
  c.fabric.link_bw = d.fabric_link_bw.value_or(c.nic.bw);
  return c;
}

namespace {

// A cluster variable's text from `env`, else (an empty EnvLookup) the process environment as the
// settings registry reads it; nullptr when unset or empty.
const char* getenv_or(const EnvLookup& env, vgpu::settings::Id id) {
  const char* v = env ? env(vgpu::settings::spec(id).name.data()) : vgpu::settings::raw(id);
  return v && *v ? v : nullptr;
}

constexpr std::string_view kEmbeddedName = "embedded default";

// The draft after the embedded default: the base every file and the environment build on.
// Parsing the embedded text cannot fail once the tests pass; if it ever did, the error is kept
// and reported by every load.
struct Base {
  ClusterDraft draft;
  std::optional<ConfigError> error;
};
const Base& base() {
  static const Base b = [] {
    Base out;
    out.draft.spec.model = gpu_catalog().front();
    out.error = read_toml(embedded_default_toml(), kEmbeddedName, out.draft);
    out.draft.spec.source = std::string(kEmbeddedName);
    return out;
  }();
  return b;
}

ConfigResult failure(ConfigError e) {
  vgpu::log::error("cluster config: {}", e.to_string());
  return ConfigResult{std::nullopt, std::move(e)};
}

ConfigResult build(std::optional<std::string_view> text, std::string_view source, const EnvLookup& env) {
  try {
    if (base().error) return failure(*base().error);
    ClusterDraft draft = base().draft;
    if (text) {
      if (auto e = read_toml(*text, source, draft)) return failure(std::move(*e));
      draft.spec.source = std::string(source);
    }
    if (auto e = apply_environment(env, draft)) return failure(std::move(*e));
    ClusterSpec spec = finish(draft);
    auto set = [&](vgpu::settings::Id id) { return getenv_or(env, id) != nullptr; };
    const bool shaped_by_env = set(vgpu::settings::Id::nodes) || set(vgpu::settings::Id::gpus_per_node) ||
                               set(vgpu::settings::Id::device_count);
    if (int64_t{spec.nodes} * spec.gpus_per_node > kMaxTotalGpus)
      return failure(ConfigError{shaped_by_env ? std::string("environment") : spec.source, 0, 0,
                                 fmt::format("{} nodes x {} GPUs = {} GPUs: more than the {} GPUs one "
                                             "machine can simulate; use fewer nodes or GPUs per node",
                                             spec.nodes, spec.gpus_per_node,
                                             int64_t{spec.nodes} * spec.gpus_per_node, kMaxTotalGpus)});
    return ConfigResult{std::move(spec), {}};
  } catch (const std::exception& e) {  // allocation failure: still no exception leaves simcore
    return failure(ConfigError{std::string(source), 0, 0, fmt::format("cannot load: {}", e.what())});
  } catch (...) {
    return failure(ConfigError{std::string(source), 0, 0, "cannot load: unknown error"});
  }
}

std::string gbps(double bytes_per_s) { return fmt::format("{:g} Gb/s", bytes_per_s * 8 / 1e9); }
std::string gBps(double bytes_per_s) { return fmt::format("{:g} GB/s", bytes_per_s / 1e9); }
std::string us(double seconds) { return fmt::format("{:g} us", seconds * 1e6); }

}  // namespace
}  // namespace detail

std::string ConfigError::to_string() const {
  if (line <= 0) return fmt::format("{}: {}", file, message);
  return fmt::format("{}:{}:{}: {}", file, line, column, message);
}

ClusterSpec default_cluster() {
  static const ClusterSpec spec = [] {
    ConfigResult r = detail::build(std::nullopt, detail::kEmbeddedName, [](const char*) -> const char* { return nullptr; });
    if (r.ok()) return *r.cluster;
    ClusterSpec fallback;  // unreachable while the tests pass; keeps the driver alive if not
    fallback.model = gpu_catalog().front();
    fallback.memory_bytes = fallback.model.memory_bytes;
    fallback.nvlink.bw_per_gpu = fallback.model.nvlink_bw;
    fallback.source = std::string(detail::kEmbeddedName);
    return fallback;
  }();
  return spec;
}

ConfigResult parse_cluster_config(std::string_view toml_text, std::string_view source_name, const EnvLookup& env) {
  return detail::build(toml_text, source_name, env);
}

ConfigResult load_cluster_config_file(const std::string& path, const EnvLookup& env) {
  try {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      return detail::failure(ConfigError{
          path, 0, 0, std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"});
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    if (in) text << in.rdbuf();
    if (!in) return detail::failure(ConfigError{path, 0, 0, "cannot read the file"});
    return detail::build(text.str(), path, env);
  } catch (...) {
    return detail::failure(ConfigError{path, 0, 0, "cannot read the file"});
  }
}

ConfigResult load_cluster_config(const EnvLookup& env) {
  if (const char* path = detail::getenv_or(env, vgpu::settings::Id::config)) return load_cluster_config_file(path, env);
  return detail::build(std::nullopt, detail::kEmbeddedName, env);
}

std::string describe(const ClusterSpec& c) {
  using namespace detail;
  const GpuModel& m = c.model;
  std::string out = fmt::format("cluster: {} node{} x {} GPU{} = {} x {} ({}, sm_{}{}, {} SMs, {:.1f} GiB each)\n",
                                c.nodes, c.nodes == 1 ? "" : "s", c.gpus_per_node, c.gpus_per_node == 1 ? "" : "s",
                                c.total_gpus(), m.name, m.id, m.cc_major, m.cc_minor, m.sm_count,
                                static_cast<double>(c.memory_bytes) / (1ull << 30));
  if (c.nvlink.present)
    out += fmt::format("nvlink: {}, {} per GPU per direction ({:.0f}% payload), {} latency\n",
                       c.nvlink.nvswitch ? "NVSwitch" : "direct links", gBps(c.nvlink.bw_per_gpu),
                       100 * c.nvlink.efficiency, us(c.nvlink.latency_s));
  else
    out += "nvlink: none\n";
  out += fmt::format("nic: {} per node{}, {} each ({:.0f}% payload), {} latency\n", c.nic.per_node,
                     c.nic.rail_optimized ? " (rail-optimized)" : "", gbps(c.nic.bw), 100 * c.nic.efficiency,
                     us(c.nic.latency_s));
  out += fmt::format("pcie: Gen{} x{}, {} per direction ({:.0f}% payload)\n", m.pcie_gen, m.pcie_width,
                     gBps(m.pcie_bw), 100 * c.pcie.efficiency);
  out += fmt::format("fabric: {}, {} nodes per leaf, {:g}:1 oversubscription, {} links, {} per hop\n", c.fabric.kind,
                     c.fabric.nodes_per_leaf, c.fabric.oversubscription, gbps(c.fabric.link_bw), us(c.fabric.latency_s));
  out += fmt::format("source: {}\n", c.source);
  return out;
}

}  // namespace simcore
