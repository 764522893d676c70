// What vgpu-smi prints, from a JobView: nvidia-smi's table, -L, --query-gpu CSV, and the vgpu
// section (job, backend, policies, virtual clock, memory used and physical memory per device).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nvml/job_view.h"

namespace vgpu::smi {

struct Shown {
  const inspect::JobView& view;
  std::vector<int> devices;   // indices into view.devices, in order
  std::string note;           // a line for the user (e.g. "2 jobs running: ..."), may be empty
};

// Memory as nvidia-smi prints it: whole MiB, rounded down.
inline unsigned long long mib(unsigned long long bytes) { return bytes >> 20; }

std::string render_table(const Shown& s, bool with_vgpu_section);
std::string render_list(const Shown& s);
std::string render_vgpu(const Shown& s);
// nullopt + error for an unknown field.
std::optional<std::string> render_query(const Shown& s, const std::vector<std::string>& fields,
                                        bool noheader, bool nounits, std::string* error);

// -q: nvidia-smi's full report (smi_report.cpp).
std::string render_full_report(const Shown& s);
// topo -m, nvlink -s, dmon (a header, then one row per device per sample) and
// --query-compute-apps (smi_views.cpp).
std::string render_topology(const Shown& s);
std::string render_nvlink_status(const Shown& s);
std::string render_dmon_header();
std::string render_dmon_rows(const Shown& s);
std::optional<std::string> render_compute_apps(const Shown& s, const std::vector<std::string>& fields,
                                               bool noheader, bool nounits, std::string* error);
// nvidia-smi's timestamp format (smi_fields.cpp).
std::string query_timestamp();

}  // namespace vgpu::smi
