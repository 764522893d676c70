// Send/recv kernels meeting their peers on the sim backend (nccl_p2p.h says how and why).
#include "sim/exec/nccl_p2p.h"

#include <chrono>
#include <vector>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/exec/stream.h"
#include "simcore/engine.h"

namespace vgpu {

NcclP2p::NcclP2p(DriverState& driver, std::string dir) : driver_(driver), exchange_(std::move(dir)) {}

bool NcclP2p::matched(const Launch& l) {
  return l.nranks == 2 && l.rank >= 0 && l.rank < 2 && (l.sends || l.receives);
}

bool NcclP2p::peer_on_this_thread(const Launch& l) const {
  if (l.thread_ranks > 1 || (l.thread_ranks == 0 && !l.one_gpu)) return true;
  const auto it = thread_of_.find({l.comm, 1 - l.rank});
  return it != thread_of_.end() && it->second == std::this_thread::get_id();
}

bool NcclP2p::may_wait_elsewhere(const Launch& l) {
  return l.thread_ranks == 1 || (l.thread_ranks == 0 && l.one_gpu);
}

void NcclP2p::place(Held h, uint64_t send_arrival) {
  StreamManager& streams = driver_.streams();
  h.kernel.also_after.push_back(h.arrival);
  if (send_arrival != 0) h.kernel.also_after.push_back(send_arrival);
  // Right after its own arrival when nothing came behind it since (the group pattern: NCCL
  // launches every kernel of the group before it touches the streams again); else at the end.
  if (streams.append_after_last(h.arrival, h.kernel)) return;
  log::debug("sim nccl: a held receive goes behind the work its stream got meanwhile");
  if (streams.submit(h.stream, std::move(h.kernel), h.per_thread) != CUDA_SUCCESS)
    log::debug("sim nccl: a held receive's stream is gone");
}

CUresult NcclP2p::submit(CUstream stream, bool per_thread, const Launch& l, Work k) {
  StreamManager& streams = driver_.streams();
  const int peer = 1 - l.rank;

  // Arrival: where this rank's kernel would start on its own.
  uint64_t arrival = 0;
  Work a;
  a.kind = Work::Kind::other;
  a.label = "nccl p2p arrival";
  a.on_timeline = [&arrival](uint64_t e) { arrival = e; };
  if (CUresult r = streams.submit(stream, std::move(a), per_thread); r != CUDA_SUCCESS) return r;
  if (arrival == 0) return streams.submit(stream, std::move(k), per_thread);
  simcore::Engine& engine = driver_.engine();
  double arrival_t = 0;
  if (!l.peer_here)
    if (auto at = engine.query(arrival)) arrival_t = at->start;

  uint64_t send_k = 0, receive_k = 0;
  std::vector<std::pair<Held, uint64_t>> to_place;  // receives held for this send
  uint64_t send_arrival = 0;  // the matching send's arrival op (this process)
  enum class Then { place, hold, wait_here, wait_elsewhere } then = Then::place;
  log::debug("sim nccl: rank {}/2 of comm {:x}: p2p launch (sends {}, receives {}, peer here {}, thread's group "
             "names {} rank(s))", l.rank, l.comm, l.sends, l.receives, l.peer_here, l.thread_ranks);
  {
    std::lock_guard lock(mu_);
    const bool same_thread = peer_on_this_thread(l);
    thread_of_[{l.comm, l.rank}] = std::this_thread::get_id();
    if (l.sends) {
      send_k = sends_[{l.comm, l.rank, peer}]++;
      const Key key{l.comm, l.rank, peer, send_k};
      if (l.peer_here) {
        if (auto it = held_.find(key); it != held_.end()) {
          to_place.emplace_back(std::move(it->second), arrival);
          held_.erase(it);
        } else {
          arrivals_[key] = arrival;
          while (arrivals_.size() > kMaxKept) arrivals_.erase(arrivals_.begin());
          posted_.notify_all();
        }
      }
    }
    if (l.receives) {
      receive_k = receives_[{l.comm, peer, l.rank}]++;
      const Key want{l.comm, peer, l.rank, receive_k};
      if (!l.peer_here) {
        then = Then::wait_elsewhere;
      } else if (auto it = arrivals_.find(want); it != arrivals_.end()) {
        send_arrival = it->second;
        arrivals_.erase(it);
      } else if (same_thread) {
        then = Then::hold;
      } else {
        then = Then::wait_here;
      }
    }
  }
  // Across processes the send posts its arrival's virtual time (its op lives in its own engine).
  if (l.sends && !l.peer_here && !exchange_.post_arrival(l.comm, l.rank, peer, send_k, arrival_t))
    log::once(log::Level::warn, "sim-nccl-p2p-post",
              "sim nccl: a send's arrival could not be posted: its receive in another process starts on its own");
  for (auto& [h, e] : to_place) place(std::move(h), e);

  const Key want{l.comm, peer, l.rank, receive_k};
  if (then == Then::hold) {
    std::vector<Held> spill;
    {
      std::lock_guard lock(mu_);
      held_[want] = Held{stream, per_thread, arrival, std::move(k)};
      while (held_.size() > kMaxKept) {  // a send that never came: placed on its own after all
        spill.push_back(std::move(held_.begin()->second));
        held_.erase(held_.begin());
      }
    }
    for (Held& h : spill) place(std::move(h), 0);
    log::debug("sim nccl: rank {}/2 of comm {:x}: receive {} held for the send this thread launches", l.rank,
               l.comm, receive_k);
    return CUDA_SUCCESS;
  }
  if (then == Then::wait_here) {
    // Another thread of this process drives the peer: wait for its send's launch.
    std::unique_lock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeoutS);
    const bool came = posted_.wait_until(lock, deadline, [&] { return arrivals_.count(want) != 0; });
    if (came) {
      send_arrival = arrivals_[want];
      arrivals_.erase(want);
    } else {
      log::warn("sim nccl: rank {}/2 of comm {:x}: no send for receive {} within {:.0f} s: it starts on its own",
                l.rank, l.comm, receive_k, kTimeoutS);
    }
  }
  if (then == Then::wait_elsewhere) {
    // The peer is another process's: its send's arrival comes through the job's folder. A thread
    // whose group drives several ranks only looks (see the header).
    double t = 0;
    const double wait_s = may_wait_elsewhere(l) ? kTimeoutS : 0;
    if (exchange_.take_arrival(l.comm, peer, l.rank, receive_k, wait_s, &t)) {
      if (t > arrival_t) {
        simcore::TaskSpec gate;
        gate.gpu = l.gpu;
        gate.not_before = t;
        gate.label = "nccl p2p: the send arrived";
        send_arrival = engine.add_task(gate);
      }
    } else if (wait_s > 0) {
      log::warn("sim nccl: rank {}/2 of comm {:x}: no send for receive {} within {:.0f} s: it starts on its own",
                l.rank, l.comm, receive_k, kTimeoutS);
    } else {
      log::debug("sim nccl: rank {}/2 of comm {:x}: receive {}'s send not posted yet: it starts on its own", l.rank,
                 l.comm, receive_k);
    }
  }
  k.also_after.push_back(arrival);
  if (send_arrival != 0) k.also_after.push_back(send_arrival);
  return streams.submit(stream, std::move(k), per_thread);
}

}  // namespace vgpu
