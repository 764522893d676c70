#include "passthrough/measure_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "common/log.h"
#include "common/settings.h"

namespace vgpu::pt {
namespace {

bool enabled() {
  static const bool on = settings::text(settings::Id::measure) != "concurrent";
  return on;
}

double monotonic() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Threads of one process exclude each other here; processes through flock on the file. (A
// plain mutex polled with try_lock: sanitizers do not follow timed_mutex's timed waits.)
std::mutex g_in_process;

}  // namespace

MeasureLock* MeasureLock::of(int physical) {
  if (!enabled() || physical < 0) return nullptr;
  static std::mutex mu;
  static auto* locks = new std::map<int, MeasureLock*>;
  std::lock_guard l(mu);
  auto it = locks->find(physical);
  if (it != locks->end()) return it->second;
  // One file per user and physical GPU, in shared memory (user-only permissions).
  const std::string path = "/dev/shm/vgpu-measure-" + std::to_string(getuid()) + "-gpu" + std::to_string(physical);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    log::once(log::Level::warn, "measure-lock",
              fmt::format("passthrough: cannot open {} ({}); measurements may overlap", path, std::strerror(errno)));
  }
  MeasureLock* lock = fd < 0 ? nullptr : new MeasureLock(fd);
  (*locks)[physical] = lock;
  return lock;
}

bool MeasureLock::acquire() {
  const double deadline = monotonic() + kWaitSeconds;
  while (!g_in_process.try_lock()) {
    if (monotonic() > deadline) return false;
    usleep(20);
  }
  while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    if (monotonic() > deadline) break;
    usleep(20);
  }
  // Got it, or gave up on the other processes: either way this thread holds the in-process part.
  return true;
}

void MeasureLock::release() {
  flock(fd_, LOCK_UN);
  g_in_process.unlock();
}

}  // namespace vgpu::pt
