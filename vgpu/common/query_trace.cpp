#include "query_trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "log.h"
#include "settings.h"

namespace vgpu::query_trace {
namespace {

// The trace file of this process: opened on the first line, kept open until exit (a driver is
// never unloaded: -z nodelete), so that a line costs one write().
class TraceFile {
 public:
  TraceFile() : path_(settings::text(settings::Id::query_trace)) {
    if (path_.empty()) return;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0)
      log::warn("VGPU_QUERY_TRACE: cannot open {}: {}; no query trace is written", path_,
                std::strerror(errno));
  }
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  void write(std::string_view text) const {
    if (fd_ < 0) return;
    std::string line;
    line.reserve(text.size() + 1);
    line.append(text).push_back('\n');
    // One write() per line: O_APPEND places it whole after every other process's lines.
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

const TraceFile& trace_file() {
  static const TraceFile* f = new TraceFile;  // written to until exit, by any thread
  return *f;
}

}  // namespace

bool enabled() {
  static const bool on = !settings::text(settings::Id::query_trace).empty();
  return on;
}

void write_line(std::string_view text) {
  if (enabled()) trace_file().write(text);
}

}  // namespace vgpu::query_trace
