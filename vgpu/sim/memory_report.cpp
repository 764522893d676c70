// VGPU_SIM_MEMORY_REPORT (see memory_report.h).
#include "sim/memory_report.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>

#include "common/exit_report.h"
#include "common/log.h"
#include "common/settings.h"
#include "sim/core/driver_state.h"
#include "sim/exec/module_registry.h"
#include "sim/memory/memory.h"

namespace vgpu {
namespace {

// A field of /proc/self/status in kB (-1 when absent).
long status_kib(const std::string& status, const char* key) {
  const std::string k = std::string("\n") + key + ":";
  const size_t at = status.find(k);
  if (at == std::string::npos) return -1;
  return std::strtol(status.c_str() + at + k.size(), nullptr, 10);
}

std::string read_status() {
  std::string out = "\n";
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

// The report's line (empty when there is no driver).
std::string report_line() {
  DriverState* d = DriverState::get();
  if (d == nullptr) return {};
  const std::string status = read_status();
  const struct mallinfo2 heap = mallinfo2();  // every arena: the program's and the driver's
  const ModuleStats m = d->modules().stats();
  const MemoryManager::Footprint f = d->memory().footprint();
  const MemoryManager::WriteStats w = d->memory().write_stats();
  constexpr double kMiB = 1024.0 * 1024.0;
  // What touched device memory, by path: bytes stored, and bytes of whole pages released instead
  // (they were to hold zeros: a memset of 0, a copy from zeros).
  static constexpr const char* kPaths[] = {"htod", "dtod", "peer", "memset", "nccl"};
  static_assert(std::size(kPaths) == static_cast<size_t>(MemoryManager::DeviceWrite::count));
  std::string written, released;
  for (size_t i = 0; i < std::size(kPaths); ++i) {
    written += fmt::format("{}\"{}\": {:.1f}", i ? ", " : "", kPaths[i], w.written[i] / kMiB);
    released += fmt::format("{}\"{}\": {:.1f}", i ? ", " : "", kPaths[i], w.released[i] / kMiB);
  }
  // The allocations holding the most pages of their own, 1 MiB or more: [allocated MiB, own MiB,
  // kind].
  std::string largest;
  for (const auto& h : f.largest)
    if (h.own >= (1u << 20))
      largest += fmt::format("{}[{:.1f}, {:.1f}, \"{}\"]", largest.empty() ? "" : ", ", h.bytes / kMiB, h.own / kMiB, h.kind);
  // Device memory of the process's own by pagemap (-1 when it cannot be read).
  auto known = [&](uint64_t v) { return f.private_known ? v / kMiB : -1.0; };
  const std::string line = fmt::format(
      "{{\"pid\": {}, \"rss_anon_mib\": {:.1f}, \"rss_file_mib\": {:.1f}, \"rss_shmem_mib\": {:.1f}, "
      "\"vm_hwm_mib\": {:.1f}, \"malloc_in_use_mib\": {:.1f}, "
      "\"device_memory_mib\": {:.1f}, \"device_memory_resident_mib\": {:.1f}, "
      "\"device_memory_private_mib\": {:.1f}, \"device_memory_memfd_mib\": {:.1f}, "
      "\"device_memory_zero_page_mib\": {:.1f}, "
      "\"device_memory_swapped_mib\": {:.1f}, \"device_largest_own\": [{}], "
      "\"device_written_mib\": {{{}}}, \"device_released_mib\": {{{}}}, \"device_timed_only_mib\": {:.1f}, "
      "\"host_visible_memory_mib\": {:.1f}, \"host_visible_memory_resident_mib\": {:.1f}, "
      "\"module_tables_mib\": {:.1f}, \"libraries\": {}, \"modules\": {}, \"kernels\": {}, \"functions\": {}, "
      "\"images_parsed\": {}, \"decompressed_mib\": {:.1f}, \"largest_decompressed_mib\": {:.1f}}}\n",
      ::getpid(), status_kib(status, "RssAnon") / 1024.0, status_kib(status, "RssFile") / 1024.0,
      status_kib(status, "RssShmem") / 1024.0, status_kib(status, "VmHWM") / 1024.0,
      (heap.uordblks + heap.hblkhd) / kMiB, f.device_bytes / kMiB, f.device_resident / kMiB,
      known(f.device_private), known(f.device_memfd), known(f.device_zero_page), known(f.device_swapped), largest, written, released,
      w.timed_only / kMiB, f.host_bytes / kMiB,
      f.host_resident / kMiB, m.table_bytes / kMiB, m.libraries, m.modules, m.kernels, m.functions, m.images_parsed,
      m.decompressed_bytes / kMiB, m.largest_decompressed / kMiB);
  return line;
}

}  // namespace

void arm_memory_report() { append_report_at_exit(settings::Id::sim_memory_report, report_line); }

}  // namespace vgpu
