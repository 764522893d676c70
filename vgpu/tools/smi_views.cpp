// vgpu-smi's other nvidia-smi views, in nvidia-smi 580's layout (tests/data/nvidia_smi_h100_580):
// `topo -m` (the virtual fabric: NV# within a node over NVLink, NODE within a node without it, SYS
// between nodes), `nvlink -s`, `dmon` and `--query-compute-apps`.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "nvml/device_report.h"
#include "tools/smi_render.h"

namespace vgpu::smi {
namespace {

// NVLink links from device a to device b (same node), as the virtual NVML wires them
// (nvml/nvml_topology.cpp): all of a GPU's links through the node's NVSwitch reach every peer;
// without a switch, link l goes to peer (local + 1 + l % (n - 1)) % n.
int links_between(const inspect::JobView& v, int a, int b) {
  const inspect::DeviceFacts& fa = v.devices[a];
  const inspect::DeviceFacts& fb = v.devices[b];
  if (fa.node != fb.node || !v.nvlink.present || fa.model == nullptr) return 0;
  const int links = fa.model->nvlink_links;
  if (v.nvlink.nvswitch) return links;
  int n = 0;
  for (const auto& d : v.devices) n += d.node == fa.node;
  if (n < 2) return 0;
  int count = 0;
  for (int l = 0; l < links; ++l) count += (fa.local + 1 + l % (n - 1)) % n == fb.local;
  return count;
}

std::string cpu_range() {
  const long n = sysconf(_SC_NPROCESSORS_CONF);
  return n > 1 ? fmt::format("0-{}", n - 1) : "0";
}

// The line rate nvidia-smi prints per link, by NVLink generation (the catalog's bandwidth is the
// payload rate the simulator uses).
std::string link_rate(const simcore::GpuModel* m) {
  const int cc = m ? m->cc_major : 9;
  return cc == 8 ? "25.781 GB/s" : cc == 9 ? "26.562 GB/s" : "53.125 GB/s";
}

}  // namespace

std::string render_topology(const Shown& s) {
  const inspect::JobView& v = s.view;
  std::string out = "\t\x1b[4m";
  for (int i : s.devices) out += fmt::format("GPU{}\t", i);
  out += "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n";
  for (int a : s.devices) {
    out += fmt::format("GPU{}", a);
    for (int b : s.devices) {
      if (a == b) out += "\t X ";
      else if (int n = links_between(v, a, b); n > 0) out += fmt::format("\tNV{}", n);
      else out += v.devices[a].node == v.devices[b].node ? "\tNODE" : "\tSYS";
    }
    out += "\t" + cpu_range() + "\t0\t\tN/A\n";
  }
  out += "\nLegend:\n\n"
         "  X    = Self\n"
         "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
         "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
         "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
         "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
         "  PIX  = Connection traversing at most a single PCIe bridge\n"
         "  NV#  = Connection traversing a bonded set of # NVLinks\n";
  return out;
}

std::string render_nvlink_status(const Shown& s) {
  const inspect::JobView& v = s.view;
  std::string out;
  for (int i : s.devices) {
    const inspect::DeviceFacts& f = v.devices[i];
    out += fmt::format("GPU {}: {} (UUID: {})\n", f.index, f.name, f.uuid);
    int links = 0;
    for (int j = 0; j < static_cast<int>(v.devices.size()); ++j)
      if (j != i) links = std::max(links, v.nvlink.nvswitch ? links_between(v, i, j) : links + links_between(v, i, j));
    if (links == 0) {
      out += "\tNo NVLinks\n";
      continue;
    }
    for (int l = 0; l < links; ++l) out += fmt::format("\t Link {}: {}\n", l, link_rate(f.model));
  }
  return out;
}

std::string render_dmon_header() {
  std::string out = "# gpu";
  for (const char* c : {"pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk"})
    out += fmt::format("{:>7}", c);
  out += " \n# Idx";
  for (const char* c : {"W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz", "MHz"}) out += fmt::format("{:>7}", c);
  return out + " \n";
}

std::string render_dmon_rows(const Shown& s) {
  std::string out;
  for (int i : s.devices) {
    const inspect::DeviceReport r = inspect::device_report(s.view.devices[i], s.view.activity[i]);
    out += fmt::format("{:>5}", s.view.devices[i].index);
    for (unsigned x : {static_cast<unsigned>(r.power_draw), r.temp_gpu, r.temp_memory, r.util_gpu, r.util_memory, 0u, 0u,
                       0u, 0u, r.clock_memory, r.clock_graphics})
      out += fmt::format("{:>7}", x);
    out += " \n";
  }
  return out;
}

std::optional<std::string> render_compute_apps(const Shown& s, const std::vector<std::string>& fields,
                                               bool noheader, bool nounits, std::string* error) {
  const inspect::JobView& v = s.view;
  struct Row {
    const inspect::DeviceFacts* dev;
    const status::ProcessSnapshot* proc;
    uint64_t bytes;
  };
  using Value = std::string (*)(const Row&);
  static const std::map<std::string, std::pair<const char*, Value>> known = {
      {"timestamp", {"", [](const Row&) { return query_timestamp(); }}},
      {"gpu_name", {"", [](const Row& r) { return r.dev->name; }}},
      {"gpu_bus_id", {"", [](const Row& r) { return r.dev->pci_bus_id; }}},
      {"gpu_serial", {"", [](const Row& r) {
         return inspect::device_report(*r.dev, inspect::DeviceActivity{}).serial;
       }}},
      {"gpu_uuid", {"", [](const Row& r) { return r.dev->uuid; }}},
      {"pid", {"", [](const Row& r) { return std::to_string(r.proc->pid); }}},
      {"process_name", {"", [](const Row& r) { return r.proc->name; }}},
      {"used_gpu_memory", {"MiB", [](const Row& r) { return std::to_string(mib(r.bytes)); }}},
      {"used_memory", {"MiB", [](const Row& r) { return std::to_string(mib(r.bytes)); }}},
  };
  std::vector<std::pair<std::string, std::pair<const char*, Value>>> chosen;
  for (const std::string& name : fields) {
    auto it = known.find(name);
    if (it == known.end()) {
      *error = "Field \"" + name + "\" is not a valid field to query.";
      return std::nullopt;
    }
    chosen.emplace_back(name == "used_memory" ? "used_gpu_memory" : name, it->second);
  }
  std::string out;
  if (!noheader) {
    for (size_t c = 0; c < chosen.size(); ++c) {
      const char* unit = chosen[c].second.first;
      out += (c ? ", " : "") + chosen[c].first + (*unit ? fmt::format(" [{}]", unit) : "");
    }
    out += "\n";
  }
  for (int i : s.devices)
    for (const status::ProcessSnapshot& p : v.processes) {
      if (static_cast<size_t>(i) >= p.memory.size() || p.memory[i] == 0) continue;
      const Row row{&v.devices[i], &p, p.memory[i]};
      for (size_t c = 0; c < chosen.size(); ++c) {
        const char* unit = chosen[c].second.first;
        out += (c ? ", " : "") + chosen[c].second.second(row) + (!nounits && *unit ? fmt::format(" {}", unit) : "");
      }
      out += "\n";
    }
  return out;
}

}  // namespace vgpu::smi
