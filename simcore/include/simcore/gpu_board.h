// What the management interface (NVML, nvidia-smi) of a real board of each catalog model reports
// beyond what CUDA sees: NVML's memory figures, the clock table, power and temperature limits,
// the BAR1 aperture, firmware strings. The virtual NVML and vgpu-smi answer from here, so both
// agree and a model added to the catalog gets one row here.
#pragma once

#include <cstdint>
#include <string>

#include "simcore/cluster_spec.h"

namespace simcore {

struct GpuBoard {
  // NVML's framebuffer: total (larger than cuDeviceTotalMem, which leaves out what the driver
  // keeps below CUDA) and the part it reports as reserved by the driver/firmware.
  uint64_t nvml_memory_total = 0;
  uint64_t nvml_memory_reserved = 0;
  uint64_t bar1_total = 0;
  // Clocks, MHz. max_*: the highest the board runs; idle_*: at rest; app_*: default application
  // clocks. Memory runs at one clock on HBM parts.
  unsigned max_sm_clock = 0, max_mem_clock = 0, max_video_clock = 0;
  unsigned idle_sm_clock = 0, idle_video_clock = 0;
  unsigned app_sm_clock = 0, app_mem_clock = 0;
  // Power, watts: the enforced/default limit, the range an administrator may set, the draw at
  // rest (the draw under load follows utilization up to the limit).
  double power_limit = 0, min_power_limit = 0, max_power_limit = 0, idle_power = 0;
  // Temperatures, degrees C: at rest and at full load (the reading follows utilization), and
  // the board's thresholds.
  unsigned idle_temp = 0, load_temp = 0, memory_idle_temp = 0;
  unsigned shutdown_temp = 0, slowdown_temp = 0, max_operating_temp = 0, memory_max_temp = 0;
  int pcie_max_gen = 0, pcie_max_width = 0;
  std::string vbios, board_part_number, gpu_part_number, inforom_image, architecture;
  int architecture_id = 0;      // nvmlDeviceArchitecture_t: 7 Ampere, 9 Hopper, 10 Blackwell
};

// The board facts of `model` (matched by catalog id; a model without a row gets figures derived
// from its catalog entry, marked as such in the row comments of gpu_board.cpp).
const GpuBoard& gpu_board(const GpuModel& model);

// Power draw and temperature that follow the load: `utilization` in 0..1.
double board_power_draw(const GpuBoard& board, double utilization);
unsigned board_temperature(const GpuBoard& board, double utilization);

}  // namespace simcore
