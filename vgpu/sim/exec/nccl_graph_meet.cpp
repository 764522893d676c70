// Replays of captured NCCL collectives meeting within a process: see nccl_graph_meet.h.
#include "sim/exec/nccl_graph_meet.h"

#include <algorithm>

#include "common/log.h"
#include "sim/exec/stream.h"

namespace vgpu {

namespace {

// Pending meetings kept at most: one whose ranks never all replay (a graph replayed on some
// ranks only) is dropped past this, oldest first, once no rank is held in it.
constexpr size_t kMaxPending = 4096;

// The calling thread's held ranks (their meetings' keys) and the graph launch it is in, if any.
thread_local std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> t_held;
thread_local std::vector<NcclGraphMeetings::Across> t_across;  // met here, to meet other processes
thread_local bool t_launching = false;
thread_local CUstream t_launch_stream = nullptr;

}  // namespace

NcclGraphMeetings::GraphLaunchMark::GraphLaunchMark(CUstream stream) {
  t_launching = true;
  t_launch_stream = stream;
}
NcclGraphMeetings::GraphLaunchMark::~GraphLaunchMark() { t_launching = false; }

uint64_t NcclGraphMeetings::next_index(uint64_t comm, int rank) {
  std::lock_guard l(mu_);
  return captured_[{comm, rank}]++;
}

decltype(Work::on_meet) NcclGraphMeetings::hook(const Node& node) {
  if (node.meeting < 2 && !node.across) return {};
  return [this, node](uint64_t arrival, CUstream stream, Work::PlaceRest rest) {
    return arrive(node, arrival, stream, std::move(rest));
  };
}

Work::Meeting NcclGraphMeetings::arrive(const Node& node, uint64_t arrival, CUstream stream, Work::PlaceRest rest) {
  Work::Meeting m;
  {
    std::lock_guard l(mu_);
    const Key key{node.comm, node.index, replays_[{node.comm, node.index, node.rank}]++};
    Pending& p = pending_[key];
    p.arrivals.push_back(arrival);
    if (node.across) p.members.emplace_back(node.rank, node.gpu);  // posted across processes
    if (static_cast<int>(p.arrivals.size()) < node.meeting) {
      p.held.push_back(Held{node.rank, stream, std::this_thread::get_id(), std::move(rest)});
      t_held.push_back(key);
      m.held = true;
      log::debug("sim nccl: rank {} of comm {:x}: replay {} of captured collective {} held until its other ranks' "
                 "replays", node.rank, node.comm, std::get<2>(key), node.index);
    } else if (node.across) {
      // Every local rank arrived; the other processes' ranks are met outside the streams' lock.
      Across a;
      a.comm = node.comm;
      a.nranks = node.nranks;
      for (Held& h : p.held) a.rests.push_back(std::move(h.rest));
      a.rests.push_back(std::move(rest));
      a.members = std::move(p.members);
      a.arrivals = std::move(p.arrivals);
      pending_.erase(key);
      t_across.push_back(std::move(a));
      m.held = true;
    } else {
      m.arrivals = std::move(p.arrivals);
      for (Held& h : p.held) m.release.push_back(std::move(h.rest));
      pending_.erase(key);
    }
    for (auto it = pending_.begin(); pending_.size() > kMaxPending && it != pending_.end();)
      it = it->second.held.empty() ? pending_.erase(it) : std::next(it);
  }
  if (m.held) arm_();
  return m;
}

std::vector<NcclGraphMeetings::Across> NcclGraphMeetings::take_across() {
  std::vector<Across> out;
  out.swap(t_across);
  return out;
}

void NcclGraphMeetings::flush_thread(StreamManager& streams) {
  if (t_held.empty()) return;
  std::vector<std::pair<Work::PlaceRest, std::vector<uint64_t>>> alone;
  std::vector<Key> kept;
  {
    std::lock_guard l(mu_);
    const std::thread::id self = std::this_thread::get_id();
    for (const Key& key : t_held) {
      const auto it = pending_.find(key);
      if (it == pending_.end()) continue;  // met since
      std::vector<Held>& held = it->second.held;
      bool keep = false;
      for (auto h = held.begin(); h != held.end();) {
        if (h->thread != self) {
          ++h;
        } else if (t_launching && h->stream != t_launch_stream) {
          keep = true;  // the thread launches another rank's graph: perhaps the one this waits for
          ++h;
        } else {
          log::debug("sim nccl: rank {} of comm {:x}: a held replay of captured collective {} placed on its own (its "
                     "other ranks had not replayed it before its thread's next driver call)",
                     h->rank, std::get<0>(key), std::get<1>(key));
          alone.emplace_back(std::move(h->rest), it->second.arrivals);
          h = held.erase(h);
        }
      }
      if (keep) kept.push_back(key);
    }
    t_held = std::move(kept);
  }
  if (!t_held.empty()) arm_();
  for (auto& [rest, arrivals] : alone) streams.place_rest(rest, arrivals);
}

}  // namespace vgpu
