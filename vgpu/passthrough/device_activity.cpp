#include "passthrough/device_activity.h"

#include <algorithm>
#include <mutex>

#include "timing/inline_constants.h"
#include "status/status_region.h"

namespace vgpu::pt {

DeviceActivity::DeviceActivity(status::Writer* writer, int devices)
    : writer_(writer),
      stretches_(static_cast<size_t>(std::max(0, devices))),
      counts_(static_cast<size_t>(std::max(0, devices))) {}

void DeviceActivity::flush(int device, bool kernel, Stretch& s) {
  if (s.open()) writer_->add_activity(device, s.start, s.finish, kernel);
  s = Stretch{};
}

void DeviceActivity::push(int device) {
  Counts& c = counts_[static_cast<size_t>(device)];
  if (c.kernels == 0 && c.busy_ns == 0 && c.clock <= 0) return;
  writer_->add_work(device, c.kernels, c.busy_ns);
  if (c.clock > 0) writer_->advance_clock(device, c.clock);
  c = Counts{};
}

void DeviceActivity::report(int device, double start, double finish, bool kernel) {
  if (writer_ == nullptr || device < 0 || static_cast<size_t>(device) >= stretches_.size()) return;
  std::lock_guard l(mu_);
  Counts& c = counts_[static_cast<size_t>(device)];
  if (kernel) ++c.kernels;
  // As Writer::add_work rounds each op; its constants as immediates (inline_constants.h: every
  // launch and copy reports here, and each .rodata constant was a cache line to fetch again).
  // Through int64_t: a conversion to uint64_t compares with 2^63, another .rodata constant (an
  // op's nanoseconds are far below it).
  c.busy_ns += static_cast<uint64_t>(static_cast<int64_t>(std::max(0.0, finish - start) * immediate(1e9)));
  c.clock = std::max(c.clock, finish);
  Stretch& s = stretches_[static_cast<size_t>(device)][kernel ? 1 : 0];
  if (s.open() && start >= s.start && start <= s.finish) {
    s.finish = std::max(s.finish, finish);
    if (s.finish - s.start >= immediate(kMaxSpan)) {
      push(device);
      flush(device, kernel, s);
    }
    return;
  }
  // Work that does not continue the stretch: the stretch goes to the window, and so does this
  // work at once (the window is recomputed at the device's new clock: an idle device's
  // utilization falls); what follows it back to back is merged.
  push(device);
  flush(device, kernel, s);
  writer_->add_activity(device, start, finish, kernel);
  s = {finish, finish};
}

void DeviceActivity::flush() {
  if (writer_ == nullptr) return;
  std::lock_guard l(mu_);
  for (size_t d = 0; d < stretches_.size(); ++d) {
    const int device = static_cast<int>(d);
    push(device);
    flush(device, false, stretches_[d][0]);
    flush(device, true, stretches_[d][1]);
  }
}

}  // namespace vgpu::pt
