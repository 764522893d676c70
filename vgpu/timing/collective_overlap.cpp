#include "timing/collective_overlap.h"

#include <algorithm>
#include <cmath>

namespace vgpu::timing {

namespace {
double rate_or(double rate, double otherwise) { return std::isfinite(rate) ? std::clamp(rate, 0.01, 1.0) : otherwise; }
}  // namespace

CollectiveOverlap::CollectiveOverlap(double moving, double waiting)
    : moving_(rate_or(moving, kDefaultMoving)), waiting_(rate_or(waiting, kDefaultWaiting)) {}

CollectiveOverlap::Device* CollectiveOverlap::device(int d) {
  if (d < 0 || d >= kMaxDevices) return nullptr;
  if (static_cast<size_t>(d) >= devices_.size()) devices_.resize(static_cast<size_t>(d) + 1);
  return &devices_[static_cast<size_t>(d)];
}

double CollectiveOverlap::debt(int d) const {
  return d >= 0 && static_cast<size_t>(d) < devices_.size() ? devices_[static_cast<size_t>(d)].debt : 0;
}

bool CollectiveOverlap::quiet_after(int d, double start) const {
  if (!enabled() || d < 0 || static_cast<size_t>(d) >= devices_.size()) return true;
  const Device& dev = devices_[static_cast<size_t>(d)];
  // A window forgotten since finished before its kernels anyway: the latest finish ever placed
  // answers as the windows kept would, or more cautiously (kernel_finish then changes nothing).
  return dev.debt <= 0 && dev.latest_finish <= start;
}

void CollectiveOverlap::kernel_ran(int d, double start, double finish) {
  Device* dev = enabled() && std::isfinite(start) && std::isfinite(finish) && finish >= start ? device(d) : nullptr;
  if (dev != nullptr) remember(*dev, {start, finish});
}

void CollectiveOverlap::remember(Device& dev, Interval kernel) {
  if (dev.kernels.size() < kKernelsKept)
    dev.kernels.push_back(kernel);
  else
    dev.kernels[dev.next_kernel] = kernel;
  dev.next_kernel = (dev.next_kernel + 1) % kKernelsKept;
}

double CollectiveOverlap::kernel_finish(int d, double start, double seconds, double* carried) {
  if (carried != nullptr) *carried = 0;
  const double alone = std::isfinite(seconds) && seconds > 0 ? seconds : 0;
  Device* dev = enabled() && std::isfinite(start) ? device(d) : nullptr;
  if (dev == nullptr) return start + alone;
  if (dev->windows.empty() && dev->debt == 0) {  // the common case: no collective near
    remember(*dev, {start, start + alone});
    return start + alone;
  }
  while (!dev->windows.empty() && dev->windows.front().finish < start - kKeepBehindS) dev->windows.pop_front();
  double work = alone + dev->debt;
  if (carried != nullptr) *carried = dev->debt;
  dev->debt = 0;
  // Its work at full rate outside the windows, at each part's rate inside it.
  double t = start;
  for (const Window& w : dev->windows) {
    if (w.finish <= t) continue;
    if (w.start > t) {
      if (work <= w.start - t) break;
      work -= w.start - t;
      t = w.start;
    }
    const double inside = (w.finish - t) * w.rate;
    if (work <= inside) {
      t += work / w.rate;
      work = 0;
      break;
    }
    work -= inside;
    t = w.finish;
  }
  const double finish = t + work;
  remember(*dev, {start, finish});
  return finish;
}

void CollectiveOverlap::collective(int d, double start, double moving_from, double finish) {
  Device* dev = enabled() && std::isfinite(start) && std::isfinite(finish) && finish > start ? device(d) : nullptr;
  if (dev == nullptr) return;
  const double from = std::isfinite(moving_from) ? std::clamp(moving_from, start, finish) : start;
  part(*dev, start, from, waiting_);
  part(*dev, from, finish, moving_);
}

void CollectiveOverlap::part(Device& dev, double start, double finish, double rate) {
  if (!(finish > start) || rate >= 1.0) return;
  // The kernels placed already that ran inside it (their union): the work they could not have
  // done there is the debt.
  std::vector<Interval> inside;
  for (const Interval& k : dev.kernels) {
    const double a = std::max(k.start, start), b = std::min(k.finish, finish);
    if (b > a) inside.push_back({a, b});
  }
  std::sort(inside.begin(), inside.end(), [](const Interval& x, const Interval& y) { return x.start < y.start; });
  double busy = 0, reach = start;
  for (const Interval& k : inside) {
    const double a = std::max(k.start, reach);
    if (k.finish > a) busy += k.finish - a;
    reach = std::max(reach, k.finish);
  }
  dev.debt += (1 - rate) * busy;
  // Kept by start for the kernels placed later.
  auto at = std::upper_bound(dev.windows.begin(), dev.windows.end(), start,
                             [](double s, const Window& w) { return s < w.start; });
  dev.windows.insert(at, {start, finish, rate});
  dev.latest_finish = std::max(dev.latest_finish, finish);
  if (dev.windows.size() > kWindowsKept) dev.windows.pop_front();
}

}  // namespace vgpu::timing
