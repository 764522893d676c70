#include "tools/smi_fields.h"

#include <cuda.h>
#include <sys/time.h>

#include <ctime>
#include <fmt/format.h>

#include "tools/smi_render.h"

namespace vgpu::smi {
namespace {

using R = std::optional<std::string>;
using In = FieldInput;

R na(const In&) { return std::nullopt; }
R text(const char* s) { return std::string(s); }
R num(unsigned long long v) { return std::to_string(v); }
R watts(double w) { return fmt::format("{:.2f}", w); }
R hex(unsigned long long v, int digits) { return fmt::format("0x{:0{}X}", v, digits); }
R active(bool on) { return text(on ? "Active" : "Not Active"); }

const inspect::DeviceFacts& facts(const In& in) { return in.view.devices[in.device]; }
const inspect::DeviceActivity& act(const In& in) { return in.view.activity[in.device]; }
int attribute(const In& in, int a) {
  const auto* m = facts(in).model;
  if (m == nullptr) return 0;
  auto it = m->attributes.find(a);
  return it == m->attributes.end() ? 0 : it->second;
}
constexpr int kPciDeviceIdAttr = CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID;
constexpr int kPciSubsystemIdAttr = CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID;

R event(const In& in, unsigned long long bit) { return active((in.report.clock_event_reasons & bit) != 0); }
R zero(const In&) { return text("0"); }

// Field groups that nvidia-smi lists once per memory location and error kind.
void add_ecc_fields(std::vector<QueryField>& f) {
  for (const char* kind : {"corrected", "uncorrected"})
    for (const char* when : {"volatile", "aggregate"})
      for (const char* where : {"device_memory", "dram", "register_file", "l1_cache", "l2_cache",
                                "texture_memory", "cbu", "sram", "total"})
        f.push_back({fmt::format("ecc.errors.{}.{}.{}", kind, when, where), {}, "",
                     std::string_view(where) == "device_memory" || std::string_view(where) == "dram" ||
                             std::string_view(where) == "sram" || std::string_view(where) == "total"
                         ? zero
                         : na});
  // Hopper's SRAM error breakdown (uncorrected only).
  for (const char* where : {"volatile.sram.parity", "volatile.sram.secded", "aggregate.sram.parity",
                            "aggregate.sram.secded", "aggregate.sram.thresholdExceeded", "aggregate.sram.l2",
                            "aggregate.sram.sm", "aggregate.sram.mcu", "aggregate.sram.pcie", "aggregate.sram.other"})
    f.push_back({fmt::format("ecc.errors.uncorrected.{}", where), {}, "",
                 std::string_view(where) == "aggregate.sram.thresholdExceeded" ? +[](const In&) -> R { return text("No"); }
                                                                                : zero});
}

std::vector<QueryField> build() {
  std::vector<QueryField> f = {
      {"timestamp", {}, "", [](const In& in) -> R { return in.timestamp; }},
      {"driver_version", {}, "", [](const In&) -> R { return text(inspect::kDriverVersion); }},
      {"vgpu_driver_capability.heterogenous_multivGPU", {}, "", na},
      {"count", {}, "", [](const In& in) -> R { return num(in.view.devices.size()); }},
      {"name", {"gpu_name"}, "", [](const In& in) -> R { return facts(in).name; }},
      {"serial", {"gpu_serial"}, "", [](const In& in) -> R { return in.report.serial; }},
      {"uuid", {"gpu_uuid"}, "", [](const In& in) -> R { return facts(in).uuid; }},
      {"pci.bus_id", {"gpu_bus_id"}, "", [](const In& in) -> R { return facts(in).pci_bus_id; }},
      {"pci.domain", {}, "", [](const In& in) -> R { return hex(facts(in).pci_domain, 4); }},
      {"pci.bus", {}, "", [](const In& in) -> R { return hex(facts(in).pci_bus, 2); }},
      {"pci.device", {}, "", [](const In& in) -> R { return hex(facts(in).pci_device, 2); }},
      {"pci.baseClass", {}, "", [](const In&) -> R { return text("0x3"); }},   // display controller
      {"pci.subClass", {}, "", [](const In&) -> R { return text("0x2"); }},    // 3D controller
      {"pci.device_id", {}, "", [](const In& in) -> R { return hex(static_cast<unsigned>(attribute(in, kPciDeviceIdAttr)), 8); }},
      {"pci.sub_device_id", {}, "", [](const In& in) -> R { return hex(static_cast<unsigned>(attribute(in, kPciSubsystemIdAttr)), 8); }},
      {"vgpu_device_capability.fractional_multiVgpu", {}, "", na},
      {"vgpu_device_capability.heterogeneous_timeSlice_profile", {}, "", na},
      {"vgpu_device_capability.heterogeneous_timeSlice_sizes", {}, "", na},
      {"vgpu_device_capability.homogeneous_placements", {}, "", na},
      {"vgpu_device_capability.mig_timeSlicing", {}, "", na},
      {"vgpu_device_capability.mig_timeSlicing_mode", {}, "", na},
      {"pcie.link.gen.current", {}, "", [](const In& in) -> R { return num(in.report.pcie_gen); }},
      {"pcie.link.gen.gpucurrent", {}, "", [](const In& in) -> R { return num(in.report.pcie_gen); }},
      {"pcie.link.gen.max", {}, "", [](const In& in) -> R { return num(in.report.pcie_gen_max); }},
      {"pcie.link.gen.gpumax", {}, "", [](const In& in) -> R { return num(in.report.pcie_gen_max); }},
      {"pcie.link.gen.hostmax", {}, "", na},  // a virtual machine's host bridge does not say
      {"pcie.link.width.current", {}, "", [](const In& in) -> R { return num(in.report.pcie_width); }},
      {"pcie.link.width.max", {}, "", [](const In& in) -> R { return num(in.report.pcie_width_max); }},
      {"index", {}, "", [](const In& in) -> R { return num(static_cast<unsigned>(facts(in).index)); }},
      // As the 580 driver answers on an H100 (tests/data/nvidia_smi_h100_580).
      {"display_mode", {}, "", [](const In&) -> R { return text("[Requested functionality has been deprecated]"); }},
      {"display_attached", {}, "", [](const In&) -> R { return text("Yes"); }},
      {"display_active", {}, "", [](const In&) -> R { return text("Disabled"); }},
      {"persistence_mode", {}, "", [](const In&) -> R { return text("Enabled"); }},
      {"addressing_mode", {}, "", [](const In&) -> R { return text("None"); }},
      {"accounting.mode", {}, "", [](const In&) -> R { return text("Disabled"); }},
      {"accounting.buffer_size", {}, "", [](const In&) -> R { return text("4000"); }},
      {"driver_model.current", {}, "", na},
      {"driver_model.pending", {}, "", na},
      {"vbios_version", {}, "", [](const In& in) -> R { return in.report.board->vbios; }},
      {"inforom.img", {"inforom.image"}, "", [](const In& in) -> R { return in.report.board->inforom_image; }},
      {"inforom.oem", {}, "", [](const In&) -> R { return text("2.1"); }},
      {"inforom.ecc", {}, "", [](const In&) -> R { return text("7.16"); }},
      {"inforom.pwr", {"inforom.power"}, "", na},
      {"inforom.checksum_validation", {}, "", [](const In&) -> R { return text("valid"); }},
      {"gpu_recovery_action", {}, "", [](const In&) -> R { return text("None"); }},
      {"gom.current", {"gpu_operation_mode.current"}, "", na},
      {"gom.pending", {"gpu_operation_mode.pending"}, "", na},
      {"fan.speed", {}, "%", na},
      {"pstate", {}, "", [](const In& in) -> R { return fmt::format("P{}", in.report.pstate); }},
      {"clocks_event_reasons.supported", {"clocks_throttle_reasons.supported"}, "",
       [](const In&) -> R { return hex(inspect::kClockEventsSupported, 16); }},
      {"clocks_event_reasons.active", {"clocks_throttle_reasons.active"}, "",
       [](const In& in) -> R { return hex(in.report.clock_event_reasons, 16); }},
      {"clocks_event_reasons.gpu_idle", {"clocks_throttle_reasons.gpu_idle"}, "", [](const In& in) { return event(in, 0x1); }},
      {"clocks_event_reasons.applications_clocks_setting", {"clocks_throttle_reasons.applications_clocks_setting"}, "", [](const In& in) { return event(in, 0x2); }},
      {"clocks_event_reasons.sw_power_cap", {"clocks_throttle_reasons.sw_power_cap"}, "", [](const In& in) { return event(in, 0x4); }},
      {"clocks_event_reasons.hw_slowdown", {"clocks_throttle_reasons.hw_slowdown"}, "", [](const In& in) { return event(in, 0x8); }},
      {"clocks_event_reasons.hw_thermal_slowdown", {"clocks_throttle_reasons.hw_thermal_slowdown"}, "", [](const In& in) { return event(in, 0x40); }},
      {"clocks_event_reasons.hw_power_brake_slowdown", {"clocks_throttle_reasons.hw_power_brake_slowdown"}, "", [](const In& in) { return event(in, 0x80); }},
      {"clocks_event_reasons.sw_thermal_slowdown", {"clocks_throttle_reasons.sw_thermal_slowdown"}, "", [](const In& in) { return event(in, 0x20); }},
      {"clocks_event_reasons.sync_boost", {"clocks_throttle_reasons.sync_boost"}, "", [](const In& in) { return event(in, 0x10); }},
      {"clocks_event_reasons_counters.sw_power_cap", {}, "us", zero},
      {"clocks_event_reasons_counters.sync_boost", {}, "us", zero},
      {"clocks_event_reasons_counters.sw_thermal_slowdown", {}, "us", zero},
      {"clocks_event_reasons_counters.hw_thermal_slowdown", {}, "us", zero},
      {"clocks_event_reasons_counters.hw_power_brake_slowdown", {}, "us", zero},
      {"memory.total", {}, "MiB", [](const In& in) -> R { return num(mib(in.report.memory_total)); }},
      {"memory.reserved", {}, "MiB", [](const In& in) -> R { return num(mib(in.report.memory_reserved)); }},
      {"memory.used", {}, "MiB", [](const In& in) -> R { return num(mib(in.report.memory_used)); }},
      // Free as total - reserved - used in whole MiB, so that the columns add up as nvidia-smi's do.
      {"memory.free", {}, "MiB", [](const In& in) -> R {
         return num(mib(in.report.memory_total) - mib(in.report.memory_reserved) - mib(in.report.memory_used));
       }},
      {"compute_mode", {}, "", [](const In&) -> R { return text("Default"); }},
      {"compute_cap", {}, "", [](const In& in) -> R {
         const auto* m = facts(in).model;
         return m ? R(fmt::format("{}.{}", m->cc_major, m->cc_minor)) : std::nullopt;
       }},
      {"utilization.gpu", {}, "%", [](const In& in) -> R { return num(in.report.util_gpu); }},
      {"utilization.memory", {}, "%", [](const In& in) -> R { return num(in.report.util_memory); }},
      {"utilization.encoder", {}, "%", zero},
      {"utilization.decoder", {}, "%", zero},
      {"utilization.jpeg", {}, "%", zero},
      {"utilization.ofa", {}, "%", zero},
      {"encoder.stats.sessionCount", {}, "", zero},
      {"encoder.stats.averageFps", {}, "", zero},
      {"encoder.stats.averageLatency", {}, "", zero},
      {"ecc.mode.current", {}, "", [](const In&) -> R { return text("Enabled"); }},
      {"ecc.mode.pending", {}, "", [](const In&) -> R { return text("Enabled"); }},
      {"dramEncryption.mode.current", {}, "", na},
      {"dramEncryption.mode.pending", {}, "", na},
  };
  add_ecc_fields(f);
  const std::vector<QueryField> rest = {
      {"retired_pages.single_bit_ecc.count", {"retired_pages.sbe"}, "", na},
      {"retired_pages.double_bit.count", {"retired_pages.dbe"}, "", na},
      {"retired_pages.pending", {}, "", na},
      {"remapped_rows.correctable", {"remapped_rows.sbe"}, "", zero},
      {"remapped_rows.correctable_inactive", {}, "", zero},
      {"remapped_rows.uncorrectable", {"remapped_rows.dbe"}, "", zero},
      {"remapped_rows.uncorrectable_inactive", {}, "", zero},
      {"remapped_rows.pending", {}, "", [](const In&) -> R { return text("No"); }},
      {"remapped_rows.failure", {}, "", [](const In&) -> R { return text("No"); }},
      {"remapped_rows.histogram.max", {}, "", [](const In&) -> R { return text("2560"); }},
      {"remapped_rows.histogram.high", {}, "", zero},
      {"remapped_rows.histogram.partial", {}, "", zero},
      {"remapped_rows.histogram.low", {}, "", zero},
      {"remapped_rows.histogram.none", {}, "", zero},
      {"temperature.gpu", {}, "", [](const In& in) -> R { return num(in.report.temp_gpu); }},
      {"temperature.gpu.tlimit", {}, "", [](const In& in) -> R {
         return num(in.report.temp_max_operating - std::min(in.report.temp_max_operating, in.report.temp_gpu));
       }},
      {"temperature.memory", {}, "", [](const In& in) -> R { return num(in.report.temp_memory); }},
      {"power.management", {}, "", [](const In&) -> R { return text("Enabled"); }},
      {"power.draw", {}, "W", [](const In& in) { return watts(in.report.power_draw); }},
      {"power.draw.average", {"gpu.power.draw.average"}, "W", [](const In& in) { return watts(in.report.power_draw); }},
      {"power.draw.instant", {"gpu.power.draw.instant"}, "W", [](const In& in) { return watts(in.report.power_draw); }},
      {"power.limit", {"gpu.power.requested_limit"}, "W", [](const In& in) { return watts(in.report.power_limit); }},
      {"enforced.power.limit", {"gpu.power.current_limit"}, "W", [](const In& in) { return watts(in.report.power_limit); }},
      {"power.default_limit", {"gpu.power.default_limit"}, "W", [](const In& in) { return watts(in.report.power_limit); }},
      {"power.min_limit", {"gpu.power.min_limit"}, "W", [](const In& in) { return watts(in.report.min_power_limit); }},
      {"power.max_limit", {"gpu.power.max_limit"}, "W", [](const In& in) { return watts(in.report.max_power_limit); }},
      {"module.power.draw.average", {}, "W", na},
      {"module.power.draw.instant", {}, "W", na},
      {"module.power.limit", {"module.power.requested_limit"}, "W", na},
      {"module.enforced.power.limit", {"module.power.current_limit"}, "W", na},
      {"module.power.default_limit", {}, "W", na},
      {"module.power.min_limit", {}, "W", na},
      {"module.power.max_limit", {}, "W", na},
      {"power_smoothing.delayed_power_smoothing_supported", {}, "", na},
      {"power_smoothing.primary_power_floor", {}, "W", na},
      {"power_smoothing.secondary_power_floor", {}, "W", na},
      {"power_smoothing.min_primary_floor_activation_offset", {}, "W", na},
      {"power_smoothing.min_primary_floor_activation_point", {}, "W", na},
      {"power_smoothing.window_multiplier", {}, "ms", na},
      {"power_smoothing.curr_profile.secondary_power_floor", {}, "W", na},
      {"power_smoothing.curr_profile.primary_floor_act_window_multiplier", {}, "", na},
      {"power_smoothing.curr_profile.primary_floor_tar_window_multiplier", {}, "", na},
      {"power_smoothing.curr_profile.primary_floor_act_offset", {}, "W", na},
      {"power_smoothing.admin_override.secondary_power_floor", {}, "W", na},
      {"power_smoothing.admin_override.primary_floor_act_window_multiplier", {}, "", na},
      {"power_smoothing.admin_override.primary_floor_tar_window_multiplier", {}, "", na},
      {"power_smoothing.admin_override.primary_floor_act_offset", {}, "W", na},
      {"clocks.current.graphics", {"clocks.gr"}, "MHz", [](const In& in) -> R { return num(in.report.clock_graphics); }},
      {"clocks.current.sm", {"clocks.sm"}, "MHz", [](const In& in) -> R { return num(in.report.clock_sm); }},
      {"clocks.current.memory", {"clocks.mem"}, "MHz", [](const In& in) -> R { return num(in.report.clock_memory); }},
      {"clocks.current.video", {"clocks.video"}, "MHz", [](const In& in) -> R { return num(in.report.clock_video); }},
      {"clocks.applications.graphics", {"clocks.applications.gr"}, "MHz", [](const In& in) -> R { return num(in.report.app_graphics); }},
      {"clocks.applications.memory", {"clocks.applications.mem"}, "MHz", [](const In& in) -> R { return num(in.report.app_memory); }},
      {"clocks.default_applications.graphics", {"clocks.default_applications.gr"}, "MHz", [](const In& in) -> R { return num(in.report.app_graphics); }},
      {"clocks.default_applications.memory", {"clocks.default_applications.mem"}, "MHz", [](const In& in) -> R { return num(in.report.app_memory); }},
      {"clocks.max.graphics", {"clocks.max.gr"}, "MHz", [](const In& in) -> R { return num(in.report.max_graphics); }},
      {"clocks.max.sm", {}, "MHz", [](const In& in) -> R { return num(in.report.max_sm); }},
      {"clocks.max.memory", {"clocks.max.mem"}, "MHz", [](const In& in) -> R { return num(in.report.max_memory); }},
      {"mig.mode.current", {}, "", [](const In&) -> R { return text("Disabled"); }},
      {"mig.mode.pending", {}, "", [](const In&) -> R { return text("Disabled"); }},
      {"gsp.mode.current", {}, "", [](const In&) -> R { return text("Enabled"); }},
      {"gsp.mode.default", {}, "", [](const In&) -> R { return text("Enabled"); }},
      {"c2c.mode", {}, "", [](const In&) -> R { return text("Disabled"); }},
      {"protected_memory.total", {}, "MiB", [](const In&) -> R { return text("0"); }},
      {"protected_memory.used", {}, "MiB", [](const In&) -> R { return text("0"); }},
      {"protected_memory.free", {}, "MiB", [](const In&) -> R { return text("0"); }},
      // An HGX board's GPUs register with the NVSwitch fabric (fabric manager); its health is
      // "N/A" (not bracketed) on Hopper.
      {"fabric.state", {}, "", [](const In&) -> R { return text("Completed"); }},
      {"fabric.status", {}, "", [](const In&) -> R { return text("Success"); }},
      {"fabric.cliqueId", {}, "", na},
      {"fabric.clusterUuid", {}, "", na},
      {"fabric.health.summary", {}, "", [](const In&) -> R { return text("N/A"); }},
      {"fabric.health.bandwidth", {}, "", [](const In&) -> R { return text("N/A"); }},
      {"fabric.health.route_recovery_in_progress", {}, "", [](const In&) -> R { return text("N/A"); }},
      {"fabric.health.route_unhealthy", {}, "", [](const In&) -> R { return text("N/A"); }},
      {"fabric.health.access_timeout_recovery", {}, "", [](const In&) -> R { return text("N/A"); }},
      {"fabric.health.incorrect_configuration", {}, "", [](const In&) -> R { return text("N/A"); }},
      {"fabric.health.partition_assigned", {}, "", [](const In&) -> R { return text("N/A"); }},
      {"platform.chassis_serial_number", {}, "", [](const In&) -> R { return text(""); }},
      {"platform.slot_number", {}, "", zero},
      {"platform.tray_index", {}, "", zero},
      {"platform.host_id", {}, "", [](const In& in) -> R { return num(static_cast<unsigned>(facts(in).node + 1)); }},
      {"platform.peer_type", {}, "", [](const In&) -> R { return text("Direct Connected"); }},
      {"platform.module_id", {}, "", [](const In& in) -> R { return num(static_cast<unsigned>(facts(in).local + 1)); }},
      {"platform.gpu_fabric_guid", {}, "", [](const In&) -> R { return hex(0, 16); }},
      {"hostname", {}, "", na},
      // vgpu's own: the simulation behind the figures above.
      {"vgpu.clock", {}, "s", [](const In& in) -> R { return fmt::format("{:.6f}", act(in).clock_s); }},
      {"vgpu.busy", {}, "s", [](const In& in) -> R { return fmt::format("{:.6f}", act(in).busy_s); }},
      {"vgpu.kernels", {}, "", [](const In& in) -> R { return num(act(in).kernels); }},
      {"vgpu.utilization", {}, "%", [](const In& in) -> R { return num(static_cast<unsigned>(act(in).utilization * 100 + 0.5)); }},
      {"vgpu.memory.physical", {}, "MiB", [](const In& in) -> R { return num(mib(act(in).physical)); }},
      {"vgpu.memory.capacity", {}, "MiB", [](const In& in) -> R { return num(mib(facts(in).capacity)); }},
  };
  f.insert(f.end(), rest.begin(), rest.end());
  return f;
}

}  // namespace

const std::vector<QueryField>& gpu_query_fields() {
  static const std::vector<QueryField> fields = build();
  return fields;
}

const QueryField* find_gpu_field(std::string_view name) {
  for (const QueryField& f : gpu_query_fields()) {
    if (f.name == name) return &f;
    for (const std::string& a : f.aliases)
      if (a == name) return &f;
  }
  return nullptr;
}

std::string query_timestamp() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  std::tm tm{};
  const std::time_t t = tv.tv_sec;
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y/%m/%d %H:%M:%S", &tm);
  return fmt::format("{}.{:03d}", buf, static_cast<int>(tv.tv_usec / 1000));
}

}  // namespace vgpu::smi
