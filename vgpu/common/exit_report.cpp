#include "exit_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "log.h"

namespace vgpu {
namespace {

struct Pending {
  settings::Id id;
  std::function<std::string()> make;
};

// The reports to write at exit, in registration order (never destroyed: read at exit).
struct ExitReports {
  std::mutex mu;
  std::vector<Pending> pending;
};
ExitReports& exit_reports() {
  static ExitReports* r = new ExitReports;
  return *r;
}

void write_all() {
  ExitReports& r = exit_reports();
  std::vector<Pending> pending;
  {
    std::lock_guard l(r.mu);
    pending = r.pending;
  }
  for (const Pending& p : pending) {
    try {
      const std::string text = p.make();
      if (!text.empty()) append_report(p.id, text);
    } catch (...) {  // at exit, inside someone else's process: never throw
    }
  }
}

}  // namespace

std::string json_safe(std::string text) {
  for (char& c : text)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '_';
  return text;
}

void append_report(settings::Id id, const std::string& text) {
  std::string path = settings::text(id);
  if (path.empty()) return;
  if (const size_t at = path.find("%p"); at != std::string::npos) path.replace(at, 2, std::to_string(::getpid()));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    log::warn("{}={}: cannot write it", settings::spec(id).name, path);
  if (fd >= 0) ::close(fd);
}

void append_report_at_exit(settings::Id id, std::function<std::string()> make) {
  if (!settings::is_set(id)) return;
  ExitReports& r = exit_reports();
  std::lock_guard l(r.mu);
  for (const Pending& p : r.pending)
    if (p.id == id) return;
  if (r.pending.empty()) std::atexit(write_all);
  r.pending.push_back({id, std::move(make)});
}

}  // namespace vgpu
