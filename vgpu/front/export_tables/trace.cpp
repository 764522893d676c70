#include "front/export_tables/trace.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/settings.h"

namespace vgpu::darkapi {

bool trace_enabled() {
  static const bool on = settings::flag(settings::Id::trace);
  return on;
}

void trace_line(std::string_view text) {
  std::string line = fmt::format("[vgpu trace {}:{}] {}\n", getpid(),
                                 static_cast<long>(syscall(SYS_gettid)), text);
  // One write() per line keeps lines of concurrent threads whole.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace vgpu::darkapi
