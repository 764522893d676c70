// Send/recv kernels meeting their peers on the sim backend (nccl_p2p.h says how and why).
#include "sim/exec/nccl_p2p.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/core/thread_state.h"
#include "sim/core/virtual_clock.h"
#include "sim/exec/stream.h"
#include "simcore/engine.h"

namespace vgpu {
namespace {

const char* side_name(bool receive) { return receive ? "receive" : "send"; }

}  // namespace

NcclP2p::NcclP2p(DriverState& driver, NcclLinkShare* links, std::string dir)
    : driver_(driver), links_(links), exchange_(std::move(dir)) {}

bool NcclP2p::matched(const Launch& l) {
  if (l.rank < 0 || l.rank >= l.nranks || (l.send_to.empty() && l.receive_from.empty())) return false;
  const auto valid = [&](const std::vector<int>& peers) {
    return std::all_of(peers.begin(), peers.end(), [&](int p) { return p >= 0 && p < l.nranks && p != l.rank; });
  };
  return valid(l.send_to) && valid(l.receive_from);
}

bool NcclP2p::peer_on_this_thread(const Launch& l) const {
  if (l.thread_ranks > 1 || (l.thread_ranks == 0 && !l.one_gpu)) return true;
  const auto mine = [&](int peer) {
    const auto it = thread_of_.find({l.comm, peer});
    return it != thread_of_.end() && it->second == std::this_thread::get_id();
  };
  return std::any_of(l.send_to.begin(), l.send_to.end(), mine) ||
         std::any_of(l.receive_from.begin(), l.receive_from.end(), mine);
}

bool NcclP2p::may_wait_elsewhere(const Launch& l) {
  return l.thread_ranks == 1 || (l.thread_ranks == 0 && l.one_gpu);
}

void NcclP2p::post(const Key& key, uint64_t event, std::vector<std::shared_ptr<Held>>* ready) {
  const auto it = held_.find(key);
  if (it == held_.end()) {
    arrivals_[key] = event;
    while (arrivals_.size() > kMaxKept) arrivals_.erase(arrivals_.begin());
    posted_.notify_all();
    return;
  }
  std::shared_ptr<Held> h = it->second;  // one launch waits for any one arrival
  held_.erase(it);
  h->kernel.also_after.push_back(event);
  if (--h->missing == 0) ready->push_back(std::move(h));
}

void NcclP2p::place(Held& h) { place_kernel(h.stream, h.per_thread, h.arrival, true, std::move(h.kernel), h.launch); }

CUresult NcclP2p::place_kernel(CUstream stream, bool per_thread, uint64_t arrival, bool held, Work k, const Launch& l) {
  const bool transfers = links_ != nullptr && arrival != 0 && !l.receive_from.empty() &&
                         l.receive_gpus.size() == l.receive_from.size();
  const std::vector<uint64_t> after = transfers ? k.also_after : std::vector<uint64_t>{};
  const double seconds = k.duration_s;
  uint64_t kernel = 0;
  if (transfers) {
    k.on_timeline = [&kernel, then = std::move(k.on_timeline)](uint64_t e) {
      kernel = e;
      if (then) then(e);
    };
  }
  StreamManager& streams = driver_.streams();
  CUresult rc = CUDA_SUCCESS;
  if (held)
    place_alone(stream, per_thread, arrival, std::move(k));
  else
    rc = streams.submit(stream, std::move(k), per_thread);
  if (!transfers || kernel == 0) return rc;
  // Each received message from its sender's GPU, after what the kernel waits for.
  NcclLinkShare::Start start;
  start.after = after;
  start.not_before = driver_.ranks().lowest_floor(vclock::now());
  start.start_at_most = start.not_before;
  start.gpu = l.gpu;
  const int from[] = {0};
  std::vector<uint64_t> end_after{kernel};
  std::vector<simcore::CollectiveCall> messages;  // those placed here, for the shared engine
  for (size_t i = 0; i < l.receive_from.size(); ++i) {
    simcore::CollectiveCall call;
    call.op = simcore::CollectiveOp::send_recv;
    call.bytes = i < l.receive_sizes.size() ? l.receive_sizes[i] : l.receive_bytes;
    call.gpus = {l.receive_gpus[i], l.gpu};
    if (call.gpus[0] < 0 || call.gpus[0] == l.gpu ||
        simcore::estimate_collective(driver_.cluster(), call).seconds > seconds)
      continue;  // the kernel is not timed for this pair: its transfer could only lengthen it
    const std::vector<uint64_t> joined = links_->place(driver_.engine(), {call}, from, start);
    end_after.insert(end_after.end(), joined.begin(), joined.end());
    if (!joined.empty()) messages.push_back(std::move(call));
  }
  if (end_after.size() > 1 && !l.peer_here && l.start >= 0 && share_ &&
      share_(messages, l, kernel, stream, per_thread, arrival, end_after))
    return rc;
  if (end_after.size() > 1) {
    Work end;
    end.kind = Work::Kind::other;
    end.label = "nccl p2p end";
    end.also_after = std::move(end_after);
    streams.append_after_last(kernel, std::move(end));
  }
  return rc;
}

void NcclP2p::place_alone(CUstream stream, bool per_thread, uint64_t arrival, Work k) {
  StreamManager& streams = driver_.streams();
  // Right after its own arrival when nothing came behind it since (the group pattern: NCCL
  // launches every kernel of the group before it touches the streams again; a kernel held for
  // its tasks is placed before its thread's next driver call); else at the end.
  if (arrival != 0 && streams.append_after_last(arrival, k)) return;
  log::debug("sim nccl: a held send/recv kernel goes behind the work its stream got meanwhile");
  if (streams.submit(stream, std::move(k), per_thread) != CUDA_SUCCESS)
    log::debug("sim nccl: a held send/recv kernel's stream is gone");
}

CUresult submit_arrival(StreamManager& streams, CUstream stream, bool per_thread, const char* label,
                        uint64_t* arrival) {
  *arrival = 0;
  Work a;
  a.kind = Work::Kind::other;
  a.label = label;
  a.on_timeline = [arrival](uint64_t e) { *arrival = e; };
  return streams.submit(stream, std::move(a), per_thread);
}

CUresult NcclP2p::arrive(CUstream stream, bool per_thread, uint64_t* arrival) {
  return submit_arrival(driver_.streams(), stream, per_thread, "nccl p2p arrival", arrival);
}

void NcclP2p::count(const Launch& l, std::vector<Key>* posts, std::vector<Key>* needs) {
  for (size_t i = 0; i < l.send_to.size(); ++i) {
    const int peer = l.send_to[i];
    const uint64_t bytes = i < l.send_sizes.size() ? l.send_sizes[i] : l.send_bytes;
    const uint64_t n = sends_[{l.comm, l.rank, peer}]++;
    posts->emplace_back(l.comm, l.rank, peer, n, false);
    if (bytes > kCreditBytes) needs->emplace_back(l.comm, l.rank, peer, n, true);
  }
  for (size_t i = 0; i < l.receive_from.size(); ++i) {
    const int peer = l.receive_from[i];
    const uint64_t bytes = i < l.receive_sizes.size() ? l.receive_sizes[i] : l.receive_bytes;
    const uint64_t n = receives_[{l.comm, peer, l.rank}]++;
    needs->emplace_back(l.comm, peer, l.rank, n, false);
    if (bytes > kCreditBytes) posts->emplace_back(l.comm, peer, l.rank, n, true);
  }
}

void NcclP2p::post_late(const Launch& l, uint64_t arrival) {
  if (arrival == 0 || !matched(l)) return;
  std::vector<Key> posts, needs;
  std::vector<std::shared_ptr<Held>> ready;
  {
    std::lock_guard lock(mu_);
    count(l, &posts, &needs);  // its needs go unmet: the kernel is placed already
    if (l.peer_here)
      for (const Key& key : posts) post(key, arrival, &ready);
  }
  for (auto& h : ready) place(*h);
  if (l.peer_here) return;
  const auto at = driver_.engine().query(arrival);
  for (const Key& key : posts) {
    const auto& [comm, src, dst, n, receive] = key;
    exchange_.post_arrival(comm, src, dst, n, receive, at ? at->start : 0);
  }
}

CUresult NcclP2p::submit(CUstream stream, bool per_thread, const Launch& l, Work k) {
  uint64_t arrival = 0;
  if (CUresult r = arrive(stream, per_thread, &arrival); r != CUDA_SUCCESS) return r;
  return meet(stream, per_thread, l, std::move(k), arrival, false);
}

CUresult NcclP2p::meet(CUstream stream, bool per_thread, const Launch& l, Work k, uint64_t arrival, bool held) {
  StreamManager& streams = driver_.streams();
  if (arrival == 0) {
    if (!held) return streams.submit(stream, std::move(k), per_thread);
    place_alone(stream, per_thread, arrival, std::move(k));
    return CUDA_SUCCESS;
  }
  k.also_after.push_back(arrival);
  simcore::Engine& engine = driver_.engine();
  double arrival_t = 0;
  if (!l.peer_here)
    if (auto at = engine.query(arrival)) arrival_t = at->start;

  std::vector<Key> posts, needs;  // this launch's arrivals, and the peer's it waits for
  std::vector<std::shared_ptr<Held>> ready;  // held kernels this launch's arrivals complete
  std::vector<Key> missing;
  std::vector<std::shared_ptr<Held>> spill;
  enum class Then { place, hold, wait_here, wait_elsewhere } then = Then::place;
  {
    std::lock_guard lock(mu_);
    const bool same_thread = peer_on_this_thread(l);
    thread_of_[{l.comm, l.rank}] = std::this_thread::get_id();
    count(l, &posts, &needs);
    if (l.peer_here) {
      for (const Key& key : posts) post(key, arrival, &ready);
      for (const Key& key : needs) {
        if (auto it = arrivals_.find(key); it != arrivals_.end()) {
          k.also_after.push_back(it->second);
          arrivals_.erase(it);
        } else {
          missing.push_back(key);
        }
      }
      if (!missing.empty()) then = same_thread ? Then::hold : Then::wait_here;
      if (then == Then::hold) {
        auto h = std::make_shared<Held>(Held{stream, per_thread, arrival, std::move(k), static_cast<int>(missing.size()), l});
        for (const Key& key : missing) held_.emplace(key, h);
        while (held_.size() > kMaxKept) {  // an arrival that never came: placed without it after all
          std::shared_ptr<Held> old = held_.begin()->second;
          held_.erase(held_.begin());
          if (--old->missing == 0) spill.push_back(std::move(old));
        }
      }
    } else if (!needs.empty()) {
      then = Then::wait_elsewhere;
    }
  }
  for (auto& h : ready) place(*h);
  for (auto& h : spill) place(*h);
  if (then == Then::hold) {
    log::debug("sim nccl: rank {}/{} of comm {:x}: its send/recv kernel held for {} arrival(s) this thread posts "
               "later", l.rank, l.nranks, l.comm, missing.size());
    return CUDA_SUCCESS;
  }
  if (then == Then::wait_here) {
    // Another thread of this process drives the peer: wait for its launch.
    std::unique_lock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeoutS);
    for (const Key& key : missing) {
      if (posted_.wait_until(lock, deadline, [&] { return arrivals_.count(key) != 0; })) {
        k.also_after.push_back(arrivals_[key]);
        arrivals_.erase(key);
      } else {
        log::warn("sim nccl: rank {}/{} of comm {:x}: rank {}'s {} {} did not arrive within {:.0f} s: this "
                  "kernel starts without it", l.rank, l.nranks, l.comm,
                  std::get<4>(key) ? std::get<2>(key) : std::get<1>(key), side_name(std::get<4>(key)),
                  std::get<3>(key), kTimeoutS);
      }
    }
  }
  double l_start = -1;  // the kernel's start as the arrivals say (peers in other processes)
  if (!l.peer_here) {
    // The peer is another process's: the arrivals' virtual times go through the job's folder
    // (each op lives in its own process's engine). A thread whose group drives several ranks
    // only looks (see the header).
    for (const Key& key : posts) {
      const auto& [comm, src, dst, n, receive] = key;
      if (!exchange_.post_arrival(comm, src, dst, n, receive, arrival_t))
        log::once(log::Level::warn, "sim-nccl-p2p-post",
                  "sim nccl: a send/recv arrival could not be posted: its peer in another process starts on its own");
    }
    const double wait_s = may_wait_elsewhere(l) ? kTimeoutS : 0;
    double latest = arrival_t;
    for (const Key& key : needs) {
      const auto& [comm, src, dst, n, receive] = key;
      double t = 0;
      if (exchange_.take_arrival(comm, src, dst, n, receive, wait_s, &t)) {
        latest = std::max(latest, t);
      } else if (wait_s > 0) {
        log::warn("sim nccl: rank {}/{} of comm {:x}: rank {}'s {} {} did not arrive within {:.0f} s: this kernel "
                  "starts without it", l.rank, l.nranks, l.comm, receive ? dst : src, side_name(receive), n, kTimeoutS);
      } else {
        log::debug("sim nccl: rank {}/{} of comm {:x}: rank {}'s {} {} not posted yet: this kernel starts without it",
                   l.rank, l.nranks, l.comm, receive ? dst : src, side_name(receive), n);
      }
    }
    l_start = latest;
    if (latest > arrival_t) {
      simcore::TaskSpec gate;
      gate.gpu = l.gpu;
      gate.not_before = latest;
      gate.label = "nccl p2p: the peer arrived";
      if (const simcore::EventId g = engine.add_task(gate); g != simcore::kNoEvent) k.also_after.push_back(g);
    }
  }
  if (l_start < 0) return place_kernel(stream, per_thread, arrival, held, std::move(k), l);
  Launch timed = l;
  timed.start = l_start;
  return place_kernel(stream, per_thread, arrival, held, std::move(k), timed);
}

}  // namespace vgpu
