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
#include "passthrough/passthrough.h"

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

}  // namespace

MeasureLock* MeasureLock::of(int physical) { return Passthrough::get().measure_locks().of(physical); }

MeasureLock* MeasureLocks::of(int physical) {
  if (!enabled() || physical < 0) return nullptr;
  std::lock_guard l(mu_);
  auto it = locks_.find(physical);
  if (it != locks_.end()) return it->second;
  // One file per user and physical GPU, in shared memory (user-only permissions).
  const std::string path = "/dev/shm/vgpu-measure-" + std::to_string(getuid()) + "-gpu" + std::to_string(physical);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    log::once(log::Level::warn, "measure-lock",
              fmt::format("passthrough: cannot open {} ({}); measurements may overlap", path, std::strerror(errno)));
  }
  MeasureLock* lock = fd < 0 ? nullptr : new MeasureLock(fd, &in_process_);
  locks_[physical] = lock;
  return lock;
}

bool MeasureLock::acquire() {
  const double deadline = monotonic() + kWaitSeconds;
  while (!in_process_->try_lock()) {
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
  in_process_->unlock();
}

}  // namespace vgpu::pt
