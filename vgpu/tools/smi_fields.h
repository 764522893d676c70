// Every --query-gpu field of nvidia-smi 580 (`nvidia-smi --help-query-gpu`), with its aliases,
// its unit and how vgpu answers it: from the device report (nvml/device_report.h: catalog, board,
// simulation) where a real value exists, "[N/A]" where none can. A known field never fails a
// query. vgpu's own fields (vgpu.*) follow.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nvml/device_report.h"
#include "nvml/job_view.h"

namespace vgpu::smi {

struct FieldInput {
  const inspect::JobView& view;
  int device;                          // index into view.devices
  const inspect::DeviceReport& report;
  const std::string& timestamp;        // one per query, as nvidia-smi's "2026/11/25 21:03:04.123"
};

struct QueryField {
  std::string name;
  std::vector<std::string> aliases;
  std::string unit;  // "" or e.g. "MiB": in the header " [MiB]", after each value unless nounits
  // nullopt: "[N/A]" (no unit).
  std::optional<std::string> (*value)(const FieldInput&);
};

const std::vector<QueryField>& gpu_query_fields();
// By name or alias; nullptr when unknown.
const QueryField* find_gpu_field(std::string_view name);

// nvidia-smi's timestamp format, local time: "2026/11/25 21:03:04.123".
std::string query_timestamp();

}  // namespace vgpu::smi
