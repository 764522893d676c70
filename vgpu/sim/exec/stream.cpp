// StreamManager: the one place that keeps stream order, cross-stream dependencies, the real
// execution of stream work and its virtual timeline.
//
// Real execution. Each stream keeps a queue of ops not yet completed. An op runs once the op
// before it on its stream is done and every op it waits on (events, the legacy default stream's
// implicit barriers) is done. In the common case (the stream is idle, nothing to wait for, not a
// host function) submit() runs the op inline on the caller's thread, with no thread hop. Else the
// op is queued and a driver worker runs it when it becomes ready: completions re-examine the
// streams that have queued work. Host functions always run on a worker, never on the caller.
// One mutex guards every queue; no work ever runs while it is held.
//
// Virtual time. Every op is one simcore event (a task on the stream's device and lane, or a flow
// for peer transfers), starting no earlier than the issuing thread's virtual clock plus the
// launch latency, after the stream's previous event and every event it waits on. Events keep
// the simcore id of their point in the stream; synchronization moves the calling thread's
// virtual clock to the finish of what it waited for. Since no op starts before its thread's
// clock, each thread's clock is its floor as a rank of the engine (sim/core/thread_state.h), which
// lets the engine reclaim what finished before every thread's clock.
#include "sim/exec/stream.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "common/settings.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/core/handle_table.h"
#include "sim/exec/activity_report.h"
#include "sim/exec/compute_beside_collectives.h"
#include "sim/exec/graph.h"
#include "sim/exec/stream_objects.h"
#include "sim/core/virtual_clock.h"
#include "sim/exec/worker_pool.h"
#include "sim/memory/memory.h"
#include "simcore/engine.h"
#include "timing/driver_call_cost.h"
#include "timing/stream_order.h"
#include "timing/thread_clock.h"

namespace vgpu {
namespace {

thread_local bool t_on_worker_fn = false;  // inside a host function: waiting would deadlock

// Ops a stream may have in flight before the next one waits (wait_for_queue_room): the order of
// a real driver's launch queue (pushbuffer), which fills after about a thousand launches.
constexpr size_t kLaunchQueueDepth = 1024;

const char* kind_name(Work::Kind k) {
  switch (k) {
    case Work::Kind::kernel: return "kernel";
    case Work::Kind::copy: return "memcpy";
    case Work::Kind::memset: return "memset";
    case Work::Kind::host_function: return "host function";
    case Work::Kind::wait: return "wait";
    case Work::Kind::other: break;
  }
  return "op";
}

}  // namespace

struct StreamManager::Impl {
  explicit Impl(DriverState& d) : driver(d) {}
  DriverState& driver;

  std::mutex mu;
  std::condition_variable cv;  // notified on every op completion
  HandleTable<Stream> streams;
  HandleTable<Event> events;
  struct CtxStreams {
    std::shared_ptr<Stream> legacy;
    std::vector<std::shared_ptr<Stream>> streams;  // user + per-thread, incl. draining destroyed
  };
  std::unordered_map<CUcontext, CtxStreams> by_ctx;                          // under mu
  std::map<std::pair<std::thread::id, CUcontext>, std::shared_ptr<Stream>> ptds;  // under mu
  std::unordered_map<Stream*, std::shared_ptr<Stream>> pending;  // streams with queued ops
  timing::StreamOrder<StreamLast> order;  // every stream's last op (under mu)
  std::atomic<unsigned long long> next_id{16};
  std::atomic<uint64_t> next_capture_id{1};
  ActivityReport activity{driver.engine(), driver.status()};  // the status region's view
  ComputeBesideCollectives beside{driver.engine(), settings::real(settings::Id::compute_beside_collective),
                                  settings::real(settings::Id::compute_beside_waiting_collective)};  // under mu
  std::atomic<bool> activity_due{false};  // a batch is due: flushed once mu is released
  WorkerPool pool;  // last: destroyed (joined) first

  simcore::Engine& engine() { return driver.engine(); }

  // ---- stream lookup -------------------------------------------------------------------

  std::shared_ptr<Stream> make_stream(CUcontext ctx, int device, Stream::Role role,
                                      unsigned flags, int priority) {
    auto s = std::make_shared<Stream>();
    s->handle = mint_handle<CUstream>(HandleKind::stream);
    s->ctx = ctx;
    s->device = device;
    s->role = role;
    s->flags = flags;
    s->priority = priority;
    s->id = next_id.fetch_add(1);
    s->lane = static_cast<int>(s->id);
    return s;
  }

  CUresult resolve(CUstream h, bool per_thread, std::shared_ptr<Stream>* out) {
    const timing::StreamArg arg = timing::stream_arg(h, per_thread);
    if (arg == timing::StreamArg::handle) {
      *out = streams.find(h);
      if (!*out) {
        log::warn("stream {} is not a live stream", static_cast<const void*>(h));
        return CUDA_ERROR_INVALID_HANDLE;
      }
      return CUDA_SUCCESS;
    }
    const bool want_ptds = arg == timing::StreamArg::per_thread;
    auto ctx = driver.contexts().current();
    if (!ctx) {
      log::warn("default stream used with no current context");
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    std::lock_guard lock(mu);
    CtxStreams& cs = by_ctx[ctx->handle()];
    if (!want_ptds) {
      if (!cs.legacy) cs.legacy = make_stream(ctx->handle(), ctx->device(), Stream::Role::legacy, 0, 0);
      *out = cs.legacy;
      return CUDA_SUCCESS;
    }
    auto& slot = ptds[{std::this_thread::get_id(), ctx->handle()}];
    if (!slot) {
      slot = make_stream(ctx->handle(), ctx->device(), Stream::Role::per_thread, 0, 0);
      cs.streams.push_back(slot);
    }
    *out = slot;
    return CUDA_SUCCESS;
  }

  // ---- dependencies and the virtual timeline (all under mu) ------------------------------

  static void add_dep(const std::shared_ptr<Op>& op, simcore::EventId vid,
                      std::vector<std::shared_ptr<Op>>& waits,
                      std::vector<simcore::EventId>& after) {
    if (op && !op->done) waits.push_back(op);
    if (vid != simcore::kNoEvent) after.push_back(vid);
  }

  // The last op of `s` (none yet: an empty one). Under mu.
  const StreamLast& last_of(const Stream& s) const {
    static const StreamLast kNone;
    if (s.destroyed) return s.last_when_destroyed;  // still draining: cuCtxSynchronize waits
    const auto* e = order.find(s.order_key());
    return e == nullptr ? kNone : e->last;
  }

  // What an op at the head of `s` waits for, by the stream order both backends share
  // (timing/stream_order.h): the previous op of the stream (virtual only; the queue orders the
  // real effects) and the default-stream barrier's ops of other streams.
  void stream_deps(const Stream& s, std::vector<std::shared_ptr<Op>>& waits,
                   std::vector<simcore::EventId>& after) {
    order.for_each_predecessor(s.order_key(), s.kind(), [&](const StreamLast& l, bool own) {
      if (!own) {
        add_dep(l.op, l.vid, waits, after);
      } else if (l.vid != simcore::kNoEvent) {
        after.push_back(l.vid);
      }
    });
  }

  simcore::EventId add_virtual(const Stream& s, const Work& w, std::vector<simcore::EventId> after,
                               double not_before) {
    std::string label = w.label.empty() ? kind_name(w.kind) : w.label;
    const int gpu = driver.global_gpu(s.device);  // the engine places work by the cluster's GPU
    const bool kernel = w.kind == Work::Kind::kernel && !w.transfer;
    // Kernels beside a collective's kernel slow down (compute_beside_collectives.h). A
    // collective's window starts where its stream's previous op ends (it is resident from then).
    double duration = std::max(0.0, w.duration_s), resident = not_before, carried = 0;
    bool remembered = true;
    if (kernel && beside.enabled()) {
      if (!w.collective) {
        duration = beside.kernel(gpu, after, not_before, duration, &remembered, &carried);
      } else if (const simcore::EventId prev = last_of(s).vid; prev != simcore::kNoEvent) {
        if (auto iv = engine().query(prev)) resident = std::max(resident, iv->finish);
      }
    }
    simcore::EventId id;
    if (w.transfer) {
      simcore::FlowSpec f;
      f.src_gpu = w.transfer->src_gpu;
      f.dst_gpu = w.transfer->dst_gpu;
      f.bytes = w.transfer->bytes;
      f.not_before = not_before;
      f.after = std::move(after);
      f.label = std::move(label);
      id = engine().add_flow(f);
    } else {
      simcore::TaskSpec t;
      t.gpu = gpu;
      t.lane = s.lane;
      t.duration = duration;
      t.not_before = not_before;
      t.after = std::move(after);
      t.label = std::move(label);
      t.carried = carried;
      id = engine().add_task(t);
    }
    if (id == simcore::kNoEvent) log::warn("stream op '{}': simulator refused it", w.label);
    if (kernel && beside.enabled() && id != simcore::kNoEvent) {
      if (w.collective)
        beside.collective_placed(gpu, id, resident);
      else if (!remembered)
        beside.kernel_placed(gpu, id);
    }
    if (w.kind == Work::Kind::kernel || w.kind == Work::Kind::copy || w.kind == Work::Kind::memset)
      if (activity.note(gpu, id, w.kind == Work::Kind::kernel))
        activity_due.store(true, std::memory_order_relaxed);
    return id;
  }

  // A real driver queues a bounded number of launches (about a thousand) and blocks the caller
  // of the next until the GPU has run the oldest: a program that never synchronizes runs at
  // the GPU's pace, not ahead of it. The same here, in virtual time: past kLaunchQueueDepth ops
  // in flight, the issuing thread's clock moves to the finish of the op that many back. This
  // also lets the engine's floor follow (a thread's clock is its promise), so that a program
  // that never synchronizes does not keep every op's history. (Under mu.)
  void wait_for_queue_room(Stream& s, simcore::EventId vid) {
    if (vid == simcore::kNoEvent) return;
    s.in_flight.push_back(vid);
    if (s.in_flight.size() <= kLaunchQueueDepth) return;
    const simcore::EventId oldest = s.in_flight.front();
    s.in_flight.pop_front();
    if (t_on_worker_fn) return;  // a host function's thread is the driver's, not the program's
    const double finish = finish_of(oldest);  // 0 once forgotten: it finished before the floor
    if (finish > vclock::now()) vclock::advance_to(finish, /*floor_now=*/false);
  }

  // Appends one op to `s` (under mu). Returns it; `*run_inline` says whether the caller may
  // run it now on its own thread (then it must call finish_inline()).
  std::shared_ptr<Op> append(const std::shared_ptr<Stream>& s, Work work,
                             std::vector<std::shared_ptr<Op>> waits,
                             std::vector<simcore::EventId> after, double not_before,
                             std::function<bool()> ready, bool* run_inline) {
    auto op = std::make_shared<Op>();
    op->on_worker = work.kind == Work::Kind::host_function || work.blocking;
    op->vid = add_virtual(*s, work, std::move(after), not_before);
    if (op->vid != simcore::kNoEvent) op->engine = &engine();
    wait_for_queue_room(*s, op->vid);
    op->execute = std::move(work.execute);
    op->ready = std::move(ready);
    op->waits = std::move(waits);
    order.stream(s->order_key(), s->kind()).last = {op, op->vid};
    s->queue.push_back(op);
    const bool idle = s->queue.size() == 1 && !s->running;
    // No slot for the answer (a graph's items placed by another thread's call): never inline.
    const bool inline_ok = run_inline != nullptr && idle && op->waits.empty() && !op->on_worker && !op->ready;
    if (run_inline != nullptr) *run_inline = inline_ok;
    if (inline_ok) {
      s->running = true;
    } else {
      pending[s.get()] = s;
      schedule(s);
    }
    return op;
  }

  // ---- graph launches (submit_items) ------------------------------------------------------

  // A graph launch's items being placed, in order; kept while a captured NCCL node waits for the
  // other ranks' replays of it (Work::on_meet), and placed on from that node once they came.
  struct GraphPlacement {
    std::shared_ptr<Stream> s;
    CUstream stream = nullptr;  // the launch's stream argument
    std::vector<LaunchItem> items;
    std::vector<std::shared_ptr<Event>> evs;
    std::vector<std::shared_ptr<Op>> root_waits;  // what a root item waits for (the stream's previous work)
    std::vector<simcore::EventId> root_after;
    std::vector<simcore::EventId> vids;  // each placed item's event
    std::vector<bool> has_succ;
    double not_before = 0;
    size_t next = 0;       // the next item to place
    uint64_t arrival = 0;  // held: the node's arrival op, the stream's last op when it was held
    std::shared_ptr<Op> op, first_inline;  // the last op placed; the one the caller runs inline
  };

  // Places g's items from g.next on (under mu); stops at a node that meets the other ranks'
  // replays and is not the last to arrive (g kept by that node's meeting), else joins the graph's
  // sinks into the stream's last op. `arrivals`: every rank's, for the node g was held at.
  void place_graph(const std::shared_ptr<GraphPlacement>& gp, const std::vector<uint64_t>* arrivals = nullptr) {
    GraphPlacement& g = *gp;
    Stream& s = *g.s;
    // Resumed (another thread's replay, or the flush of a rank whose peers never came): nothing
    // is run inline; behind work the stream got meanwhile when its last op is no longer the arrival.
    const bool resumed = arrivals != nullptr;
    std::vector<std::shared_ptr<Op>> behind_waits;
    std::vector<simcore::EventId> behind_after;
    if (resumed && last_of(s).vid != g.arrival) {
      log::debug("graph launch: a node held for the other ranks' replays goes behind later work on its stream");
      stream_deps(s, behind_waits, behind_after);
    }
    bool* inline_slot = nullptr;
    bool run_inline = false;
    for (; g.next < g.items.size(); ++g.next) {
      const size_t i = g.next;
      LaunchItem& it = g.items[i];
      std::vector<std::shared_ptr<Op>> waits = behind_waits;
      std::vector<simcore::EventId> after = behind_after;
      if (it.deps.empty()) {
        waits.insert(waits.end(), g.root_waits.begin(), g.root_waits.end());
        after.insert(after.end(), g.root_after.begin(), g.root_after.end());
      }
      for (int d : it.deps) {
        if (d < 0 || static_cast<size_t>(d) >= i) continue;  // instantiate sorted them
        g.has_succ[d] = true;
        if (g.vids[d] != simcore::kNoEvent) after.push_back(g.vids[d]);
      }
      if (it.kind == LaunchItem::Kind::event_wait && g.evs[i]->recorded)
        add_dep(g.evs[i]->op, g.evs[i]->vid, waits, after);
      Work w = std::move(it.work);
      if (it.kind != LaunchItem::Kind::work) {
        w = Work{};
        w.kind = it.kind == LaunchItem::Kind::event_record ? Work::Kind::other : Work::Kind::wait;
        w.label = it.kind == LaunchItem::Kind::event_record ? "event record" : "wait event";
      }
      inline_slot = resumed ? nullptr : &run_inline;
      if (w.on_meet) {
        if (arrivals != nullptr) {
          // The node this placement was held at: after its own arrival and every other rank's
          // (and behind the stream's later work, if it got some).
          after = behind_after;
          after.insert(after.end(), arrivals->begin(), arrivals->end());
          waits = behind_waits;
          arrivals = nullptr;
        } else {
          // Its arrival: an op after what the node starts after (the graph's items placed so far
          // too: a captured collective is a stream's chain), then the meeting.
          for (size_t d = 0; d < i; ++d)
            if (g.vids[d] != simcore::kNoEvent) after.push_back(g.vids[d]);
          Work a;
          a.kind = Work::Kind::other;
          a.label = "nccl arrival";
          g.op = append(g.s, std::move(a), std::move(waits), std::move(after), g.not_before, nullptr, inline_slot);
          if (run_inline) g.first_inline = g.op;
          run_inline = false;
          g.arrival = g.op->vid;
          it.work = std::move(w);  // kept for the rest's placement
          auto on_meet = it.work.on_meet;
          Work::Meeting m = on_meet(g.arrival, g.stream, [this, gp](const std::vector<uint64_t>& all) { place_graph(gp, &all); });
          if (m.held) return;  // the stream ends with the arrival until the last rank's replay
          for (const Work::PlaceRest& rest : m.release) rest(m.arrivals);
          w = std::move(it.work);
          after = std::move(m.arrivals);
          waits.clear();
          behind_waits.clear();
          behind_after.clear();
          inline_slot = nullptr;  // an arrival op precedes it on the stream
        }
      }
      // A node that places more on each replay (a captured NCCL collective's transfers) starts
      // what it places with its own start; its end is an op after both.
      auto on_replay = std::move(w.on_replay);
      Work::ReplayStart start;
      if (on_replay) start = {after, g.not_before};
      g.op = append(g.s, std::move(w), std::move(waits), std::move(after), g.not_before, nullptr, inline_slot);
      g.vids[i] = g.op->vid;
      if (on_replay && g.op->vid != simcore::kNoEvent) {
        Work::ReplayEnd placed = on_replay(start);
        if (!placed.after.empty()) {
          if (run_inline) g.first_inline = g.op;  // the end op below is never inline
          run_inline = false;
          placed.after.push_back(g.op->vid);
          Work end;
          end.kind = Work::Kind::other;
          end.label = std::move(placed.label);
          g.op = append(g.s, std::move(end), {}, std::move(placed.after), g.not_before, nullptr, nullptr);
          g.vids[i] = g.op->vid;
        }
      }
      if (it.kind == LaunchItem::Kind::event_record) {
        g.evs[i]->op = g.op;
        g.evs[i]->vid = g.op->vid;
        g.evs[i]->recorded = true;
        g.evs[i]->capture.reset();
        g.evs[i]->capture_nodes.clear();
      }
      // Only the first op can be inline (the stream stays marked running until it is done), so
      // it runs after the placement: another thread's work cannot slip between the items.
      if (run_inline) g.first_inline = g.op;
      run_inline = false;
    }
    if (g.items.size() > 1) {
      // The stream's next work follows the whole graph: join the sinks into one point.
      std::vector<simcore::EventId> sinks;
      for (size_t i = 0; i < g.items.size(); ++i)
        if (!g.has_succ[i] && g.vids[i] != simcore::kNoEvent) sinks.push_back(g.vids[i]);
      simcore::TaskSpec join;
      join.gpu = driver.global_gpu(s.device);
      join.lane = s.lane;
      join.not_before = g.not_before;
      join.after = std::move(sinks);
      join.label = "graph end";
      if (auto id = engine().add_task(join); id != simcore::kNoEvent) {
        order.stream(s.order_key(), s.kind()).last.vid = id;
        if (g.op) {  // the last real op stands for the graph's end, and keeps its own event
          if (g.op->own_vid == simcore::kNoEvent) g.op->own_vid = g.op->vid;
          g.op->vid = id;
          g.op->engine = &engine();
        }
      }
    }
  }

  // A batch of activity is due (noted under mu): report it now that mu is released.
  void report_activity() {
    if (activity_due.load(std::memory_order_relaxed) && activity_due.exchange(false)) activity.flush();
  }

  // ---- real execution ----------------------------------------------------------------

  static bool deps_done(const Op& op) {
    return std::all_of(op.waits.begin(), op.waits.end(), [](auto& w) { return w->done; });
  }

  void schedule(const std::shared_ptr<Stream>& s) {  // under mu
    if (s->running || s->queue.empty() || !deps_done(*s->queue.front())) return;
    s->running = true;
    pool.post([this, s] { drain(s); });
  }

  void complete(const std::shared_ptr<Stream>& s, const std::shared_ptr<Op>& op) {  // under mu
    op->done = true;
    op->execute = nullptr;  // release what the work captured
    op->ready = nullptr;
    op->waits.clear();
    if (!s->queue.empty() && s->queue.front() == op) s->queue.pop_front();
    if (s->queue.empty()) {
      pending.erase(s.get());
      if (s->destroyed) forget(s);
    }
    // The completion may unblock the head of any stream that waits on it.
    std::vector<std::shared_ptr<Stream>> waiting;
    waiting.reserve(pending.size());
    for (auto& [p, t] : pending) waiting.push_back(t);
    for (auto& t : waiting)
      if (t != s) schedule(t);
    cv.notify_all();
  }

  void forget(const std::shared_ptr<Stream>& s) {  // under mu: drop a destroyed, drained stream
    auto it = by_ctx.find(s->ctx);
    if (it == by_ctx.end()) return;
    auto& v = it->second.streams;
    v.erase(std::remove(v.begin(), v.end(), s), v.end());
  }

  static void run(Op& op) {
    if (op.ready) {
      // cuStreamWaitValue: the condition is set by other work or by the host program. Poll
      // with a growing pause (the GPU would spin; a driver thread should not burn a core).
      auto pause = std::chrono::microseconds(20);
      while (!op.ready()) {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
    }
    if (!op.execute) return;
    const bool was = t_on_worker_fn;
    t_on_worker_fn = true;
    try {
      op.execute();
    } catch (...) {
      log::warn("stream work threw an exception; ignored");
    }
    t_on_worker_fn = was;
  }

  void finish_inline(const std::shared_ptr<Stream>& s, const std::shared_ptr<Op>& op) {
    std::lock_guard lock(mu);
    s->running = false;
    complete(s, op);
    schedule(s);
  }

  void drain(std::shared_ptr<Stream> s) {
    std::unique_lock lock(mu);
    for (;;) {
      if (s->queue.empty() || !deps_done(*s->queue.front())) {
        s->running = false;
        return;  // a later completion schedules the stream again
      }
      auto op = s->queue.front();
      lock.unlock();
      run(*op);
      lock.lock();
      complete(s, op);
    }
  }

  // Waits (real time) until `op` is done. NOT_PERMITTED from inside a host function, where
  // waiting for stream work could wait for the very function that calls.
  CUresult wait_done(const std::shared_ptr<Op>& op) {
    std::unique_lock lock(mu);
    if (!op || op->done) return CUDA_SUCCESS;
    if (t_on_worker_fn) {
      log::warn("synchronization inside a stream host function is not permitted");
      return CUDA_ERROR_NOT_PERMITTED;
    }
    cv.wait(lock, [&] { return op->done; });
    return CUDA_SUCCESS;
  }

  // The virtual finish of an op as the engine sees it now. Never a wait for finality: host
  // threads also synchronize in ways the driver cannot see (a join, a mutex), so a thread that
  // sits outside the driver can hold the engine's floor below this finish for as long as it
  // likes, and waiting for it would hang the program. The answer is final unless a later
  // submission of another thread, starting earlier in virtual time, shares links with it.
  double finish_of(simcore::EventId vid) {
    if (vid == simcore::kNoEvent) return 0;
    auto iv = engine().query(vid);
    return iv ? iv->finish : 0;
  }

  // Synchronization with `ops` (each with its virtual event): waits until they have run and
  // moves the calling thread's clock to their latest virtual finish. The clock moves before the
  // real wait as well, so that a thread blocked here does not hold the engine's floor back (not
  // from inside a host function, where the wait is refused).
  CUresult sync_with(const std::vector<std::pair<std::shared_ptr<Op>, simcore::EventId>>& ops) {
    auto latest = [&] {
      double t = 0;
      for (const auto& [op, vid] : ops) t = std::max(t, finish_of(vid));
      return t;
    };
    if (!t_on_worker_fn) vclock::advance_to(latest());
    for (const auto& [op, vid] : ops)
      if (CUresult r = wait_done(op); r != CUDA_SUCCESS) return r;
    vclock::advance_to(latest());
    activity.flush();  // the engine has just placed this work: monitors see it now
    return CUDA_SUCCESS;
  }

  // ---- capture (under mu) ----------------------------------------------------------------

  // Records `work` as a node of the capture `s` belongs to, after the stream's frontier.
  CUresult capture_work(Stream& s, Work work) {
    auto& cap = *s.capture;
    if (cap.invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    CUgraphNode node = nullptr;
    const CUgraphNodeType type = GraphManager::node_type_of(work);
    CUresult r = driver.graphs().add_node(cap.graph, type, std::move(work), nullptr,
                                          s.frontier.data(), s.frontier.size(), &node);
    if (r != CUDA_SUCCESS) return r;
    s.frontier.assign(1, node);
    return CUDA_SUCCESS;
  }

  void invalidate(Stream& s) {
    if (s.capture) s.capture->invalidated = true;
  }

  // The legacy stream may not be used while a blocking stream of its context is captured in
  // a mode other than relaxed: it would join the capture implicitly.
  CUresult check_implicit_capture(const Stream& s) {
    if (s.role != Stream::Role::legacy) return CUDA_SUCCESS;
    auto it = by_ctx.find(s.ctx);
    if (it == by_ctx.end()) return CUDA_SUCCESS;
    for (auto& t : it->second.streams)
      if (t->capture && t->blocking() && t->capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        t->capture->invalidated = true;
        log::warn("legacy default stream used while a stream of its context is being captured");
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      }
    return CUDA_SUCCESS;
  }

  // ---- the common submit path ------------------------------------------------------------

  // The thread's clock moves on by what the real driver's call would have cost it, once the op
  // took its issue time (timing/driver_call_cost.h; the passthrough times the real call).
  static void charge_real_driver(Work::Kind kind) {
    if (kind == Work::Kind::kernel)
      timing::this_thread_clock().charge_driver(timing::real_driver_seconds(timing::DriverCall::launch, timing::Backend::sim));
    if (kind == Work::Kind::copy || kind == Work::Kind::memset)
      timing::this_thread_clock().charge_driver(timing::real_driver_seconds(timing::DriverCall::copy, timing::Backend::sim));
  }

  // Submits one op; *op_out (optional) gets it (null when it was captured).
  CUresult submit_one(CUstream h, Work work, bool per_thread, std::function<bool()> ready,
                      std::shared_ptr<Op>* op_out, bool allow_capture) {
    vclock::CallScope scope;
    std::shared_ptr<Stream> s;
    if (CUresult r = resolve(h, per_thread, &s); r != CUDA_SUCCESS) return r;
    const double not_before = vclock::earliest_start();
    charge_real_driver(work.kind);
    std::shared_ptr<Op> op;
    bool run_inline = false;
    auto on_timeline = std::move(work.on_timeline);
    {
      std::lock_guard lock(mu);
      if (CUresult r = check_implicit_capture(*s); r != CUDA_SUCCESS) return r;
      if (s->capture) {
        if (!allow_capture || ready) {
          invalidate(*s);
          log::warn("operation not permitted on a stream being captured");
          return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        return capture_work(*s, std::move(work));
      }
      std::vector<std::shared_ptr<Op>> waits;
      std::vector<simcore::EventId> after;
      stream_deps(*s, waits, after);
      after.insert(after.end(), work.also_after.begin(), work.also_after.end());
      op = append(s, std::move(work), std::move(waits), std::move(after), not_before,
                  std::move(ready), &run_inline);
    }
    if (on_timeline) on_timeline(op->vid);
    if (run_inline) {
      run(*op);
      finish_inline(s, op);
    }
    report_activity();
    if (op_out) *op_out = op;
    return CUDA_SUCCESS;
  }
};

// ---- the declared interface ------------------------------------------------------------------

StreamManager::StreamManager(DriverState& driver) : impl_(std::make_unique<Impl>(driver)) {
  vclock::install_timeline_writer();
}
StreamManager::~StreamManager() = default;

void StreamManager::flush_activity() { impl_->activity.flush(); }

CUresult StreamManager::submit(CUstream stream, Work work, bool per_thread) {
  return impl_->submit_one(stream, std::move(work), per_thread, nullptr, nullptr, true);
}

bool StreamManager::append_after_last(uint64_t last, Work work) {
  if (last == simcore::kNoEvent) return false;
  std::shared_ptr<Op> op;
  std::shared_ptr<Stream> target;
  bool run_inline = false;
  auto on_timeline = std::move(work.on_timeline);
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [ctx, cs] : impl_->by_ctx) {
      if (cs.legacy && impl_->last_of(*cs.legacy).vid == last) target = cs.legacy;
      for (auto& t : cs.streams)
        if (!target && impl_->last_of(*t).vid == last && !t->destroyed) target = t;
      if (target) break;
    }
    if (!target || target->capture) return false;
    std::vector<std::shared_ptr<Op>> waits;
    std::vector<simcore::EventId> after;
    impl_->stream_deps(*target, waits, after);
    after.insert(after.end(), work.also_after.begin(), work.also_after.end());
    // Not before the calling thread's clock: its promise to the engine, so at or above the
    // engine's floor (the work's own dependencies place it later anyway).
    op = impl_->append(target, std::move(work), std::move(waits), std::move(after), vclock::now(), nullptr,
                       &run_inline);
  }
  if (on_timeline) on_timeline(op->vid);
  if (run_inline) {
    Impl::run(*op);
    impl_->finish_inline(target, op);
  }
  return true;
}

CUresult StreamManager::submit_and_wait(CUstream stream, Work work, bool per_thread) {
  vclock::CallScope scope;
  std::shared_ptr<Op> op;
  if (CUresult r = impl_->submit_one(stream, std::move(work), per_thread, nullptr, &op, false);
      r != CUDA_SUCCESS)
    return r;
  return impl_->sync_with({{op, op->vid}});
}

CUresult StreamManager::submit_wait(CUstream stream, std::function<bool()> ready, bool per_thread) {
  Work w;
  w.kind = Work::Kind::wait;
  w.label = "wait value";
  return impl_->submit_one(stream, std::move(w), per_thread, std::move(ready), nullptr, false);
}

CUresult StreamManager::device_of(CUstream stream, bool per_thread, int* device) const {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  *device = s->device;
  return CUDA_SUCCESS;
}

CUresult StreamManager::synchronize_context(CUcontext ctx) {
  vclock::CallScope scope;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::vector<std::pair<std::shared_ptr<Op>, simcore::EventId>> lasts;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->by_ctx.find(ctx);
    if (it == impl_->by_ctx.end()) return CUDA_SUCCESS;
    if (auto& l = it->second.legacy) lasts.emplace_back(impl_->last_of(*l).op, impl_->last_of(*l).vid);
    for (auto& s : it->second.streams) lasts.emplace_back(impl_->last_of(*s).op, impl_->last_of(*s).vid);
  }
  if (CUresult r = impl_->sync_with(lasts); r != CUDA_SUCCESS) return r;
  // Added by the memory helper: stream-ordered pools release memory at synchronization.
  if (auto c = impl_->driver.contexts().find(ctx)) impl_->driver.memory().synchronized(c->device());
  return CUDA_SUCCESS;
}

void StreamManager::context_destroyed(CUcontext ctx) {
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->by_ctx.find(ctx);
    if (it == impl_->by_ctx.end()) return;
    all = it->second.streams;
    if (it->second.legacy) all.push_back(it->second.legacy);
  }
  for (auto& s : all) {
    std::shared_ptr<Op> last;
    {
      std::lock_guard lock(impl_->mu);
      last = impl_->last_of(*s).op;
    }
    impl_->wait_done(last);  // NOT_PERMITTED from a host function: then do not wait
    impl_->streams.remove(s->handle);
  }
  for (auto& e : impl_->events.snapshot())
    if (e->ctx == ctx) impl_->events.remove(e->handle);
  std::lock_guard lock(impl_->mu);
  impl_->by_ctx.erase(ctx);
  impl_->order.forget_context(ctx);
  for (auto it = impl_->ptds.begin(); it != impl_->ptds.end();)
    it = it->first.second == ctx ? impl_->ptds.erase(it) : std::next(it);
}

// ---- streams -----------------------------------------------------------------------------

CUresult StreamManager::create(CUstream* out, unsigned int flags, int priority) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) {
    log::warn("cuStreamCreate: invalid flags {:#x}", flags);
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto ctx = impl_->driver.contexts().current();
  if (!ctx) {
    log::warn("cuStreamCreate: no current context");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  priority = std::clamp(priority, kGreatestPriority, 0);
  auto s = impl_->make_stream(ctx->handle(), ctx->device(), Stream::Role::user, flags, priority);
  {
    std::lock_guard lock(impl_->mu);
    impl_->by_ctx[ctx->handle()].streams.push_back(s);
  }
  impl_->streams.add(s->handle, s);
  *out = s->handle;
  return CUDA_SUCCESS;
}

CUresult StreamManager::destroy(CUstream stream) {
  auto s = impl_->streams.remove(stream);
  if (!s) {
    log::warn("cuStreamDestroy: {} is not a live stream", static_cast<const void*>(stream));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // Like the real driver: returns at once; work already queued still runs to completion.
  std::lock_guard lock(impl_->mu);
  // A stream forked into another's capture (by waiting on an event recorded there) may go once
  // its work has been joined back: its nodes stay in the graph and the capture goes on. Only
  // destroying the stream that began the capture ends it, invalidated.
  if (s->capture && s->capture->origin.lock() != s) {
    s->capture.reset();
    s->frontier.clear();
  }
  impl_->invalidate(*s);
  // It leaves the stream order now, in program order, as on the passthrough: its last op stays
  // in the legacy stream's barrier until that stream's next op (timing/stream_order.h), and
  // cuCtxSynchronize still waits for it while its queued work drains for real.
  s->last_when_destroyed = impl_->last_of(*s);
  impl_->order.destroy_stream(s->order_key());
  s->destroyed = true;
  if (s->queue.empty()) impl_->forget(s);
  return CUDA_SUCCESS;
}

CUresult StreamManager::query(CUstream stream, bool per_thread) {
  vclock::CallScope scope;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  simcore::EventId vid;
  {
    std::lock_guard lock(impl_->mu);
    if (s->capture) {
      impl_->invalidate(*s);
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    const StreamLast& last = impl_->last_of(*s);
    if (last.op && !last.op->done) {
      timing::this_thread_clock().polled_not_ready(s.get());  // the thread may be polling
      return CUDA_ERROR_NOT_READY;
    }
    vid = last.vid;
  }
  const double finish = impl_->finish_of(vid);
  timing::this_thread_clock().polled_ready(s.get(), finish);
  vclock::advance_to(finish);
  return CUDA_SUCCESS;
}

CUresult StreamManager::synchronize(CUstream stream, bool per_thread) {
  vclock::CallScope scope;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Op> last;
  simcore::EventId vid;
  {
    std::lock_guard lock(impl_->mu);
    if (s->capture) {
      impl_->invalidate(*s);
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    last = impl_->last_of(*s).op;
    vid = impl_->last_of(*s).vid;
  }
  if (CUresult r = impl_->sync_with({{last, vid}}); r != CUDA_SUCCESS) return r;
  impl_->driver.memory().synchronized(s->device);  // added by the memory helper (pools)
  return CUDA_SUCCESS;
}

CUresult StreamManager::wait_event(CUstream stream, CUevent event, unsigned int flags,
                                   bool per_thread) {
  vclock::CallScope scope;
  if (flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  auto e = impl_->events.find(event);
  if (!e) {
    log::warn("cuStreamWaitEvent: {} is not a live event", static_cast<const void*>(event));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const double not_before = vclock::earliest_start();
  std::shared_ptr<Op> op;
  bool run_inline = false;
  {
    std::lock_guard lock(impl_->mu);
    if (e->capture && !e->capture->ended) {
      // An event recorded in a capture: the stream joins that capture (fork), or, already in
      // it, takes the event's nodes as further dependencies (join).
      if (s->capture && s->capture != e->capture) {
        impl_->invalidate(*s);
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
      }
      if (!s->capture) {
        s->capture = e->capture;
        s->frontier = e->capture_nodes;
        e->capture->members.push_back(s);
      } else {
        for (auto n : e->capture_nodes)
          if (std::find(s->frontier.begin(), s->frontier.end(), n) == s->frontier.end())
            s->frontier.push_back(n);
      }
      return CUDA_SUCCESS;
    }
    if (s->capture) return CUDA_SUCCESS;  // an event from before the capture: already past
    if (!e->recorded) return CUDA_SUCCESS;  // never recorded: nothing to wait for
    std::vector<std::shared_ptr<Op>> waits;
    std::vector<simcore::EventId> after;
    impl_->stream_deps(*s, waits, after);
    Impl::add_dep(e->op, e->vid, waits, after);
    Work w;
    w.kind = Work::Kind::wait;
    w.label = "wait event";
    op = impl_->append(s, std::move(w), std::move(waits), std::move(after), not_before, nullptr,
                       &run_inline);
  }
  if (run_inline) impl_->finish_inline(s, op);
  return CUDA_SUCCESS;
}

CUresult StreamManager::info(CUstream stream, bool per_thread, Info* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(impl_->mu);  // set_attribute may change the priority meanwhile
  out->ctx = s->ctx;
  out->device = s->device;
  out->flags = s->flags;
  out->priority = s->priority;
  out->id = s->id;
  return CUDA_SUCCESS;
}

CUresult StreamManager::get_attribute(CUstream stream, bool per_thread, int attr,
                                      CUstreamAttrValue* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(impl_->mu);
  auto it = s->attrs.find(attr);
  if (it != s->attrs.end()) {
    *out = it->second;
  } else {
    *out = CUstreamAttrValue{};
    if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY) out->priority = s->priority;
  }
  return CUDA_SUCCESS;
}

CUresult StreamManager::set_attribute(CUstream stream, bool per_thread, int attr,
                                      const CUstreamAttrValue& v) {
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(impl_->mu);
  s->attrs[attr] = v;
  if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY) s->priority = std::clamp(v.priority, kGreatestPriority, 0);
  return CUDA_SUCCESS;
}

CUresult StreamManager::copy_attributes(CUstream dst, CUstream src, bool per_thread) {
  std::shared_ptr<Stream> d, s;
  if (CUresult r = impl_->resolve(dst, per_thread, &d); r != CUDA_SUCCESS) return r;
  if (CUresult r = impl_->resolve(src, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(impl_->mu);
  if (d != s) d->attrs = s->attrs;
  return CUDA_SUCCESS;
}

// ---- events ------------------------------------------------------------------------------

CUresult StreamManager::event_create(CUevent* out, unsigned int flags) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (flags & ~known) {
    log::warn("cuEventCreate: invalid flags {:#x}", flags);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (flags & CU_EVENT_INTERPROCESS) {
    if (!(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    log::warn("cuEventCreate: interprocess events are not supported by the sim backend");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  auto ctx = impl_->driver.contexts().current();
  if (!ctx) {
    log::warn("cuEventCreate: no current context");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  auto e = std::make_shared<Event>();
  e->handle = mint_handle<CUevent>(HandleKind::event);
  e->flags = flags;
  e->ctx = ctx->handle();
  e->device = ctx->device();
  impl_->events.add(e->handle, e);
  *out = e->handle;
  return CUDA_SUCCESS;
}

CUresult StreamManager::event_destroy(CUevent event) {
  if (!impl_->events.remove(event)) {
    log::warn("cuEventDestroy: {} is not a live event", static_cast<const void*>(event));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}

CUresult StreamManager::event_record(CUevent event, CUstream stream, bool per_thread) {
  vclock::CallScope scope;
  auto e = impl_->events.find(event);
  if (!e) {
    log::warn("cuEventRecord: {} is not a live event", static_cast<const void*>(event));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // As the real driver: an event is recorded only on a stream of its own device.
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (s->device != e->device) {
    log::warn("cuEventRecord: event {} belongs to device {}, stream {} to device {}",
              static_cast<const void*>(event), e->device, static_cast<const void*>(stream), s->device);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  std::vector<LaunchItem> items(1);
  items[0].kind = LaunchItem::Kind::event_record;
  items[0].event = event;
  const CUresult r = submit_items(stream, std::move(items), per_thread);
  if (r == CUDA_SUCCESS) timing::this_thread_clock().charge_driver(timing::real_driver_seconds(timing::DriverCall::event_record, timing::Backend::sim));
  return r;
}

CUresult StreamManager::event_query(CUevent event) {
  vclock::CallScope scope;
  auto e = impl_->events.find(event);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  simcore::EventId vid;
  {
    std::lock_guard lock(impl_->mu);
    if (!e->recorded) return CUDA_SUCCESS;
    if (e->op && !e->op->done) {
      timing::this_thread_clock().polled_not_ready(e.get());  // the thread may be polling
      return CUDA_ERROR_NOT_READY;
    }
    vid = e->vid;
  }
  const double finish = impl_->finish_of(vid);
  timing::this_thread_clock().polled_ready(e.get(), finish);
  vclock::advance_to(finish);
  return CUDA_SUCCESS;
}

CUresult StreamManager::event_synchronize(CUevent event) {
  vclock::CallScope scope;
  auto e = impl_->events.find(event);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Op> op;
  simcore::EventId vid;
  {
    std::lock_guard lock(impl_->mu);
    if (!e->recorded) return CUDA_SUCCESS;
    op = e->op;
    vid = e->vid;
  }
  if (CUresult r = impl_->sync_with({{op, vid}}); r != CUDA_SUCCESS) return r;
  if (auto c = impl_->driver.contexts().find(e->ctx))  // added by the memory helper (pools)
    impl_->driver.memory().synchronized(c->device());
  return CUDA_SUCCESS;
}

CUresult StreamManager::event_elapsed(float* ms, CUevent start, CUevent end) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = impl_->events.find(start), b = impl_->events.find(end);
  if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) {
    log::warn("cuEventElapsedTime: an event was created with CU_EVENT_DISABLE_TIMING");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  simcore::EventId va, vb;
  {
    std::lock_guard lock(impl_->mu);
    // As documented for the real driver: never recorded -> INVALID_HANDLE; recorded but not
    // complete -> NOT_READY.
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if ((a->op && !a->op->done) || (b->op && !b->op->done)) return CUDA_ERROR_NOT_READY;
    va = a->vid;
    vb = b->vid;
  }
  const double t0 = impl_->finish_of(va), t1 = impl_->finish_of(vb);
  *ms = static_cast<float>((t1 - t0) * 1e3);
  return CUDA_SUCCESS;
}

// ---- graph launches and event records: items with their own dependencies ----------------

CUresult StreamManager::submit_items(CUstream stream, std::vector<LaunchItem> items,
                                     bool per_thread) {
  vclock::CallScope scope;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  // Look every event up before anything is queued, so an error leaves the stream untouched.
  std::vector<std::shared_ptr<Event>> evs(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind == LaunchItem::Kind::work) continue;
    evs[i] = impl_->events.find(items[i].event);
    if (!evs[i]) {
      log::warn("graph/event item: {} is not a live event", static_cast<const void*>(items[i].event));
      return CUDA_ERROR_INVALID_HANDLE;
    }
  }
  const double not_before = vclock::earliest_start();
  std::unique_lock lock(impl_->mu);
  if (CUresult r = impl_->check_implicit_capture(*s); r != CUDA_SUCCESS) return r;

  if (s->capture) {
    auto cap = s->capture;
    if (cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (items.size() == 1 && items[0].kind == LaunchItem::Kind::event_record) {
      evs[0]->capture = cap;  // a record in a capture marks the point, it adds no node
      evs[0]->capture_nodes = s->frontier;
      return CUDA_SUCCESS;
    }
    // A graph launched into a capture: its nodes join the capture (inlined, not a child graph).
    std::vector<CUgraphNode> made(items.size());
    std::vector<bool> has_succ(items.size(), false);
    for (size_t i = 0; i < items.size(); ++i) {
      std::vector<CUgraphNode> deps;
      if (items[i].deps.empty()) deps = s->frontier;
      for (int d : items[i].deps) {
        deps.push_back(made[d]);
        has_succ[d] = true;
      }
      const CUgraphNodeType type =
          items[i].kind == LaunchItem::Kind::work ? GraphManager::node_type_of(items[i].work)
          : items[i].kind == LaunchItem::Kind::event_record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                                            : CU_GRAPH_NODE_TYPE_WAIT_EVENT;
      if (CUresult r = impl_->driver.graphs().add_node(cap->graph, type, std::move(items[i].work),
                                                       items[i].event, deps.data(), deps.size(),
                                                       &made[i]);
          r != CUDA_SUCCESS)
        return r;
    }
    if (!items.empty()) {
      s->frontier.clear();
      for (size_t i = 0; i < items.size(); ++i)
        if (!has_succ[i]) s->frontier.push_back(made[i]);
    }
    return CUDA_SUCCESS;
  }

  auto g = std::make_shared<Impl::GraphPlacement>();
  g->s = s;
  g->stream = stream;
  g->items = std::move(items);
  g->evs = std::move(evs);
  g->not_before = not_before;
  impl_->stream_deps(*s, g->root_waits, g->root_after);
  g->vids.assign(g->items.size(), simcore::kNoEvent);
  g->has_succ.assign(g->items.size(), false);
  impl_->place_graph(g);
  std::shared_ptr<Op> first_inline = std::move(g->first_inline);
  lock.unlock();
  if (first_inline) {
    Impl::run(*first_inline);
    impl_->finish_inline(s, first_inline);
  }
  impl_->report_activity();
  return CUDA_SUCCESS;
}

void StreamManager::place_rest(const Work::PlaceRest& rest, const std::vector<uint64_t>& arrivals) {
  if (!rest) return;
  {
    std::lock_guard lock(impl_->mu);
    rest(arrivals);
  }
  impl_->report_activity();
}

// ---- capture -----------------------------------------------------------------------------

CUresult StreamManager::begin_capture(CUstream stream, CUstreamCaptureMode mode, CUgraph graph,
                                      const CUgraphNode* deps, size_t num_deps, bool per_thread) {
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (num_deps > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (s->role == Stream::Role::legacy) {
    log::warn("cuStreamBeginCapture: the legacy default stream cannot be captured");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  GraphManager& graphs = impl_->driver.graphs();
  bool own = false;
  if (graph == nullptr) {
    if (CUresult r = graphs.create(&graph); r != CUDA_SUCCESS) return r;
    own = true;
  } else if (!graphs.find(graph)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (size_t i = 0; i < num_deps; ++i) {
    auto n = graphs.find_node(deps[i]);
    if (!n || n->graph != graph) return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(impl_->mu);
  if (s->capture) {
    if (own) graphs.destroy(graph);
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  auto cap = std::make_shared<CaptureSession>();
  cap->graph = graph;
  cap->own_graph = own;
  cap->origin = s;
  cap->id = impl_->next_capture_id.fetch_add(1);
  cap->mode = mode;
  cap->members.push_back(s);
  s->capture = cap;
  s->frontier.assign(deps, deps + num_deps);
  return CUDA_SUCCESS;
}

CUresult StreamManager::end_capture(CUstream stream, CUgraph* out, bool per_thread) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::shared_ptr<CaptureSession> cap;
  {
    std::lock_guard lock(impl_->mu);
    if (!s->capture) return CUDA_ERROR_ILLEGAL_STATE;
    if (s->capture->origin.lock() != s) {
      impl_->invalidate(*s);
      return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    cap = s->capture;
    cap->ended = true;
    for (auto& w : cap->members)
      if (auto m = w.lock(); m && m->capture == cap) {
        m->capture.reset();
        m->frontier.clear();
      }
  }
  if (cap->invalidated) {
    if (cap->own_graph) impl_->driver.graphs().destroy(cap->graph);
    *out = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *out = cap->graph;
  return CUDA_SUCCESS;
}

CUresult StreamManager::capture_info(CUstream stream, bool per_thread,
                                     CUstreamCaptureStatus* status, cuuint64_t* id,
                                     CUgraph* graph, const CUgraphNode** deps, size_t* num_deps) {
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(impl_->mu);
  const auto& cap = s->capture;
  if (status)
    *status = !cap ? CU_STREAM_CAPTURE_STATUS_NONE
              : cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                 : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (!cap || cap->invalidated) return CUDA_SUCCESS;
  if (id) *id = cap->id;
  if (graph) *graph = cap->graph;
  s->frontier_out = s->frontier;
  if (deps) *deps = s->frontier_out.empty() ? nullptr : s->frontier_out.data();
  if (num_deps) *num_deps = s->frontier_out.size();
  return CUDA_SUCCESS;
}

CUresult StreamManager::update_capture_dependencies(CUstream stream, const CUgraphNode* deps,
                                                    size_t n, unsigned int flags,
                                                    bool per_thread) {
  if (n > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)
    return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = impl_->resolve(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(impl_->mu);
  if (!s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  for (size_t i = 0; i < n; ++i) {
    auto node = impl_->driver.graphs().find_node(deps[i]);
    if (!node || node->graph != s->capture->graph) return CUDA_ERROR_INVALID_VALUE;
  }
  if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) s->frontier.clear();
  for (size_t i = 0; i < n; ++i)
    if (std::find(s->frontier.begin(), s->frontier.end(), deps[i]) == s->frontier.end())
      s->frontier.push_back(deps[i]);
  return CUDA_SUCCESS;
}

}  // namespace vgpu
