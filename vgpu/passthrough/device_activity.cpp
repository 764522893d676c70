#include "passthrough/device_activity.h"

#include <algorithm>
#include <mutex>

#include "status/status_region.h"

namespace vgpu::pt {

DeviceActivity::DeviceActivity(status::Writer* writer, int devices)
    : writer_(writer), stretches_(static_cast<size_t>(std::max(0, devices))) {}

void DeviceActivity::flush(int device, bool kernel, Stretch& s) {
  if (s.open()) writer_->add_activity(device, s.start, s.finish, kernel);
  s = Stretch{};
}

void DeviceActivity::report(int device, double start, double finish, bool kernel) {
  if (writer_ == nullptr || device < 0 || static_cast<size_t>(device) >= stretches_.size()) return;
  writer_->add_work(device, std::max(0.0, finish - start), kernel);
  writer_->advance_clock(device, finish);
  std::lock_guard l(mu_);
  Stretch& s = stretches_[static_cast<size_t>(device)][kernel ? 1 : 0];
  if (s.open() && start >= s.start && start <= s.finish) {
    s.finish = std::max(s.finish, finish);
    if (s.finish - s.start >= kMaxSpan) flush(device, kernel, s);
    return;
  }
  // Work that does not continue the stretch: the stretch goes to the window, and so does this
  // work at once (the window is recomputed at the device's new clock: an idle device's
  // utilization falls); what follows it back to back is merged.
  flush(device, kernel, s);
  writer_->add_activity(device, start, finish, kernel);
  s = {finish, finish};
}

}  // namespace vgpu::pt
