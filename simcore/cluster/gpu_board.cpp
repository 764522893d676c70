// Board facts per catalog model (see gpu_board.h). Sources:
//  - H100-SXM-80GB: nvidia-smi -q of a real H100 80GB HBM3 (HGX, driver 580), kept in
//    tests/data/ (the tests compare against it).
//  - H200, A100, B200: NVIDIA data sheets (power, clocks) and the same layout as the H100 where
//    the data sheet is silent; marked "estimate" where no source gives the figure.
#include "simcore/gpu_board.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "cu_attribute_ids.h"

namespace simcore {
namespace {

constexpr uint64_t MiB = 1ull << 20;

GpuBoard h100() {
  GpuBoard b;
  b.nvml_memory_total = 81559 * MiB;
  b.nvml_memory_reserved = 480 * MiB;  // total - reserved = CUDA's total (81079 MiB)
  b.bar1_total = 131072 * MiB;
  b.max_sm_clock = 1980, b.max_mem_clock = 2619, b.max_video_clock = 1545;
  b.idle_sm_clock = 345, b.idle_video_clock = 765;
  b.app_sm_clock = 1980, b.app_mem_clock = 2619;
  b.power_limit = 700, b.min_power_limit = 200, b.max_power_limit = 700, b.idle_power = 71.66;
  b.idle_temp = 34, b.load_temp = 62, b.memory_idle_temp = 35;
  b.shutdown_temp = 92, b.slowdown_temp = 89, b.max_operating_temp = 87, b.memory_max_temp = 95;
  b.pcie_max_gen = 5, b.pcie_max_width = 16;
  b.vbios = "96.00.DA.00.0C";
  b.board_part_number = "695-2G520-0200-000";
  b.gpu_part_number = "2330-885-A1";
  b.inforom_image = "G520.0200.00.05";
  b.architecture = "Hopper", b.architecture_id = 9;
  return b;
}

GpuBoard h200() {
  GpuBoard b = h100();
  b.nvml_memory_total = 143771 * MiB;  // estimate: CUDA's total plus the H100's difference
  b.bar1_total = 262144 * MiB;          // estimate
  b.max_mem_clock = 3201, b.app_mem_clock = 3201;
  b.vbios = "96.00.A5.00.01";
  b.board_part_number = "692-2G520-0280-000";
  b.gpu_part_number = "2335-885-A1";
  return b;
}

GpuBoard a100() {
  GpuBoard b;
  b.nvml_memory_total = 81920 * MiB;
  b.nvml_memory_reserved = 0;
  b.bar1_total = 131072 * MiB;
  b.max_sm_clock = 1410, b.max_mem_clock = 1593, b.max_video_clock = 1290;
  b.idle_sm_clock = 210, b.idle_video_clock = 585;
  b.app_sm_clock = 1275, b.app_mem_clock = 1593;
  b.power_limit = 400, b.min_power_limit = 100, b.max_power_limit = 400, b.idle_power = 60;
  b.idle_temp = 30, b.load_temp = 60, b.memory_idle_temp = 36;
  b.shutdown_temp = 92, b.slowdown_temp = 89, b.max_operating_temp = 85, b.memory_max_temp = 95;
  b.pcie_max_gen = 4, b.pcie_max_width = 16;
  b.vbios = "92.00.36.00.10";
  b.board_part_number = "692-2G506-0210-002";
  b.gpu_part_number = "20B2-895-A1";
  b.inforom_image = "G506.0210.00.04";
  b.architecture = "Ampere", b.architecture_id = 7;
  return b;
}

GpuBoard b200() {
  GpuBoard b = h100();
  b.nvml_memory_total = 183359 * MiB;  // estimate: CUDA's total plus the H100's difference
  b.bar1_total = 262144 * MiB;          // estimate
  b.max_sm_clock = 1965, b.app_sm_clock = 1965, b.idle_sm_clock = 345;
  b.max_mem_clock = 3996, b.app_mem_clock = 3996;
  b.power_limit = 1000, b.min_power_limit = 200, b.max_power_limit = 1000, b.idle_power = 140;
  b.vbios = "97.00.4B.00.01";
  b.board_part_number = "692-2G525-0200-000";
  b.gpu_part_number = "2901-886-A1";
  b.architecture = "Blackwell", b.architecture_id = 10;
  return b;
}

// A model the table does not know: the H100's layout scaled to its catalog entry.
GpuBoard derived(const GpuModel& m) {
  GpuBoard b = h100();
  const uint64_t difference = h100().nvml_memory_total - 85'017'493'504ull;
  b.nvml_memory_total = (m.memory_bytes + difference) / MiB * MiB;
  if (auto it = m.attributes.find(cu_attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE); it != m.attributes.end())
    b.max_sm_clock = b.app_sm_clock = static_cast<unsigned>(it->second / 1000);
  if (m.tdp_watts > 0) b.power_limit = b.max_power_limit = m.tdp_watts;
  b.pcie_max_gen = m.pcie_gen, b.pcie_max_width = m.pcie_width;
  b.architecture = m.cc_major >= 10 ? "Blackwell" : m.cc_major == 9 ? "Hopper" : "Ampere";
  b.architecture_id = m.cc_major >= 10 ? 10 : m.cc_major == 9 ? 9 : 7;
  return b;
}

}  // namespace

const GpuBoard& gpu_board(const GpuModel& model) {
  static const GpuBoard kH100 = h100(), kH200 = h200(), kA100 = a100(), kB200 = b200();
  if (model.id == "H100-SXM-80GB") return kH100;
  if (model.id == "H200-141GB") return kH200;
  if (model.id == "A100-SXM-80GB") return kA100;
  if (model.id == "B200") return kB200;
  // Models from a config file's own catalog entry: built once per id.
  static std::mutex mu;
  static std::vector<std::pair<std::string, std::unique_ptr<GpuBoard>>> others;
  std::lock_guard lock(mu);
  for (auto& [id, board] : others)
    if (id == model.id) return *board;
  others.emplace_back(model.id, std::make_unique<GpuBoard>(derived(model)));
  return *others.back().second;
}

double board_power_draw(const GpuBoard& b, double utilization) {
  const double u = std::clamp(utilization, 0.0, 1.0);
  // A busy H100 running dense GEMMs draws close to its limit; a mostly idle one, its idle draw.
  return b.idle_power + (b.power_limit * 0.9 - b.idle_power) * u;
}

unsigned board_temperature(const GpuBoard& b, double utilization) {
  const double u = std::clamp(utilization, 0.0, 1.0);
  return static_cast<unsigned>(std::lround(b.idle_temp + (double(b.load_temp) - b.idle_temp) * u));
}

}  // namespace simcore
