// vgpu-smi -q: nvidia-smi's full report, line for line as nvidia-smi 580 prints it for an H100
// (tests/data/nvidia_smi_h100_580/smi_q.txt), each value from the device report (catalog, board,
// simulation) or, where the real report prints a fixed answer for the model, that answer.
#include <cuda.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "nvml/device_report.h"
#include "tools/smi_render.h"

namespace vgpu::smi {
namespace {

constexpr size_t kLabelWidth = 55;  // the column of the colon

void section(std::string& out, int indent, const char* label) {
  out += std::string(4 * indent, ' ') + label + "\n";
}
void kv(std::string& out, int indent, const char* label, const std::string& value) {
  std::string line = std::string(4 * indent, ' ') + label;
  if (line.size() < kLabelWidth) line.resize(kLabelWidth, ' ');
  out += line + ": " + value + "\n";
}

std::string mib_text(uint64_t bytes) { return fmt::format("{} MiB", mib(bytes)); }
std::string mhz(unsigned v) { return fmt::format("{} MHz", v); }
std::string watts(double w) { return fmt::format("{:.2f} W", w); }
std::string active(bool on) { return on ? "Active" : "Not Active"; }

int attribute(const inspect::DeviceFacts& f, int a) {
  if (f.model == nullptr) return 0;
  auto it = f.model->attributes.find(a);
  return it == f.model->attributes.end() ? 0 : it->second;
}
unsigned device_id(const inspect::DeviceFacts& f) { return static_cast<unsigned>(attribute(f, CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID)); }
unsigned subsystem_id(const inspect::DeviceFacts& f) {
  return static_cast<unsigned>(attribute(f, CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID));
}
unsigned board_id(const inspect::DeviceFacts& f) { return (f.pci_domain << 16) | (f.pci_bus << 8); }
// The GPU's persistent identifier: a 64-bit value stable per device (from its UUID).
std::string pdi(const inspect::DeviceFacts& f) {
  uint64_t h = 14695981039346656037ull;
  for (char c : f.uuid) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return fmt::format("0x{:016x}", h);
}
// The HBM's share of the board's draw: the real idle figure, rising with memory traffic.
double memory_power(const inspect::DeviceReport& r) { return 35.42 + 60.0 * r.util_memory / 100.0; }

void processes(std::string& out, const Shown& s, int device) {
  bool any = false;
  for (const status::ProcessSnapshot& p : s.view.processes) {
    if (static_cast<size_t>(device) >= p.memory.size() || p.memory[device] == 0) continue;
    if (!any) section(out, 1, "Processes");
    any = true;
    kv(out, 2, "GPU instance ID", "N/A");
    kv(out, 2, "Compute instance ID", "N/A");
    kv(out, 2, "Process ID", std::to_string(p.pid));
    kv(out, 3, "Type", "C");
    kv(out, 3, "Name", p.name);
    kv(out, 3, "Used GPU Memory", mib_text(p.memory[device]));
  }
  if (!any) kv(out, 1, "Processes", "None");
}

void device_block(std::string& out, const Shown& s, int i) {
  const inspect::DeviceFacts& f = s.view.devices[i];
  const inspect::DeviceReport r = inspect::device_report(f, s.view.activity[i]);
  const simcore::GpuBoard& b = *r.board;
  out += "GPU " + f.pci_bus_id + "\n";
    kv(out, 1, "Product Name", f.name);
    kv(out, 1, "Product Brand", "NVIDIA");
    kv(out, 1, "Product Architecture", b.architecture);
    kv(out, 1, "Display Mode", "Requested functionality has been deprecated");
    kv(out, 1, "Display Attached", "Yes");
    kv(out, 1, "Display Active", "Disabled");
    kv(out, 1, "Persistence Mode", "Enabled");
    kv(out, 1, "Addressing Mode", "None");
    section(out, 1, "MIG Mode");
    kv(out, 2, "Current", "Disabled");
    kv(out, 2, "Pending", "Disabled");
    kv(out, 1, "Accounting Mode", "Disabled");
    kv(out, 1, "Accounting Mode Buffer Size", "4000");
    section(out, 1, "Driver Model");
    kv(out, 2, "Current", "N/A");
    kv(out, 2, "Pending", "N/A");
    kv(out, 1, "Serial Number", r.serial);
    kv(out, 1, "GPU UUID", f.uuid);
    kv(out, 1, "GPU PDI", pdi(f));
    kv(out, 1, "Minor Number", std::to_string(f.index));
    kv(out, 1, "VBIOS Version", b.vbios);
    kv(out, 1, "MultiGPU Board", "No");
    kv(out, 1, "Board ID", fmt::format("0x{:x}", board_id(f)));
    kv(out, 1, "Board Part Number", b.board_part_number);
    kv(out, 1, "GPU Part Number", b.gpu_part_number);
    kv(out, 1, "FRU Part Number", "N/A");
    section(out, 1, "Platform Info");
    kv(out, 2, "Chassis Serial Number", "N/A");
    kv(out, 2, "Slot Number", "N/A");
    kv(out, 2, "Tray Index", "N/A");
    kv(out, 2, "Host ID", "N/A");
    kv(out, 2, "Peer Type", "N/A");
    kv(out, 2, "Module Id", std::to_string(f.local + 1));
    kv(out, 2, "GPU Fabric GUID", "N/A");
    section(out, 1, "Inforom Version");
    kv(out, 2, "Image Version", b.inforom_image);
    kv(out, 2, "OEM Object", "2.1");
    kv(out, 2, "ECC Object", "7.16");
    kv(out, 2, "Power Management Object", "N/A");
    section(out, 1, "Inforom BBX Object Flush");
    kv(out, 2, "Latest Timestamp", "N/A");
    kv(out, 2, "Latest Duration", "N/A");
    section(out, 1, "GPU Operation Mode");
    kv(out, 2, "Current", "N/A");
    kv(out, 2, "Pending", "N/A");
    kv(out, 1, "GPU C2C Mode", "Disabled");
    section(out, 1, "GPU Virtualization Mode");
    kv(out, 2, "Virtualization Mode", "Pass-Through");
    kv(out, 2, "Host VGPU Mode", "N/A");
    kv(out, 2, "vGPU Heterogeneous Mode", "N/A");
    kv(out, 1, "GPU Recovery Action", "None");
    kv(out, 1, "GSP Firmware Version", std::string(inspect::kDriverVersion));
    section(out, 1, "IBMNPU");
    kv(out, 2, "Relaxed Ordering Mode", "N/A");
    section(out, 1, "PCI");
    kv(out, 2, "Bus", fmt::format("0x{:02X}", f.pci_bus));
    kv(out, 2, "Device", fmt::format("0x{:02X}", f.pci_device));
    kv(out, 2, "Domain", fmt::format("0x{:04X}", f.pci_domain));
    kv(out, 2, "Base Classcode", "0x3");
    kv(out, 2, "Sub Classcode", "0x2");
    kv(out, 2, "Device Id", fmt::format("0x{:08X}", device_id(f)));
    kv(out, 2, "Bus Id", f.pci_bus_id);
    kv(out, 2, "Sub System Id", fmt::format("0x{:08X}", subsystem_id(f)));
    section(out, 2, "GPU Link Info");
    section(out, 3, "PCIe Generation");
    kv(out, 4, "Max", std::to_string(r.pcie_gen_max));
    kv(out, 4, "Current", std::to_string(r.pcie_gen));
    kv(out, 4, "Device Current", std::to_string(r.pcie_gen));
    kv(out, 4, "Device Max", std::to_string(r.pcie_gen_max));
    kv(out, 4, "Host Max", "N/A");
    section(out, 3, "Link Width");
    kv(out, 4, "Max", fmt::format("{}x", r.pcie_width_max));
    kv(out, 4, "Current", fmt::format("{}x", r.pcie_width));
    section(out, 2, "Bridge Chip");
    kv(out, 3, "Type", "N/A");
    kv(out, 3, "Firmware", "N/A");
    kv(out, 2, "Replays Since Reset", "0");
    kv(out, 2, "Replay Number Rollovers", "0");
    kv(out, 2, "Tx Throughput", "0 KB/s");
    kv(out, 2, "Rx Throughput", "0 KB/s");
    kv(out, 2, "Atomic Caps Outbound", "N/A");
    kv(out, 2, "Atomic Caps Inbound", "N/A");
    kv(out, 1, "Fan Speed", "N/A");
    kv(out, 1, "Performance State", fmt::format("P{}", r.pstate));
    section(out, 1, "Clocks Event Reasons");
    kv(out, 2, "Idle", active(r.clock_event_reasons & inspect::kClockEventGpuIdle));
    kv(out, 2, "Applications Clocks Setting", "Not Active");
    kv(out, 2, "SW Power Cap", "Not Active");
    kv(out, 2, "HW Slowdown", "Not Active");
    kv(out, 3, "HW Thermal Slowdown", "Not Active");
    kv(out, 3, "HW Power Brake Slowdown", "Not Active");
    kv(out, 2, "Sync Boost", "Not Active");
    kv(out, 2, "SW Thermal Slowdown", "Not Active");
    kv(out, 2, "Display Clock Setting", "Not Active");
    section(out, 1, "Clocks Event Reasons Counters");
    kv(out, 2, "SW Power Capping", "0 us");
    kv(out, 2, "Sync Boost", "0 us");
    kv(out, 2, "SW Thermal Slowdown", "0 us");
    kv(out, 2, "HW Thermal Slowdown", "0 us");
    kv(out, 2, "HW Power Braking", "0 us");
    kv(out, 1, "Sparse Operation Mode", "Disabled");
    section(out, 1, "FB Memory Usage");
    kv(out, 2, "Total", mib_text(r.memory_total));
    kv(out, 2, "Reserved", mib_text(r.memory_reserved));
    kv(out, 2, "Used", mib_text(r.memory_used));
    kv(out, 2, "Free", mib_text(r.memory_free));
    section(out, 1, "BAR1 Memory Usage");
    kv(out, 2, "Total", mib_text(r.bar1_total));
    kv(out, 2, "Used", mib_text(r.bar1_used));
    kv(out, 2, "Free", mib_text(r.bar1_total - r.bar1_used));
    section(out, 1, "Conf Compute Protected Memory Usage");
    kv(out, 2, "Total", "0 MiB");
    kv(out, 2, "Used", "0 MiB");
    kv(out, 2, "Free", "0 MiB");
    kv(out, 1, "Compute Mode", "Default");
    section(out, 1, "Utilization");
    kv(out, 2, "GPU", fmt::format("{} %", r.util_gpu));
    kv(out, 2, "Memory", fmt::format("{} %", r.util_memory));
    kv(out, 2, "Encoder", "0 %");
    kv(out, 2, "Decoder", "0 %");
    kv(out, 2, "JPEG", "0 %");
    kv(out, 2, "OFA", "0 %");
    section(out, 1, "Encoder Stats");
    kv(out, 2, "Active Sessions", "0");
    kv(out, 2, "Average FPS", "0");
    kv(out, 2, "Average Latency", "0");
    section(out, 1, "FBC Stats");
    kv(out, 2, "Active Sessions", "0");
    kv(out, 2, "Average FPS", "0");
    kv(out, 2, "Average Latency", "0");
    section(out, 1, "DRAM Encryption Mode");
    kv(out, 2, "Current", "N/A");
    kv(out, 2, "Pending", "N/A");
    section(out, 1, "ECC Mode");
    kv(out, 2, "Current", "Enabled");
    kv(out, 2, "Pending", "Enabled");
    section(out, 1, "ECC Errors");
    section(out, 2, "Volatile");
    kv(out, 3, "SRAM Correctable", "0");
    kv(out, 3, "SRAM Uncorrectable Parity", "0");
    kv(out, 3, "SRAM Uncorrectable SEC-DED", "0");
    kv(out, 3, "DRAM Correctable", "0");
    kv(out, 3, "DRAM Uncorrectable", "0");
    section(out, 2, "Aggregate");
    kv(out, 3, "SRAM Correctable", "0");
    kv(out, 3, "SRAM Uncorrectable Parity", "0");
    kv(out, 3, "SRAM Uncorrectable SEC-DED", "0");
    kv(out, 3, "DRAM Correctable", "0");
    kv(out, 3, "DRAM Uncorrectable", "0");
    kv(out, 3, "SRAM Threshold Exceeded", "No");
    section(out, 2, "Aggregate Uncorrectable SRAM Sources");
    kv(out, 3, "SRAM L2", "0");
    kv(out, 3, "SRAM SM", "0");
    kv(out, 3, "SRAM Microcontroller", "0");
    kv(out, 3, "SRAM PCIE", "0");
    kv(out, 3, "SRAM Other", "0");
    kv(out, 2, "Channel Repair Pending", "No");
    kv(out, 2, "TPC Repair Pending", "No");
    kv(out, 2, "Unrepairable Memory", "No");
    section(out, 1, "Retired Pages");
    kv(out, 2, "Single Bit ECC", "N/A");
    kv(out, 2, "Double Bit ECC", "N/A");
    kv(out, 2, "Pending Page Blacklist", "N/A");
    section(out, 1, "Remapped Rows");
    kv(out, 2, "Correctable Error", "0");
    kv(out, 2, "Inactive Correctable Error", "0");
    kv(out, 2, "Uncorrectable Error", "0");
    kv(out, 2, "Inactive Uncorrectable Error", "0");
    kv(out, 2, "Pending", "No");
    kv(out, 2, "Remapping Failure Occurred", "No");
    section(out, 2, "Bank Remap Availability Histogram");
    kv(out, 3, "Max", "2560 bank(s)");
    kv(out, 3, "High", "0 bank(s)");
    kv(out, 3, "Partial", "0 bank(s)");
    kv(out, 3, "Low", "0 bank(s)");
    kv(out, 3, "None", "0 bank(s)");
    section(out, 1, "Temperature");
    kv(out, 2, "GPU Current Temp", fmt::format("{} C", r.temp_gpu));
    kv(out, 2, "GPU T.Limit Temp", fmt::format("{} C", r.temp_max_operating - std::min(r.temp_max_operating, r.temp_gpu)));
    kv(out, 2, "GPU Shutdown T.Limit Temp", "-8 C");
    kv(out, 2, "GPU Slowdown T.Limit Temp", "-2 C");
    kv(out, 2, "GPU Max Operating T.Limit Temp", "0 C");
    kv(out, 2, "GPU Target Temperature", "N/A");
    kv(out, 2, "Memory Current Temp", fmt::format("{} C", r.temp_memory));
    kv(out, 2, "Memory Max Operating T.Limit Temp", "0 C");
    section(out, 1, "GPU Power Readings");
    kv(out, 2, "Average Power Draw", watts(r.power_draw));
    kv(out, 2, "Instantaneous Power Draw", watts(r.power_draw));
    kv(out, 2, "Current Power Limit", watts(r.power_limit));
    kv(out, 2, "Requested Power Limit", watts(r.power_limit));
    kv(out, 2, "Default Power Limit", watts(r.power_limit));
    kv(out, 2, "Min Power Limit", watts(r.min_power_limit));
    kv(out, 2, "Max Power Limit", watts(r.max_power_limit));
    section(out, 1, "GPU Memory Power Readings ");
    kv(out, 2, "Average Power Draw", watts(memory_power(r)));
    kv(out, 2, "Instantaneous Power Draw", "N/A");
    section(out, 1, "Module Power Readings");
    kv(out, 2, "Average Power Draw", "N/A");
    kv(out, 2, "Instantaneous Power Draw", "N/A");
    kv(out, 2, "Current Power Limit", "N/A");
    kv(out, 2, "Requested Power Limit", "N/A");
    kv(out, 2, "Default Power Limit", "N/A");
    kv(out, 2, "Min Power Limit", "N/A");
    kv(out, 2, "Max Power Limit", "N/A");
    kv(out, 1, "Power Smoothing", "N/A");
    section(out, 1, "Workload Power Profiles");
    kv(out, 2, "Requested Profiles", "N/A");
    kv(out, 2, "Enforced Profiles", "N/A");
    section(out, 1, "Clocks");
    kv(out, 2, "Graphics", mhz(r.clock_graphics));
    kv(out, 2, "SM", mhz(r.clock_sm));
    kv(out, 2, "Memory", mhz(r.clock_memory));
    kv(out, 2, "Video", mhz(r.clock_video));
    section(out, 1, "Applications Clocks");
    kv(out, 2, "Graphics", mhz(r.app_graphics));
    kv(out, 2, "Memory", mhz(r.app_memory));
    section(out, 1, "Default Applications Clocks");
    kv(out, 2, "Graphics", mhz(r.app_graphics));
    kv(out, 2, "Memory", mhz(r.app_memory));
    section(out, 1, "Deferred Clocks");
    kv(out, 2, "Memory", "N/A");
    section(out, 1, "Max Clocks");
    kv(out, 2, "Graphics", mhz(r.max_graphics));
    kv(out, 2, "SM", mhz(r.max_sm));
    kv(out, 2, "Memory", mhz(r.max_memory));
    kv(out, 2, "Video", mhz(r.max_video));
    section(out, 1, "Max Customer Boost Clocks");
    kv(out, 2, "Graphics", mhz(r.max_graphics));
    section(out, 1, "Clock Policy");
    kv(out, 2, "Auto Boost", "N/A");
    kv(out, 2, "Auto Boost Default", "N/A");
    section(out, 1, "Fabric");
    kv(out, 2, "State", "Completed");
    kv(out, 2, "Status", "Success");
    kv(out, 2, "CliqueId", "0");
    kv(out, 2, "ClusterUUID", "00000000-0000-0000-0000-000000000000");
    section(out, 2, "Health");
    kv(out, 3, "Summary", "N/A");
    kv(out, 3, "Bandwidth", "N/A");
    kv(out, 3, "Route Recovery in progress", "N/A");
    kv(out, 3, "Route Unhealthy", "N/A");
    kv(out, 3, "Access Timeout Recovery", "N/A");
    kv(out, 3, "Incorrect Configuration", "N/A");
    kv(out, 3, "Partition Assigned", "N/A");
    processes(out, s, i);
    section(out, 1, "Capabilities");
    kv(out, 2, "EGM", "disabled");
}

}  // namespace

std::string render_full_report(const Shown& s) {
  char when[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", &tm);
  std::string out = "\n==============NVSMI LOG==============\n\n";
  kv(out, 0, "Timestamp", when);
  kv(out, 0, "Driver Version", inspect::kDriverVersion);
  kv(out, 0, "CUDA Version", fmt::format("{}.{}", inspect::kCudaDriverVersion / 1000,
                                          (inspect::kCudaDriverVersion % 1000) / 10));
  out += "\n";
  kv(out, 0, "Attached GPUs", std::to_string(s.view.devices.size()));
  for (int i : s.devices) {  // each block ends with an empty line, as nvidia-smi's
    device_block(out, s, i);
    out += "\n";
  }
  return out;
}

}  // namespace vgpu::smi
