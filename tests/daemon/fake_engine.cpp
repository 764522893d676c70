#include "fake_engine.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace simcore::testing {

void FakeEngine::set_timeline_padding(size_t bytes) {
  std::lock_guard lk(mu_);
  padding_ = bytes;
}

EventId FakeEngine::add(Time not_before, const std::vector<EventId>& after, Time duration,
                        const std::string& label) {
  std::lock_guard lk(mu_);
  Time start = not_before;
  for (EventId a : after) {
    if (a == kNoEvent || a > events_.size()) return kNoEvent;
    start = std::max(start, events_[a - 1].finish);
  }
  events_.push_back({start, start + duration});
  labels_.push_back(label);
  cv_.notify_all();
  return events_.size();
}

EventId FakeEngine::add_flow(const FlowSpec& f) {
  return add(f.not_before, f.after, flow_duration(f.bytes), f.label);
}

EventId FakeEngine::add_task(const TaskSpec& t) {
  if (t.duration < 0) return kNoEvent;
  return add(t.not_before, t.after, t.duration, t.label);
}

std::optional<Interval> FakeEngine::query(EventId id) const {
  std::lock_guard lk(mu_);
  if (id == kNoEvent || id > events_.size()) return std::nullopt;
  return events_[id - 1];
}

bool FakeEngine::final_locked(EventId id) const {
  if (id == kNoEvent || id > events_.size()) return false;
  Time floor = std::numeric_limits<Time>::infinity();
  for (const auto& [rank, r] : ranks_) {
    const Time waiting = r.waiting_on ? events_[r.waiting_on - 1].finish : r.floor;
    floor = std::min(floor, std::max(r.floor, waiting));
  }
  return events_[id - 1].finish <= floor;
}

bool FakeEngine::is_final(EventId id) const {
  std::lock_guard lk(mu_);
  return final_locked(id);
}

void FakeEngine::register_rank(int rank) {
  std::lock_guard lk(mu_);
  ranks_.emplace(rank, Rank{});
}

void FakeEngine::set_rank_floor(int rank, Time t) {
  std::lock_guard lk(mu_);
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) it->second.floor = std::max(it->second.floor, t);
  cv_.notify_all();
}

void FakeEngine::unregister_rank(int rank) {
  std::lock_guard lk(mu_);
  ranks_.erase(rank);
  cv_.notify_all();
}

std::optional<Interval> FakeEngine::wait_final(EventId id) {
  std::unique_lock lk(mu_);
  if (id == kNoEvent || id > events_.size()) return std::nullopt;
  cv_.wait(lk, [&] { return shut_down_ || final_locked(id); });
  if (!final_locked(id)) return std::nullopt;
  return events_[id - 1];
}

std::optional<Interval> FakeEngine::wait_final_for_rank(EventId id, int rank) {
  std::unique_lock lk(mu_);
  if (id == kNoEvent || id > events_.size()) return std::nullopt;
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) it->second.waiting_on = id;
  cv_.notify_all();  // this rank's promise moved: others' waits may be final now
  cv_.wait(lk, [&] { return shut_down_ || final_locked(id); });
  const bool final = final_locked(id);
  it = ranks_.find(rank);  // it may have been unregistered meanwhile
  if (it != ranks_.end()) {
    it->second.waiting_on = kNoEvent;
    if (final) it->second.floor = std::max(it->second.floor, events_[id - 1].finish);
  }
  cv_.notify_all();
  if (!final) return std::nullopt;
  return events_[id - 1];
}

void FakeEngine::shutdown() {
  std::lock_guard lk(mu_);
  shut_down_ = true;
  cv_.notify_all();
}

std::string FakeEngine::timeline_json() const {
  std::lock_guard lk(mu_);
  std::string out = "{\"traceEvents\":[";
  for (size_t i = 0; i < events_.size(); ++i)
    out += fmt::format("{}{{\"name\":\"{}\",\"ph\":\"X\",\"ts\":{},\"dur\":{}}}", i ? "," : "",
                       labels_[i], events_[i].start * 1e6,
                       (events_[i].finish - events_[i].start) * 1e6);
  out += "],\"pad\":\"";
  // Filler with a period (251) prime to any page size, so a page stitched in the wrong place
  // shows.
  std::string period;
  for (int i = 0; i < 251; ++i) period.push_back(static_cast<char>('a' + (i * 7) % 26));
  out.reserve(out.size() + padding_ + 2);
  for (size_t left = padding_; left > 0;) {
    const size_t n = std::min(left, period.size());
    out.append(period, 0, n);
    left -= n;
  }
  out += "\"}";
  return out;
}

std::set<int> FakeEngine::registered_ranks() const {
  std::lock_guard lk(mu_);
  std::set<int> s;
  for (const auto& [rank, r] : ranks_) s.insert(rank);
  return s;
}

bool FakeEngine::was_shut_down() const {
  std::lock_guard lk(mu_);
  return shut_down_;
}

}  // namespace simcore::testing
