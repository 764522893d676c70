#include "nvml/device_report.h"

#include <algorithm>
#include <cstdio>

#include "simcore/gpu_catalog.h"

namespace vgpu::inspect {
namespace {

const simcore::GpuModel& model_of(const DeviceFacts& f) {
  static const simcore::GpuModel* fallback = simcore::find_gpu_model("H100-SXM-80GB");
  return f.model != nullptr ? *f.model : *fallback;
}

// A board serial number as NVIDIA prints them (13 digits), stable for a device: derived from
// its UUID, so every process and tool of a job agrees.
std::string serial_of(const DeviceFacts& f) {
  uint64_t h = 1469598103934665603ull;
  for (char c : f.uuid) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  char buf[32];
  std::snprintf(buf, sizeof buf, "1654%09llu", static_cast<unsigned long long>(h % 1000000000ull));
  return buf;
}

}  // namespace

DeviceReport device_report(const DeviceFacts& f, const DeviceActivity& a) {
  const simcore::GpuModel& m = model_of(f);
  const simcore::GpuBoard& b = simcore::gpu_board(m);
  DeviceReport r;
  r.board = &b;
  // NVML's total is the board's framebuffer; a capacity configured below the model's (a smaller
  // virtual GPU) shrinks it by as much.
  const uint64_t shrink = m.memory_bytes > f.capacity ? m.memory_bytes - f.capacity : 0;
  r.memory_total = b.nvml_memory_total - std::min(shrink, b.nvml_memory_total);
  r.memory_reserved = std::min(b.nvml_memory_reserved, r.memory_total);
  r.memory_used = std::min(a.used, r.memory_total - r.memory_reserved);
  r.memory_free = r.memory_total - r.memory_reserved - r.memory_used;
  r.bar1_total = b.bar1_total;
  r.bar1_used = a.used > 0 ? (2ull << 20) : (1ull << 20);  // the driver's own mappings
  r.util_gpu = static_cast<unsigned>(a.util_gpu * 100 + 0.5);
  r.util_memory = static_cast<unsigned>(a.util_memory * 100 + 0.5);
  const bool busy = a.util_gpu > 0 || a.util_memory > 0;
  r.clock_sm = a.sm_clock_mhz != 0 ? a.sm_clock_mhz : b.idle_sm_clock;
  r.clock_graphics = r.clock_sm;
  r.clock_memory = b.max_mem_clock;  // HBM runs at one clock
  r.clock_video = busy ? b.max_video_clock : b.idle_video_clock;
  r.max_graphics = r.max_sm = b.max_sm_clock;
  r.max_memory = b.max_mem_clock;
  r.max_video = b.max_video_clock;
  r.app_graphics = b.app_sm_clock;
  r.app_memory = b.app_mem_clock;
  r.power_draw = simcore::board_power_draw(b, a.util_gpu);
  r.power_limit = b.power_limit;
  r.min_power_limit = b.min_power_limit;
  r.max_power_limit = b.max_power_limit;
  const double extra = simcore::board_power_draw(b, 1.0) - b.idle_power;
  r.energy_mj = static_cast<uint64_t>((b.idle_power * a.clock_s + extra * a.busy_s) * 1000.0);
  r.temp_gpu = simcore::board_temperature(b, a.util_gpu);
  r.temp_memory = b.memory_idle_temp + (r.temp_gpu - std::min(r.temp_gpu, b.idle_temp));
  r.temp_shutdown = b.shutdown_temp;
  r.temp_slowdown = b.slowdown_temp;
  r.temp_max_operating = b.max_operating_temp;
  r.temp_memory_max = b.memory_max_temp;
  r.pstate = 0;
  r.clock_event_reasons = busy ? 0 : kClockEventGpuIdle;
  r.pcie_gen = r.pcie_gen_max = static_cast<unsigned>(b.pcie_max_gen);
  r.pcie_width = r.pcie_width_max = static_cast<unsigned>(b.pcie_max_width);
  r.serial = serial_of(f);
  return r;
}

}  // namespace vgpu::inspect
