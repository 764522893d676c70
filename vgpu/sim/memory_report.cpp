// VGPU_SIM_MEMORY_REPORT (see memory_report.h).
#include "sim/memory_report.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

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

void write_report() {
  DriverState* d = DriverState::get();
  if (d == nullptr) return;
  std::string path = settings::text(settings::Id::sim_memory_report);
  if (path.empty()) return;
  if (const size_t at = path.find("%p"); at != std::string::npos) path.replace(at, 2, std::to_string(::getpid()));
  const std::string status = read_status();
  const struct mallinfo2 heap = mallinfo2();  // every arena: the program's and the driver's
  const ModuleStats m = d->modules().stats();
  const MemoryManager::Footprint f = d->memory().footprint();
  constexpr double kMiB = 1024.0 * 1024.0;
  const std::string line = fmt::format(
      "{{\"pid\": {}, \"rss_anon_mib\": {:.1f}, \"rss_file_mib\": {:.1f}, \"rss_shmem_mib\": {:.1f}, "
      "\"vm_hwm_mib\": {:.1f}, \"malloc_in_use_mib\": {:.1f}, "
      "\"device_memory_mib\": {:.1f}, \"device_memory_resident_mib\": {:.1f}, "
      "\"host_visible_memory_mib\": {:.1f}, \"host_visible_memory_resident_mib\": {:.1f}, "
      "\"module_tables_mib\": {:.1f}, \"libraries\": {}, \"modules\": {}, \"kernels\": {}, \"functions\": {}, "
      "\"images_parsed\": {}, \"decompressed_mib\": {:.1f}, \"largest_decompressed_mib\": {:.1f}}}\n",
      ::getpid(), status_kib(status, "RssAnon") / 1024.0, status_kib(status, "RssFile") / 1024.0,
      status_kib(status, "RssShmem") / 1024.0, status_kib(status, "VmHWM") / 1024.0,
      (heap.uordblks + heap.hblkhd) / kMiB, f.device_bytes / kMiB, f.device_resident / kMiB, f.host_bytes / kMiB,
      f.host_resident / kMiB, m.table_bytes / kMiB, m.libraries, m.modules, m.kernels, m.functions, m.images_parsed,
      m.decompressed_bytes / kMiB, m.largest_decompressed / kMiB);
  // One write of one line: the ranks of a job may share the file.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    log::warn("VGPU_SIM_MEMORY_REPORT={}: cannot write it", path);
  if (fd >= 0) ::close(fd);
}

}  // namespace

void arm_memory_report() {
  if (!settings::is_set(settings::Id::sim_memory_report)) return;
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit([] {
      try {
        write_report();
      } catch (...) {  // at exit, inside someone else's process: never throw
      }
    });
  });
}

}  // namespace vgpu
