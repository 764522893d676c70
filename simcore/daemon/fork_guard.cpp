#include "fork_guard.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "common/log.h"

namespace simcore::daemon {
namespace {

constexpr int kSlots = 256;  // connections per process: one per engine, rarely more than a few
std::atomic<int> g_fds[kSlots];  // -1: free (set up by the once below before any use)

// In the child, after fork: only async-signal-safe calls.
void replace_in_child() {
  for (auto& slot : g_fds) {
    const int fd = slot.load(std::memory_order_relaxed);
    if (fd < 0) continue;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
      ::close(sv[1]);          // reads give EOF, writes EPIPE (sent with MSG_NOSIGNAL)
      ::dup2(sv[0], fd);       // atomically drops the child's reference to the real socket
      ::close(sv[0]);
      // dup2 cleared close-on-exec on `fd`; the replacement is harmless either way.
    }
    slot.store(-1, std::memory_order_relaxed);
  }
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto& slot : g_fds) slot.store(-1);
    ::pthread_atfork(nullptr, nullptr, replace_in_child);
  });
}

}  // namespace

bool guard_against_fork(int fd) {
  install_once();
  for (auto& slot : g_fds) {
    int expected = -1;
    if (slot.compare_exchange_strong(expected, fd)) return true;
  }
  vgpu::log::once(vgpu::log::Level::warn, "vgpud-fork-guard",
                  "vgpud client: too many connections to guard against fork");
  return false;
}

void unguard(int fd) {
  install_once();
  for (auto& slot : g_fds) {
    int expected = fd;
    if (slot.compare_exchange_strong(expected, -1)) return;
  }
}

}  // namespace simcore::daemon
