#include "tools/smi_render.h"

#include "tools/smi_fields.h"
#include "common/settings.h"

#include <cstdlib>
#include <ctime>
#include <fmt/format.h>

#include <functional>
#include <map>

namespace vgpu::smi {
namespace {

constexpr size_t kInner = 89;  // nvidia-smi's table is 91 columns wide
const std::string kRule = "+" + std::string(kInner, '-') + "+\n";
const std::string kDouble = "|" + std::string(kInner, '=') + "|\n";

std::string fit(std::string s, size_t width) {
  if (s.size() > width) s.resize(width);
  return s + std::string(width - s.size(), ' ');
}
std::string boxed(const std::string& inner) { return "|" + fit(inner, kInner) + "|\n"; }
// Long paths keep their end, as nvidia-smi does: "...lib/python3".
std::string tail(const std::string& s, size_t width) {
  return s.size() <= width ? s : "..." + s.substr(s.size() - (width - 3));
}

std::string policy(vgpu::settings::Id id) {
  return vgpu::settings::is_set(id) ? vgpu::settings::text(id) : "n/a (sim)";
}

// The physical GPU memory behind a virtual device (the passthrough backend's own allocations,
// contexts and shared chunks); the sim backend has none.
std::string physical_memory(const inspect::JobView& v, size_t i) {
  const uint64_t physical = v.activity[i].physical;
  if (physical == 0) return v.backend == "passthrough" ? "none yet" : "none (sim backend)";
  return fmt::format("{}MiB", mib(physical));
}

std::string now_line() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
  return std::string(buf) + "\n";
}

std::string cuda_version() {
  return fmt::format("{}.{}", inspect::kCudaDriverVersion / 1000, (inspect::kCudaDriverVersion % 1000) / 10);
}

}  // namespace

std::string render_table(const Shown& s, bool with_vgpu_section) {
  const inspect::JobView& v = s.view;
  std::string out = now_line();
  out += kRule;
  out += boxed(fmt::format(" VGPU-SMI {:<25}Driver Version: {:<15}CUDA Version: {}", inspect::kDriverVersion,
                           inspect::kDriverVersion, cuda_version()));
  out += "+-----------------------------------------+------------------------+----------------------+\n";
  out += "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n";
  out += "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n";
  out += "|                                         |                        |               MIG M. |\n";
  out += "|=========================================+========================+======================|\n";
  for (int i : s.devices) {
    const inspect::DeviceFacts& f = v.devices[i];
    const inspect::DeviceReport r = inspect::device_report(f, v.activity[i]);
    // As nvidia-smi 580 prints an H100: ECC enabled with no uncorrected error, no fan.
    out += fmt::format("| {:>3}  {:<25}{:>8}  | {:>18} {:>3} | {:>20} |\n", f.index, fit(f.name, 25), "On",
                       f.pci_bus_id, "Off", "0");
    out += fmt::format("| {:<3}{:>5}C{:>6}{:>24} | {:>10} / {:>9} | {:>7}{:>13} |\n", "N/A", r.temp_gpu,
                       fmt::format("P{}", r.pstate),
                       fmt::format("{}W / {:>4}W", static_cast<int>(r.power_draw), static_cast<int>(r.power_limit)),
                       fmt::format("{}MiB", mib(r.memory_used)), fmt::format("{}MiB", mib(r.memory_total)),
                       fmt::format("{}%", r.util_gpu), "Default");
    out += fmt::format("| {:<39} | {:<22} | {:>20} |\n", "", "", "Disabled");
    out += "+-----------------------------------------+------------------------+----------------------+\n";
  }
  out += "\n" + kRule;
  out += boxed(" Processes:");
  out += boxed("  GPU   GI   CI              PID   Type   Process name                        GPU Memory");
  out += boxed("        ID   ID                                                               Usage");
  out += kDouble;
  size_t rows = 0;
  for (const status::ProcessSnapshot& p : v.processes)
    for (int i : s.devices) {
      if (static_cast<size_t>(i) >= p.memory.size() || p.memory[i] == 0) continue;
      out += boxed(fmt::format("  {:>3}   N/A  N/A  {:>15}      C   {:<36}{:>9} ", i, p.pid, tail(p.name, 35),
                               fmt::format("{}MiB", mib(p.memory[i]))));
      ++rows;
    }
  if (rows == 0) out += boxed("  No running processes found");
  out += kRule;
  if (with_vgpu_section) out += "\n" + render_vgpu(s);
  if (!s.note.empty()) out += s.note + "\n";
  return out;
}

std::string render_vgpu(const Shown& s) {
  const inspect::JobView& v = s.view;
  std::string out = kRule;
  if (v.has_job())
    out += boxed(fmt::format(" vgpu job: {}    backend: {}", v.job, v.backend));
  else
    out += boxed(" vgpu job: none (configured cluster)");
  out += boxed(fmt::format(" launch policy: {:<28}memory policy: {}", policy(vgpu::settings::Id::launch_policy),
                           policy(vgpu::settings::Id::memory_policy)));
  // Memory: what the program was charged on the virtual device (the table's Memory-Usage), and
  // the physical GPU memory behind it.
  out += boxed("  GPU   Virtual clock   Busy            Kernels    Memory used   Physical memory");
  out += kDouble;
  for (int i : s.devices) {
    const inspect::DeviceActivity& a = v.activity[i];
    out += boxed(fmt::format("  {:>3}   {:<14}  {:<14}  {:>7}   {:>11}   {}", i, fmt::format("{:.6f} s", a.clock_s),
                             fmt::format("{:.6f} s", a.busy_s), a.kernels, fmt::format("{}MiB", mib(a.used)),
                             physical_memory(v, i)));
  }
  out += kRule;
  return out;
}

std::string render_list(const Shown& s) {
  std::string out;
  for (int i : s.devices) {
    const inspect::DeviceFacts& f = s.view.devices[i];
    out += fmt::format("GPU {}: {} (UUID: {})\n", f.index, f.name, f.uuid);
  }
  return out;
}

std::optional<std::string> render_query(const Shown& s, const std::vector<std::string>& fields, bool noheader,
                                        bool nounits, std::string* error) {
  std::vector<const QueryField*> chosen;
  for (const std::string& name : fields) {
    const QueryField* f = find_gpu_field(name);
    if (f == nullptr) {
      *error = "Field \"" + name + "\" is not a valid field to query.";
      return std::nullopt;
    }
    chosen.push_back(f);
  }
  std::string out;
  if (!noheader) {
    for (size_t c = 0; c < chosen.size(); ++c)
      out += (c ? ", " : "") + chosen[c]->name + (chosen[c]->unit.empty() ? "" : " [" + chosen[c]->unit + "]");
    out += "\n";
  }
  const std::string timestamp = query_timestamp();
  for (int i : s.devices) {
    const inspect::DeviceReport report = inspect::device_report(s.view.devices[i], s.view.activity[i]);
    const FieldInput in{s.view, i, report, timestamp};
    for (size_t c = 0; c < chosen.size(); ++c) {
      const std::optional<std::string> v = chosen[c]->value(in);
      out += c ? ", " : "";
      if (!v) out += "[N/A]";
      else out += *v + (!nounits && !chosen[c]->unit.empty() ? " " + chosen[c]->unit : "");
    }
    out += "\n";
  }
  return out;
}

}  // namespace vgpu::smi
