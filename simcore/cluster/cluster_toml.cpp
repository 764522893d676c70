// The cluster file's schema: TOML tables and keys to ClusterDraft fields, with precise errors.
// toml++ is compiled in header-only and without exceptions, so that nothing of it is exported
// from the libraries that embed simcore and parse failures come back as values.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "cluster_draft.h"
#include "simcore/gpu_catalog.h"

namespace simcore::detail {
namespace {

// The smallest link efficiency and bandwidth a configuration may give: below them a transfer's
// virtual duration is absurd or infinite.
constexpr double kMinEfficiency = 0.001;
constexpr double kMinBandwidth = 1e6;  // 1 MB/s

// "got ..." in messages: the value as the user wrote it, or its kind.
std::string shown(const toml::node& node) {
  if (auto s = node.as_string()) return fmt::format("\"{}\"", s->get());
  if (auto i = node.as_integer()) return std::to_string(i->get());
  if (auto f = node.as_floating_point()) return fmt::format("{}", f->get());
  if (auto b = node.as_boolean()) return b->get() ? "true" : "false";
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  return "a date or time";
}

class FileReader {
 public:
  FileReader(std::string_view source, ClusterDraft& draft) : source_(source), d_(draft) {}

  std::optional<ConfigError> read(const toml::table& root) {
    for (auto&& [key, node] : root) {
      const std::string_view name = key.str();
      const toml::table* table = node.as_table();
      if (name != "cluster" && name != "nvlink" && name != "nic" && name != "fabric" && name != "pcie" &&
          name != "collectives") {
        fail(key.source(), fmt::format("unknown {} \"{}\"; known tables: cluster, nvlink, nic, fabric, pcie, collectives",
                                       table ? "table" : "key", name));
      } else if (!table) {
        fail(node.source(), fmt::format("{}: expected a table [{}], got {}", name, name, shown(node)));
      } else if (name == "collectives") {
        read_collectives(*table);
      } else {
        section_ = name;
        for (auto&& [k, v] : *table) {
          key_ = k.str();
          if (!read_key(k, v)) break;
        }
      }
      if (error_) return error_;
    }
    check_rails(root);
    return error_;
  }

 private:
  // One key of the current section; false after an error.
  bool read_key(const toml::key& key, const toml::node& v) {
    NicSpec& nic = d_.spec.nic;
    FabricSpec& fabric = d_.spec.fabric;
    NvlinkSpec& nvlink = d_.spec.nvlink;
    const std::string_view k = key.str();
    if (section_ == "cluster") {
      if (k == "nodes") return integer(v, 1, kMaxNodes, d_.spec.nodes);
      if (k == "gpus_per_node") return integer(v, 1, kMaxGpusPerNode, d_.spec.gpus_per_node);
      if (k == "gpu_model") return model(v);
      if (k == "memory") return capacity(v, d_.memory);
      return unknown(key, "nodes, gpus_per_node, gpu_model, memory");
    }
    if (section_ == "nvlink") {
      if (k == "present") return boolean(v, nvlink.present);
      if (k == "nvswitch") return boolean(v, nvlink.nvswitch);
      if (k == "bandwidth") return bandwidth(v, d_.nvlink_bw);
      if (k == "latency") return latency(v, nvlink.latency_s);
      if (k == "efficiency") return fraction(v, nvlink.efficiency);
      return unknown(key, "present, nvswitch, bandwidth, latency, efficiency");
    }
    if (section_ == "nic") {
      if (k == "per_node") {
        int n = 0;
        if (!integer(v, 1, kMaxGpusPerNode, n)) return false;
        d_.nic_per_node = n;
        return true;
      }
      if (k == "rail_optimized") return boolean(v, nic.rail_optimized);
      if (k == "bandwidth") {
        std::optional<double> bw;
        if (!bandwidth(v, bw)) return false;
        nic.bw = *bw;
        return true;
      }
      if (k == "latency") return latency(v, nic.latency_s);
      if (k == "efficiency") return fraction(v, nic.efficiency);
      return unknown(key, "per_node, rail_optimized, bandwidth, latency, efficiency");
    }
    if (section_ == "pcie") {
      if (k == "efficiency") return fraction(v, d_.spec.pcie.efficiency);
      return unknown(key, "efficiency");
    }
    // fabric
    if (k == "kind") {
      const auto s = v.value<std::string>();
      if (s != "leaf-spine" && s != "rail-optimized")
        return fail(v.source(), expected("\"leaf-spine\" or \"rail-optimized\"", v));
      fabric.kind = *s;
      return true;
    }
    if (k == "nodes_per_leaf") return integer(v, 1, kMaxNodes, fabric.nodes_per_leaf);
    if (k == "oversubscription") {
      const auto x = v.value<double>();  // integers convert too
      if (!x || !(*x >= 1 && *x <= 1000))
        return fail(v.source(), expected("a ratio between 1 and 1000, e.g. 1.0 or 4", v));
      fabric.oversubscription = *x;
      return true;
    }
    if (k == "link_bandwidth") return bandwidth(v, d_.fabric_link_bw);
    if (k == "latency") return latency(v, fabric.latency_s);
    return unknown(key, "kind, nodes_per_leaf, oversubscription, link_bandwidth, latency");
  }

  // [collectives.<link class>] with ll_max, step_latency and the tables [ll] and [simple] of
  // per-collective costs (cluster_spec.h, CollectiveSpec); [collectives.<GPU model>.<link class>]
  // the same for one GPU model (cluster_draft.h, ModelCollectives).
  void read_collectives(const toml::table& t) {
    const int document = d_.documents - 1;
    for (auto&& [k, v] : t) {
      section_ = "collectives";
      key_ = k.str();
      const toml::table* lt = v.as_table();
      if (lt == nullptr) {
        fail(v.source(), expected("a table", v));
        return;
      }
      if (key_ == "host") {
        if (!read_host(*lt, d_.spec.collectives.host)) return;
        continue;
      }
      if (key_ == "nvlink" || key_ == "nic") {
        // General figures: the model fits of earlier documents give way to them.
        std::erase_if(d_.model_collectives, [&](const auto& m) { return m.second.document < document; });
        if (!read_link(k, *lt, d_.spec.collectives, std::string(k.str()))) return;
        continue;
      }
      const GpuModel* model = find_gpu_model(k.str());
      if (model == nullptr) {
        unknown(k, fmt::format("host, nvlink, nic, or a GPU model ({})", known_gpu_models()));
        return;
      }
      auto [it, added] = d_.model_collectives.try_emplace(model->id);
      auto& fit = it->second;
      if (added || fit.document != document) fit = {unset_collectives(), document};
      for (auto&& [lk, lv] : *lt) {
        const std::string where = fmt::format("{}.{}", k.str(), lk.str());
        key_ = scratch_ = where;
        const toml::table* link = lv.as_table();
        if (lk.str() != "nvlink" && lk.str() != "nic") {
          unknown(lk, "nvlink, nic");
          return;
        }
        if (link == nullptr) {
          fail(lv.source(), expected("a table", lv));
          return;
        }
        if (!read_link(lk, *link, fit.spec, where)) return;
      }
    }
  }
  // [collectives.host]: NCCL's host cost of a group (cluster_spec.h, NcclHostCosts).
  bool read_host(const toml::table& t, NcclHostCosts& host) {
    for (auto&& [k, v] : t) {
      key_ = scratch_ = fmt::format("host.{}", k.str());
      const std::string_view name = k.str();
      bool ok = true;
      if (name == "group") {
        ok = latency(v, host.group_s);
      } else if (name == "communicator") {
        ok = latency(v, host.communicator_s);
      } else if (name == "all_reduce_communicator") {
        ok = latency(v, host.all_reduce_communicator_s);
      } else if (name == "operation") {
        ok = latency(v, host.operation_s);
      } else if (name == "enabled") {
        ok = boolean(v, host.enabled);
      } else {
        ok = unknown(k, "group, communicator, all_reduce_communicator, operation, enabled");
      }
      if (!ok) return false;
    }
    return true;
  }
  // One link class's figures (`key`: nvlink or nic) into `spec`; `where` names it in messages.
  bool read_link(const toml::key& key, const toml::table& lt, CollectiveSpec& spec, const std::string& where) {
    LinkCollectives* link = key.str() == "nvlink" ? &spec.nvlink : &spec.nic;
    for (auto&& [lk, lv] : lt) {
      key_ = scratch_ = fmt::format("{}.{}", where, lk.str());
      const std::string_view name = lk.str();
      bool ok = true;
      if (name == "ll_max") {
        std::optional<uint64_t> bytes;
        ok = capacity(lv, bytes);
        if (ok) link->ll_max_bytes = static_cast<double>(*bytes);
      } else if (name == "step_latency") {
        ok = latency(lv, link->step_latency_s);
      } else if (name == "ll" || name == "simple") {
        ok = read_costs(lv, name == "ll" ? link->ll : link->simple, fmt::format("{}.{}", where, name));
      } else {
        ok = unknown(lk, "ll_max, step_latency, ll, simple");
      }
      if (!ok) return false;
    }
    return true;
  }
  bool read_costs(const toml::node& v, ProtocolCosts& costs, const std::string& where) {
    const toml::table* t = v.as_table();
    if (t == nullptr) return fail(v.source(), expected("a table of collectives", v));
    for (auto&& [k, cv] : *t) {
      key_ = scratch_ = fmt::format("{}.{}", where, k.str());
      int index = -1;
      for (int i = 0; i < kCollectiveKinds; ++i)
        if (k.str() == kCollectiveKeys[i]) index = i;
      if (index < 0)
        return unknown(k, "all_reduce, all_gather, reduce_scatter, broadcast, reduce, send_recv, all_to_all");
      const toml::table* c = cv.as_table();
      if (c == nullptr)
        return fail(cv.source(), expected("{ latency = \"7us\", link_share = 0.75, fill = \"512KiB\" }", cv));
      CollectiveCost cost = costs.op[index];
      const std::string op_path = scratch_;
      for (auto&& [ck, value] : *c) {
        const std::string_view name = ck.str();
        key_ = scratch_ = fmt::format("{}.{}", op_path, name);
        bool ok = true;
        if (name == "latency") {
          ok = latency(value, cost.latency_s);
        } else if (name == "link_share") {
          ok = fraction(value, cost.link_share);
        } else if (name == "fill") {
          const auto* s = value.as_string();
          const auto bytes = s ? parse_bytes(s->get()) : std::nullopt;
          if (s != nullptr && (s->get() == "0" || s->get().starts_with("0KiB") || s->get().starts_with("0B")))
            cost.fill_bytes = 0;
          else if (!bytes)
            ok = fail(value.source(), expected("a size like \"512KiB\"", value));
          else
            cost.fill_bytes = static_cast<double>(*bytes);
        } else {
          ok = fail(ck.source(), fmt::format("{}: unknown key; keys: latency, link_share, fill", path()));
        }
        if (!ok) return false;
      }
      costs.op[index] = cost;
    }
    return true;
  }

  bool integer(const toml::node& v, int lo, int hi, int& out) {
    const auto* i = v.as_integer();
    if (!i || i->get() < lo || i->get() > hi)
      return fail(v.source(), expected(fmt::format("an integer between {} and {}", lo, hi), v));
    out = static_cast<int>(i->get());
    return true;
  }
  bool boolean(const toml::node& v, bool& out) {
    const auto* b = v.as_boolean();
    if (!b) return fail(v.source(), expected("true or false", v));
    out = b->get();
    return true;
  }
  bool model(const toml::node& v) {
    const auto* s = v.as_string();
    if (!s) return fail(v.source(), expected("a GPU model name such as \"H100-SXM-80GB\"", v));
    const GpuModel* m = find_gpu_model(s->get());
    if (!m)
      return fail(v.source(), fmt::format("{}: unknown GPU model {}; known models: {}", path(),
                                          shown(v), known_gpu_models()));
    d_.spec.model = *m;
    return true;
  }
  bool capacity(const toml::node& v, std::optional<uint64_t>& out) {
    std::optional<uint64_t> bytes;
    if (const auto* i = v.as_integer(); i && i->get() > 0) bytes = static_cast<uint64_t>(i->get());
    if (const auto* s = v.as_string()) bytes = parse_bytes(s->get());
    if (!bytes || *bytes == 0 || *bytes > kMaxMemoryBytes)
      return fail(v.source(), expected("a capacity like \"80GiB\" (more than 0, at most 4 TiB)", v));
    out = bytes;
    return true;
  }
  bool bandwidth(const toml::node& v, std::optional<double>& out) {
    const auto* s = v.as_string();
    const auto bw = s ? parse_bandwidth(s->get()) : std::nullopt;
    if (!bw || !(*bw >= kMinBandwidth) || !std::isfinite(*bw))
      return fail(v.source(), expected("a bandwidth like \"450GB/s\" or \"400Gb/s\", at least 1MB/s", v));
    out = bw;
    return true;
  }
  // An efficiency: at least kMinEfficiency, at most 1. Near zero it made every transfer last
  // forever (an infinite virtual time).
  bool fraction(const toml::node& v, double& out) {
    const auto x = v.value<double>();  // integers convert too
    if (!x || !(*x >= kMinEfficiency && *x <= 1))
      return fail(v.source(), expected(fmt::format("a fraction from {} to 1, e.g. 0.75", kMinEfficiency), v));
    out = *x;
    return true;
  }
  bool latency(const toml::node& v, double& out) {
    const auto* s = v.as_string();
    const auto t = s ? parse_duration(s->get()) : std::nullopt;
    if (!t) return fail(v.source(), expected("a latency like \"1us\" or \"500ns\"", v));
    out = *t;
    return true;
  }
  bool unknown(const toml::key& key, std::string_view known) {
    return fail(key.source(), fmt::format("{}: unknown key; keys of [{}]: {}", path(), section_, known));
  }

  // A rail-optimized fabric is wired NIC i to rail i: it needs rail-optimized NICs.
  void check_rails(const toml::table& root) {
    if (error_ || d_.spec.fabric.kind != "rail-optimized" || d_.spec.nic.rail_optimized) return;
    const toml::node* where = root.at_path("fabric.kind").node();
    if (!where) where = root.at_path("nic.rail_optimized").node();
    fail(where ? where->source() : toml::source_region{},
         "fabric.kind = \"rail-optimized\" needs nic.rail_optimized = true");
  }

  std::string path() const { return fmt::format("{}.{}", section_, key_); }
  std::string expected(std::string_view what, const toml::node& got) const {
    return fmt::format("{}: expected {}, got {}", path(), what, shown(got));
  }
  bool fail(const toml::source_region& where, std::string message) {
    error_ = ConfigError{std::string(source_), static_cast<int>(where.begin.line),
                         static_cast<int>(where.begin.column), std::move(message)};
    return false;
  }

  std::string_view source_;
  ClusterDraft& d_;
  std::string_view section_, key_;
  std::string scratch_;  // key_ of a nested [collectives] key
  std::optional<ConfigError> error_;
};

}  // namespace

std::optional<ConfigError> read_toml(std::string_view text, std::string_view source, ClusterDraft& draft) {
  toml::parse_result parsed = toml::parse(text, source);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return ConfigError{std::string(source), static_cast<int>(e.source().begin.line),
                       static_cast<int>(e.source().begin.column), std::string(e.description())};
  }
  ++draft.documents;
  return FileReader(source, draft).read(parsed.table());
}

}  // namespace simcore::detail
