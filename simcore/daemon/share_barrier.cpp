// Held ShareCollectives requests (share_barrier.h says why and how long).
#include "share_barrier.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/log.h"

namespace simcore::daemon {

using namespace wire;

ShareBarrier::ShareBarrier(Engine& engine, const uint32_t* registered, double timeout_s)
    : engine_(engine), registered_(registered), timeout_s_(timeout_s) {}

std::optional<Time> ShareBarrier::latest(const std::vector<EventId>& ids) const {
  std::optional<Time> out;
  for (EventId id : ids)
    if (const std::optional<Interval> iv = engine_.query(id)) out = std::max(out.value_or(iv->finish), iv->finish);
  return out;
}

bool ShareBarrier::is_done(const Key& key) const {
  const auto it = done_.find(key.first);
  return it != done_.end() && it->second.first.contains(key.second);
}

void ShareBarrier::submit(uint64_t client, uint64_t request, const ShareCollectives& m, bool may_floor,
                          Clock::time_point now) {
  const uint64_t handle = next_held_++;
  Held h{client, request, {}, 0};
  h.slots.resize(m.items.size());
  std::vector<Key> covered_now;
  for (size_t i = 0; i < m.items.size(); ++i) {
    const SharedItem& it = m.items[i];
    Slot& s = h.slots[i];
    std::vector<EventId> ids(it.flows.size(), kNoEvent);
    engine_.add_flows(it.flows, ids);
    std::erase(ids, kNoEvent);
    const Key key{it.comm, it.seq};
    if (it.nranks == 0 || is_done(key)) {
      // Nobody else to wait for (a received message), or the other ranks were answered already:
      // answered from its own flows once the request's keys are (complete()).
      s.ids = std::move(ids);
      s.covered = static_cast<uint32_t>(it.ranks.size());
      continue;
    }
    auto [at, fresh] = keys_.try_emplace(key);
    KeyState& k = at->second;
    if (fresh) {
      k.nranks = it.nranks;
      k.covered.assign(it.nranks, false);
      k.deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
      if (const auto a = absent_.find(it.comm); a != absent_.end())
        for (int32_t r : a->second)
          if (r >= 0 && static_cast<uint32_t>(r) < k.nranks) {
            k.covered[r] = true;
            ++k.count;
          }
    }
    for (int32_t r : it.ranks) {
      if (r < 0 || static_cast<uint32_t>(r) >= k.covered.size()) continue;
      ++k.placed;
      if (!k.covered[r]) {
        k.covered[r] = true;
        ++k.count;
      }
      if (const auto a = absent_.find(it.comm); a != absent_.end()) a->second.erase(r);  // it is back
    }
    k.ids.insert(k.ids.end(), ids.begin(), ids.end());
    k.waiters.push_back(handle);
    s.key = key;
    ++h.open;
    if (k.count >= k.nranks) covered_now.push_back(key);
  }
  // Ids the connection will not name again (the NCCL plugin's transfers, read already).
  if (!m.released.empty()) engine_.release(m.released);
  // The promise after the placements: they are this process's, at or above it (nccl_shared_fabric.h).
  if (may_floor && m.floor) engine_.set_rank_floor(m.rank, *m.floor);
  auto [held, added] = held_.emplace(handle, std::move(h));
  if (held->second.open == 0) complete(handle, held->second);
  for (const Key& key : covered_now)
    if (keys_.contains(key)) close_key(key, false);
}

void ShareBarrier::close_key(const Key& key, bool timed_out) {
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  KeyState k = std::move(it->second);
  keys_.erase(it);
  const std::optional<Time> finish = latest(k.ids);
  engine_.release(k.ids);
  if (timed_out) {
    std::set<int32_t>& absent = absent_[key.first];
    std::string missing;
    for (uint32_t r = 0; r < k.nranks; ++r)
      if (!k.covered[r]) {
        absent.insert(static_cast<int32_t>(r));
        if (missing.size() < 200) missing += fmt::format("{}{}", missing.empty() ? "" : " ", r);
      }
    vgpu::log::warn("vgpud: collective {} of comm {:x}: {} of {} ranks placed their flows within {} s; answered "
                    "from those (missing ranks {}; not waited for again on this comm)",
                    key.second, key.first, k.placed, k.nranks, timeout_s_, missing);
  }
  auto& [seqs, order] = done_[key.first];
  if (seqs.insert(key.second).second) order.push_back(key.second);
  while (order.size() > kDoneKept) {
    seqs.erase(order.front());
    order.pop_front();
  }
  for (uint64_t handle : k.waiters) {
    auto h = held_.find(handle);
    if (h == held_.end()) continue;
    for (Slot& s : h->second.slots)
      if (!s.answered && s.key == key) {
        s.finish = finish;
        s.covered = k.placed;
        s.answered = true;
        if (--h->second.open == 0) complete(handle, h->second);
      }
  }
}

void ShareBarrier::complete(uint64_t handle, Held& h) {
  for (Slot& s : h.slots)
    if (!s.answered) {
      s.finish = latest(s.ids);
      engine_.release(s.ids);
      s.ids.clear();
      s.answered = true;
    }
  ready_.push_back(handle);
}

std::vector<ShareBarrier::Ready> ShareBarrier::take(Clock::time_point now) {
  std::vector<Key> late;
  for (const auto& [key, k] : keys_)
    if (k.deadline <= now) late.push_back(key);
  for (const Key& key : late) close_key(key, true);
  std::vector<Ready> out;
  for (uint64_t handle : ready_) {
    auto h = held_.find(handle);
    if (h == held_.end()) continue;
    Ready r{h->second.client, h->second.request, {}};
    r.reply.registered = registered_ != nullptr ? *registered_ : 0;
    r.reply.answers.reserve(h->second.slots.size());
    for (const Slot& s : h->second.slots) r.reply.answers.push_back(SharedAnswer{s.finish, s.covered});
    out.push_back(std::move(r));
    held_.erase(h);
  }
  ready_.clear();
  return out;
}

std::optional<ShareBarrier::Clock::time_point> ShareBarrier::next_deadline() const {
  std::optional<Clock::time_point> out;
  for (const auto& [key, k] : keys_) out = std::min(out.value_or(k.deadline), k.deadline);
  return out;
}

}  // namespace simcore::daemon
