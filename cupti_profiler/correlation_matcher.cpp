#include "cupti_profiler/correlation_matcher.h"

#include <algorithm>

namespace vgpu::cupti {

CorrelationMatcher::CorrelationMatcher(size_t window) : window_(std::max<size_t>(window, 1)) {}

void CorrelationMatcher::on_tag(uint32_t correlation_id, uint64_t tag, std::vector<Completed>& out) {
  auto [it, inserted] = tags_.insert_or_assign(correlation_id, tag);
  (void)it;
  if (inserted) {
    tag_order_.push_back(correlation_id);
    while (tag_order_.size() > window_) {
      tags_.erase(tag_order_.front());
      tag_order_.pop_front();
    }
  }

  if (auto c = claimed_.find(correlation_id); c != claimed_.end() && !c->second) {
    c->second = true;
    ++duplicates_;
  }

  auto waiting = pending_.find(correlation_id);
  if (waiting == pending_.end()) return;
  for (const Op& op : waiting->second) out.push_back({tag, op.kind, op.start_ns, op.end_ns, op.stream_id});
  pending_count_ -= waiting->second.size();
  pending_.erase(waiting);
  // Its id stays in pending_order_ and is skipped when it reaches the front.
}

void CorrelationMatcher::on_op(uint32_t correlation_id, OpKind kind, uint64_t start_ns,
                               uint64_t end_ns, std::vector<Completed>& out, uint32_t stream_id) {
  if (auto known = tags_.find(correlation_id); known != tags_.end()) {
    out.push_back({known->second, kind, start_ns, end_ns, stream_id});
    return;
  }

  auto [slot, inserted] = pending_.try_emplace(correlation_id);
  slot->second.push_back({kind, start_ns, end_ns, stream_id});
  ++pending_count_;
  if (!inserted) return;

  pending_order_.push_back(correlation_id);
  // Bound by ids, oldest first. An id that was matched meanwhile is no longer in pending_ (or is
  // there again as a newer entry further back in the order only if the id was reused, which the
  // 32-bit counter does not do within a window).
  while (pending_order_.size() > window_) {
    uint32_t oldest = pending_order_.front();
    pending_order_.pop_front();
    if (auto stale = pending_.find(oldest); stale != pending_.end()) {
      untagged_dropped_ += stale->second.size();
      pending_count_ -= stale->second.size();
      pending_.erase(stale);
    }
  }
}

void CorrelationMatcher::claim(uint32_t correlation_id) {
  const bool tagged = tags_.count(correlation_id) != 0;
  auto [it, inserted] = claimed_.try_emplace(correlation_id, tagged);
  if (!inserted) {
    // Another op of the same call (a kernel launch produces one; count the call once).
    if (tagged && !it->second) {
      it->second = true;
      ++duplicates_;
    }
    return;
  }
  if (tagged) ++duplicates_;
  claimed_order_.push_back(correlation_id);
  while (claimed_order_.size() > window_) {
    claimed_.erase(claimed_order_.front());
    claimed_order_.pop_front();
  }
}

}  // namespace vgpu::cupti
