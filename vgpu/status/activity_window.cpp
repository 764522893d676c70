#include "status/activity_window.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace vgpu::status {

void ActivityWindow::add(double start, double finish) {
  if (!(finish > start)) return;
  latest_ = std::max(latest_, finish);
  // Merge with every piece that overlaps or touches [start, finish].
  auto it = pieces_.upper_bound(start);
  if (it != pieces_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= start) {
      if (prev->second >= finish) return;  // already covered
      it = prev;  // merged (and its length taken back) by the loop below
    }
  }
  while (it != pieces_.end() && it->first <= finish) {
    start = std::min(start, it->first);
    finish = std::max(finish, it->second);
    covered_ -= it->second - it->first;
    it = pieces_.erase(it);
  }
  pieces_.emplace_hint(it, start, finish);
  covered_ += finish - start;
  while (pieces_.size() > kMaxPieces) summarize_oldest();
}

void ActivityWindow::summarize_oldest() {
  auto first = pieces_.begin();
  const double s = first->first, f = first->second;
  covered_ -= f - s;
  pieces_.erase(first);
  const double w = bin_width();
  for (long long b = static_cast<long long>(std::floor(s / w)); b * w < f; ++b) {
    const double lo = std::max(s, b * w), hi = std::min(f, (b + 1) * w);
    if (hi > lo) bins_[b] = std::min(w, bins_[b] + (hi - lo));
  }
}

void ActivityWindow::prune(double begin) {
  auto it = pieces_.begin();
  while (it != pieces_.end() && it->second <= begin) {
    covered_ -= it->second - it->first;
    it = pieces_.erase(it);
  }
  if (pieces_.empty()) covered_ = 0;  // no rounding drift left behind
  const double w = bin_width();
  while (!bins_.empty() && (bins_.begin()->first + 1) * w <= begin) bins_.erase(bins_.begin());
}

double ActivityWindow::utilization(double now) {
  if (!(now > 0)) return 0;
  const double begin = std::max(0.0, now - width_);
  prune(begin);
  // Only the first piece can start before the window; pieces past `now` are clipped (the
  // caller's clock normally covers every finish it was given).
  double covered = covered_;
  if (!pieces_.empty() && pieces_.begin()->first < begin) covered -= begin - pieces_.begin()->first;
  auto after = pieces_.lower_bound(now);
  if (after != pieces_.begin() && std::prev(after)->second > now) covered -= std::prev(after)->second - now;
  for (; after != pieces_.end(); ++after) covered -= after->second - after->first;
  // Summarized stretches: a bin straddling the window's edge counts in proportion.
  const double w = bin_width();
  for (const auto& [b, length] : bins_) {
    const double lo = std::max(begin, b * w), hi = std::min(now, (b + 1) * w);
    if (hi > lo) covered += length * (hi - lo) / w;
  }
  return std::clamp(covered / (now - begin), 0.0, 1.0);
}

}  // namespace vgpu::status
