#include "sim/exec/activity_report.h"

#include <time.h>

#include "status/status_region.h"

namespace vgpu {

int64_t ActivityReport::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // a few ns: read on every submission
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool ActivityReport::note(int device, simcore::EventId vid, bool kernel) {
  if (status_ == nullptr || vid == simcore::kNoEvent) return false;
  size_t n;
  {
    std::lock_guard lock(mu_);
    pending_.push_back({vid, device, kernel});
    n = pending_.size();
  }
  return n >= kBatch || due();
}

bool ActivityReport::due() const {
  return status_ != nullptr && now_ns() >= next_due_ns_.load(std::memory_order_relaxed);
}

void ActivityReport::flush() {
  if (status_ == nullptr) return;
  std::lock_guard order(flush_mu_);
  next_due_ns_.store(now_ns() + kPeriodNs, std::memory_order_relaxed);
  std::vector<Noted> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(pending_);
  }
  for (const Noted& n : batch)
    if (auto iv = engine_.query(n.vid)) status_->add_interval(n.device, iv->start, iv->finish, n.kernel);
  status_->publish();
}

}  // namespace vgpu
