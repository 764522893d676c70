// Everything the management interface reports about one virtual device at one moment, computed
// in one place from the device's facts (catalog, board), its activity (status region) and the
// job: NVML's answers and every vgpu-smi view (--query-gpu, -q, dmon) read it, so they agree.
//
// What follows the simulation: utilization (over the status region's window of virtual time),
// the SM/graphics clock (boost while the window saw work, idle otherwise), power draw and
// temperature (between the board's idle and loaded figures, by utilization), the energy counter
// (idle power over the virtual clock plus the extra draw over the busy time), memory in use.
// The rest is the board's fixed figures (simcore/gpu_board.h). ECC is enabled with no errors.
#pragma once

#include <cstdint>
#include <string>

#include "nvml/job_view.h"
#include "simcore/gpu_board.h"

namespace vgpu::inspect {

struct DeviceReport {
  // Memory as NVML's v2 query reports it: total and reserved from the board, used what the
  // job's processes hold (contexts included), free the rest.
  uint64_t memory_total = 0, memory_reserved = 0, memory_used = 0, memory_free = 0;
  uint64_t bar1_total = 0, bar1_used = 0;
  unsigned util_gpu = 0, util_memory = 0;  // percent
  unsigned clock_graphics = 0, clock_sm = 0, clock_memory = 0, clock_video = 0;  // MHz
  unsigned max_graphics = 0, max_sm = 0, max_memory = 0, max_video = 0;
  unsigned app_graphics = 0, app_memory = 0;  // = the defaults (nobody can set them)
  double power_draw = 0, power_limit = 0, min_power_limit = 0, max_power_limit = 0;  // watts
  uint64_t energy_mj = 0;  // since the job started, millijoules
  unsigned temp_gpu = 0, temp_memory = 0;
  unsigned temp_shutdown = 0, temp_slowdown = 0, temp_max_operating = 0, temp_memory_max = 0;
  int pstate = 0;                           // P0: a datacenter part stays in P0
  unsigned long long clock_event_reasons = 0;  // nvmlClocksEventReasons bits active now
  unsigned pcie_gen = 0, pcie_gen_max = 0, pcie_width = 0, pcie_width_max = 0;
  std::string serial;                       // 13 digits, stable per device
  const simcore::GpuBoard* board = nullptr;
};

inline constexpr unsigned long long kClockEventGpuIdle = 0x1;
inline constexpr unsigned long long kClockEventsSupported = 0x1FF;

DeviceReport device_report(const DeviceFacts& facts, const DeviceActivity& activity);

}  // namespace vgpu::inspect
