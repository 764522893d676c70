#include "proc_info.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace vgpu {

long read_proc_file(pid_t pid, const char* leaf, char* buf, size_t cap) noexcept {
  if (cap == 0) return -1;
  buf[0] = '\0';
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid), leaf);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len + 1 < cap) {
    const ssize_t r = read(fd, buf + len, cap - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      close(fd);
      buf[0] = '\0';
      return -1;
    }
    if (r == 0) break;
    len += static_cast<size_t>(r);
  }
  close(fd);
  buf[len] = '\0';
  return static_cast<long>(len);
}

uint64_t start_time_from_stat(const char* stat, size_t len) noexcept {
  size_t close_paren = len;
  for (size_t i = len; i > 0; --i)
    if (stat[i - 1] == ')') {
      close_paren = i - 1;
      break;
    }
  if (close_paren == len) return 0;
  // After ") " come fields 3, 4, ...: skip to field 22.
  size_t i = close_paren + 1;
  for (int field = 3; field <= 22; ++field) {
    while (i < len && stat[i] == ' ') ++i;
    if (i >= len) return 0;
    if (field == 22) {
      uint64_t v = 0;
      size_t digits = 0;
      for (; i < len && stat[i] >= '0' && stat[i] <= '9' && digits < 20; ++i, ++digits)
        v = v * 10 + static_cast<uint64_t>(stat[i] - '0');
      return digits > 0 ? v : 0;
    }
    while (i < len && stat[i] != ' ') ++i;
  }
  return 0;
}

uint64_t process_start_time(pid_t pid) noexcept {
  // A stat line is about 300 bytes; its command name is at most 64 (TASK_COMM_LEN plus escapes).
  char buf[1024];
  const long n = read_proc_file(pid, "stat", buf, sizeof buf);
  return n > 0 ? start_time_from_stat(buf, static_cast<size_t>(n)) : 0;
}

void process_name(pid_t pid, char* out, size_t n) noexcept {
  if (n == 0) return;
  char buf[512];
  const long len = read_proc_file(pid, "cmdline", buf, sizeof buf);
  out[0] = '\0';
  if (len <= 0) return;
  std::snprintf(out, n, "%s", buf);  // up to the first NUL: the program
}

char process_state(pid_t pid) noexcept {
  char buf[1024];
  const long n = read_proc_file(pid, "stat", buf, sizeof buf);
  if (n <= 0) return '\0';
  for (long i = n; i > 0; --i)
    if (buf[i - 1] == ')') return i + 1 < n ? buf[i + 1] : '\0';  // ") S ..."
  return '\0';
}

}  // namespace vgpu
