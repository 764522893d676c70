// The passthrough's virtual timeline (passthrough/virtual_timeline.h), without a driver: ops are
// placed where simcore's task rule puts them (an op starts at the latest of its issue time and
// the finish of what it waits for), also when their durations come late and when their start is
// asked first (NCCL kernels); and placed ops are let go over a million launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "passthrough/virtual_timeline.h"

namespace {

using vgpu::pt::OpRef;
using vgpu::pt::StreamKey;
using vgpu::pt::StreamKind;
using vgpu::pt::TimedOp;
using vgpu::pt::VirtualTimeline;

// A measurement that is never ready unless forced (then it lasts what the op carries).
double measured_when_forced(const TimedOp& op, std::optional<double>, bool force) {
  return force ? static_cast<double>(op.measurement) * 1e-6 : -1;
}

// The same ops on two timelines, (elided, full): `ops` and those of `events` (the same handles on
// both), resolved on both, are placed alike.
template <size_t N>
void expect_placed_alike(VirtualTimeline& elided, VirtualTimeline& full, std::vector<std::pair<OpRef, OpRef>>& ops,
                         const int (&events)[N], uint32_t seed) {
  for (const int& e : events) {
    const OpRef a = elided.event_op(&e), b = full.event_op(&e);
    ASSERT_EQ(a == nullptr, b == nullptr);
    if (a) ops.emplace_back(a, b);
  }
  for (auto& [e, f] : ops) {
    elided.resolve(measured_when_forced, e);
    full.resolve(measured_when_forced, f);
    ASSERT_TRUE(elided.finish(e).has_value()) << "seed " << seed;
    EXPECT_EQ(elided.finish(e), full.finish(f)) << "seed " << seed;
    EXPECT_EQ(e->start, f->start) << "seed " << seed;
  }
}

// Two timelines given the same random ops, `a` the way under test and `b` with every record an op
// of its own (the randomized comparisons of repeated and memoized records below): the handles they
// share, the stream, event and context each step picks, and the ops both tests make alike.
struct TwinRun {
  explicit TwinRun(uint32_t seed) : rng(seed) { b.set_elide_event_records(false); }
  VirtualTimeline a, b;
  std::mt19937 rng;
  int contexts[2] = {};
  int handles[4] = {};
  int events[2] = {};
  const StreamKind kinds[4] = {StreamKind::legacy, StreamKind::non_blocking, StreamKind::non_blocking,
                               StreamKind::blocking};
  std::vector<std::pair<OpRef, OpRef>> ops;
  int s = 1;  // the step's stream: 0 the context's legacy stream, else handles[s]
  const void* event = &events[0];
  const void* context = &contexts[0];

  double issue() { return std::uniform_real_distribution<double>(0, 10)(rng); }
  // The step's stream: mostly the same stream, event and context as the last step's.
  StreamKey pick() {
    if (rng() % 3 == 0) {
      s = static_cast<int>(rng() % 4);
      event = &events[rng() % 2];
      context = &contexts[rng() % 2];
    }
    return StreamKey{context, s == 0 ? nullptr : &handles[s]};
  }
  // A launch of `d` seconds on `key` at `t` on both: settled (placed at once, its op kept only if
  // the timeline made one: false when it made none) or measured (its op kept, resolved later).
  bool launch(const StreamKey& key, bool settled, double t, double d) {
    if (!settled) {
      const auto us = static_cast<uint64_t>(d * 1e6);
      ops.emplace_back(a.append(key, kinds[s], 0, t, -1, {}, us), b.append(key, kinds[s], 0, t, -1, {}, us));
      return true;
    }
    OpRef e = a.append_unless_placed(key, kinds[s], 0, t, d, true);
    OpRef f = b.append_unless_placed(key, kinds[s], 0, t, d, true);
    if (!e) return false;
    ops.emplace_back(std::move(e), std::move(f));
    return true;
  }
  // A launch on `key` after the event's op, when it has one (on both).
  void wait_on_event(const StreamKey& key) {
    const OpRef we = a.event_op(event), wf = b.event_op(event);
    ASSERT_EQ(we == nullptr, wf == nullptr);
    if (!we) return;
    ops.emplace_back(we, wf);
    const double t = issue();
    ops.emplace_back(a.append(key, kinds[s], 0, t, 0, {we}), b.append(key, kinds[s], 0, t, 0, {wf}));
  }
  void forget_event() {
    a.forget_event(event);
    b.forget_event(event);
  }
  // False for the legacy stream, which is never destroyed.
  bool destroy_stream(const StreamKey& key) {
    if (s == 0) return false;
    a.destroy_stream(key);
    b.destroy_stream(key);
    return true;
  }
  void forget_context() {
    a.forget_context(context);
    b.forget_context(context);
  }
  // Every op kept and every stream's tail placed alike on both.
  void expect_alike(uint32_t seed) {
    expect_placed_alike(a, b, ops, events, seed);
    for (const int& c : contexts)
      for (int q = 0; q < 4; ++q) {
        const StreamKey k{&c, q == 0 ? nullptr : &handles[q]};
        const OpRef e = a.tail(k), f = b.tail(k);
        ASSERT_EQ(e == nullptr, f == nullptr);
        if (!e) continue;
        a.resolve(measured_when_forced, e);
        b.resolve(measured_when_forced, f);
        EXPECT_EQ(a.finish(e), b.finish(f)) << "seed " << seed;
      }
  }
};

TEST(VirtualTimeline, OpsStartAfterTheirStreamAndWhatTheyWaitFor) {
  VirtualTimeline tl;
  int s1 = 0, s2 = 0;
  const StreamKey a{nullptr, &s1}, b{nullptr, &s2};
  const OpRef k1 = tl.append(a, StreamKind::non_blocking, 0, 1.0, 2.0);
  const OpRef k2 = tl.append(a, StreamKind::non_blocking, 0, 1.5, 1.0);
  const OpRef w = tl.append(b, StreamKind::non_blocking, 1, 0.5, 0.25, {k2});
  const OpRef free_op = tl.append(b, StreamKind::non_blocking, 1, 10.0, 1.0);
  EXPECT_EQ(tl.finish(k1), 3.0);
  EXPECT_EQ(k2->start, 3.0);
  EXPECT_EQ(tl.finish(k2), 4.0);
  EXPECT_EQ(w->start, 4.0);
  EXPECT_EQ(tl.finish(w), 4.25);
  EXPECT_EQ(free_op->start, 10.0);  // its issue time is later than its stream's last op
  EXPECT_EQ(tl.pending(), 0u);
}

// Markers (no duration, not a kernel: event records, stream waits) are placed by the same rule,
// and what follows them starts no earlier than their finish.
TEST(VirtualTimeline, MarkersArePlacedByTheRule) {
  VirtualTimeline tl;
  int s1 = 0, s2 = 0;
  const StreamKey a{nullptr, &s1}, b{nullptr, &s2};
  const OpRef k1 = tl.append(a, StreamKind::non_blocking, 0, 1.0, 2.0, {}, 0, /*kernel=*/true);
  const OpRef m1 = tl.append(a, StreamKind::non_blocking, 0, 1.5, 0);  // behind k1
  const OpRef m2 = tl.append(a, StreamKind::non_blocking, 0, 5.0, 0);  // after its issue
  const OpRef k2 = tl.append(b, StreamKind::non_blocking, 1, 0.0, 1.0, {m2}, 0, /*kernel=*/true);
  const OpRef m3 = tl.append(b, StreamKind::non_blocking, 1, 0.0, 0, {m1});
  EXPECT_EQ(m1->start, 3.0);
  EXPECT_EQ(tl.finish(m1), 3.0);
  EXPECT_EQ(tl.finish(m2), 5.0);
  EXPECT_EQ(k2->start, 5.0);
  EXPECT_EQ(tl.finish(k2), 6.0);
  EXPECT_EQ(tl.finish(m3), 6.0);  // behind k2 on its stream
  EXPECT_EQ(tl.pending(), 0u);
}

// Kernels beside a collective's kernel (appended start_first, as NCCL's) on the same GPU progress
// at half their rate (timing/collective_overlap.h): a kernel placed before the collective's
// window is known leaves its lost work to the next kernel; one placed after it is slowed inside
// it; another GPU's kernels are not; with the rule off, the plain rule.
TEST(VirtualTimeline, KernelsBesideACollectivesKernelSlowDown) {
  for (const double share : {0.5, 1.0}) {
    VirtualTimeline tl;
    tl.set_compute_beside_collective(share, share);
    int nccl_stream = 0, compute = 0, other = 0;
    const StreamKey n{nullptr, &nccl_stream}, c{nullptr, &compute}, g1{nullptr, &other};
    const OpRef all_reduce = tl.append(n, StreamKind::non_blocking, 0, 1.0, -1, {}, /*measurement=*/200,
                                       /*kernel=*/true, {}, /*start_first=*/true);
    const OpRef k1 = tl.append(c, StreamKind::non_blocking, 0, 1.0, 100e-6, {}, 0, /*kernel=*/true);
    const OpRef elsewhere = tl.append(g1, StreamKind::non_blocking, 1, 1.0, 100e-6, {}, 0, /*kernel=*/true);
    EXPECT_EQ(tl.finish(k1), 1.0 + 100e-6) << "the window is not known yet";
    tl.resolve(measured_when_forced, all_reduce);  // [1.0, 1.0002]
    ASSERT_EQ(tl.finish(all_reduce), 1.0 + 200e-6);
    const OpRef k2 = tl.append(c, StreamKind::non_blocking, 0, 1.0, 100e-6, {}, 0, /*kernel=*/true);
    const OpRef marker = tl.append(c, StreamKind::non_blocking, 0, 1.0, 0);  // not a kernel: no slowdown
    const OpRef k3 = tl.append(c, StreamKind::non_blocking, 0, 1.0, 100e-6, {}, 0, /*kernel=*/true);
    if (share == 0.5) {
      // k1 did 50 us of its work in the window's first 100 us: k2 carries the other 50, and its
      // own 100, at half rate to the window's end (50 us of work) and alone after: as if k1 had run
      // [1.0, 1.0002] at half rate and k2 [1.0002, 1.0003].
      EXPECT_NEAR(*tl.finish(k2), 1.0 + 300e-6, 1e-12);
      EXPECT_NEAR(k2->carried, 50e-6, 1e-12) << "k1's lost work, which VGPU_TIMELINE shows apart";
    } else {
      EXPECT_EQ(tl.finish(k2), 1.0 + 200e-6);
      EXPECT_EQ(k2->carried, 0.0);
    }
    EXPECT_EQ(k3->carried, 0.0);
    EXPECT_EQ(tl.finish(marker), tl.finish(k2));
    EXPECT_NEAR(*tl.finish(k3), *tl.finish(k2) + 100e-6, 1e-12) << "after the window: alone";
    EXPECT_EQ(tl.finish(elsewhere), 1.0 + 100e-6) << "another GPU";
    EXPECT_EQ(tl.pending(), 0u);
  }
}

TEST(VirtualTimeline, AnOpWaitsForItsDurationAndItsStartCanBeAskedFirst) {
  VirtualTimeline tl;
  int s = 0;
  const StreamKey key{nullptr, &s};
  const OpRef measured = tl.append(key, StreamKind::non_blocking, 0, 1.0, -1, {}, /*measurement=*/500);
  const OpRef after = tl.append(key, StreamKind::non_blocking, 0, 1.0001, 0.5);
  EXPECT_FALSE(tl.finish(measured));
  EXPECT_FALSE(tl.start_if_ready(after));  // its stream's op has no duration yet
  EXPECT_EQ(tl.start_if_ready(measured), 1.0);
  EXPECT_EQ(tl.pending(), 2u);
  tl.resolve(measured_when_forced);  // not forced: nothing can be read
  EXPECT_EQ(tl.pending(), 2u);
  tl.resolve(measured_when_forced, after);
  EXPECT_EQ(tl.finish(measured), 1.0 + 500e-6);
  EXPECT_EQ(after->start, 1.0 + 500e-6);
  EXPECT_EQ(tl.pending(), 0u);
}

// A random program over several streams, with waits on other streams' ops, durations known at
// once or measured later, and starts asked before durations: each op's start and finish must be
// what the rule gives, computed here on its own.
TEST(VirtualTimeline, PlacesEveryOpByTheRule) {
  VirtualTimeline tl;
  tl.set_compute_beside_collective(1.0, 1.0);  // the plain rule (the slowdown beside collectives: below)
  constexpr int kStreams = 6;
  constexpr int kOps = 6144;
  int handles[kStreams] = {};
  struct Expected {
    OpRef op;
    std::vector<int> deps;  // indices of ops it waits for
    double duration;
    double start = 0, finish = 0;
  };
  std::vector<Expected> ops;
  std::vector<int> last(kStreams, -1);
  std::mt19937 rng(7);
  // Measurements are read when forced; an op appended start_first is told its start.
  std::unordered_map<const TimedOp*, double> expected_start;
  int starts_given = 0;
  const auto measure = [&](const TimedOp& op, std::optional<double> start, bool force) {
    EXPECT_EQ(start.has_value(), op.start_first);
    if (start) {
      EXPECT_EQ(*start, expected_start.at(&op));
      ++starts_given;
    }
    return measured_when_forced(op, start, force);
  };
  double clock = 0;
  for (int i = 0; i < kOps; ++i) {
    const int s = static_cast<int>(rng() % kStreams);
    clock += static_cast<double>(rng() % 100) * 1e-7;
    const double issue = clock - static_cast<double>(rng() % 50) * 1e-7;  // threads lag behind
    const uint64_t micros = 1 + rng() % 20;
    const bool measured = rng() % 4 == 0;
    const bool marker = !measured && rng() % 5 == 0;  // an event record: no duration, no kernel
    Expected e;
    e.duration = marker ? 0 : static_cast<double>(micros) * 1e-6;
    if (last[s] >= 0) e.deps.push_back(last[s]);
    std::vector<OpRef> waits;
    if (!ops.empty() && rng() % 3 == 0) {
      const int w = static_cast<int>(rng() % ops.size());
      e.deps.push_back(w);
      waits.push_back(ops[static_cast<size_t>(w)].op);
    }
    // Half the measured ops need their start for their duration (as NCCL kernels do).
    const bool start_first = measured && rng() % 2 == 0;
    e.op = tl.append({nullptr, &handles[s]}, StreamKind::non_blocking, s % 2, std::max(issue, 0.0),
                     measured ? -1 : e.duration, waits, micros, /*kernel=*/!marker, {}, start_first);
    e.start = std::max(issue, 0.0);
    for (int d : e.deps) e.start = std::max(e.start, ops[static_cast<size_t>(d)].finish);
    e.finish = e.start + e.duration;
    last[s] = i;
    expected_start[e.op.get()] = e.start;
    ops.push_back(std::move(e));
    // Now and then a start is asked before its duration is known (as an NCCL kernel's), or
    // everything so far is read (as a synchronization does).
    if (measured && rng() % 2 == 0) {
      const std::optional<double> start = tl.start_if_ready(ops.back().op);
      if (start) {
        EXPECT_EQ(*start, ops.back().start) << "op " << i;
      }
    }
    if (rng() % 500 == 0) tl.resolve(measure, ops.back().op);
  }
  tl.resolve(measure, ops.back().op);
  for (int s = 0; s < kStreams; ++s)
    if (last[s] >= 0) tl.resolve(measure, ops[static_cast<size_t>(last[s])].op);
  EXPECT_GT(starts_given, 0);
  EXPECT_EQ(tl.pending(), 0u);
  for (size_t i = 0; i < ops.size(); ++i) {
    ASSERT_TRUE(ops[i].op->resolved) << "op " << i;
    ASSERT_EQ(ops[i].op->start, ops[i].start) << "op " << i;
    ASSERT_EQ(ops[i].op->finish, ops[i].finish) << "op " << i;
  }
}

// Threads submitting to their own streams while others ask for starts without waiting (NCCL's
// proxy thread) and resolve (synchronizations): every op ends placed by its stream's order.
// Event records without an op of their own (the common path of cuEventRecord) place everything
// exactly where records with an op do: the same random program (launches of known and of
// measured durations, records, stream waits on events, event and stream asks, destroyed streams,
// on the legacy, blocking and non-blocking streams, issue times out of order as several threads
// give them) on two timelines, one eliding records, one not.
TEST(VirtualTimeline, EventRecordsWithoutAnOpArePlacedAsWithOne) {
  int placed_without_op = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    VirtualTimeline elided, full;
    full.set_elide_event_records(false);
    std::mt19937 rng(seed);
    int handles[5] = {};
    int events[4] = {};
    const StreamKind kinds[5] = {StreamKind::legacy, StreamKind::blocking, StreamKind::blocking,
                                 StreamKind::non_blocking, StreamKind::blocking};
    std::vector<std::pair<OpRef, OpRef>> ops;  // (elided, full): the same op on both
    // (elided, full): a stream's tail, whose finish is the same (its start is not: where the last
    // op was placed without one, the tail is an op of no duration at its finish)
    std::vector<std::pair<OpRef, OpRef>> tails;
    auto issue = [&rng] { return std::uniform_real_distribution<double>(0, 10)(rng); };
    for (int step = 0; step < 300; ++step) {
      const int s = static_cast<int>(rng() % 5);
      const StreamKey key{nullptr, s == 0 ? nullptr : &handles[s]};
      const void* event = &events[rng() % 4];
      switch (rng() % 7) {
        case 0:
        case 1: {  // a launch, of a known duration or measured (duration in `measurement`, us)
          const bool measured = rng() % 2 == 0;
          const double t = issue(), d = std::uniform_real_distribution<double>(0, 2)(rng);
          const auto us = static_cast<uint64_t>(d * 1e6);
          if (!measured && rng() % 2 == 0) {  // a settled launch, whose op nobody keeps
            OpRef e = elided.append_unless_placed(key, kinds[s], 0, t, d, true);
            OpRef f = full.append_unless_placed(key, kinds[s], 0, t, d, true);
            ASSERT_TRUE(f) << "ops are written out: the op is made";
            placed_without_op += e == nullptr;
            if (e) ops.emplace_back(std::move(e), std::move(f));
            break;
          }
          ops.emplace_back(elided.append(key, kinds[s], 0, t, measured ? -1 : d, {}, us),
                           full.append(key, kinds[s], 0, t, measured ? -1 : d, {}, us));
          break;
        }
        case 2:
        case 3: {
          const double t = issue();
          elided.record_event(event, key, kinds[s], 0, t);
          full.record_event(event, key, kinds[s], 0, t);
          break;
        }
        case 4: {  // cuStreamWaitEvent
          const OpRef we = elided.event_op(event), wf = full.event_op(event);
          ASSERT_EQ(we == nullptr, wf == nullptr);
          if (!we) break;
          const double t = issue();
          ops.emplace_back(elided.append(key, kinds[s], 0, t, 0, {we}), full.append(key, kinds[s], 0, t, 0, {wf}));
          break;
        }
        case 5: {  // an event or a stream asked for (cuEventQuery, cuStreamSynchronize)
          if (rng() % 2 == 0) {
            OpRef e = elided.event_op(event), f = full.event_op(event);
            if (e) ops.emplace_back(std::move(e), std::move(f));
          } else {
            OpRef e = elided.tail(key), f = full.tail(key);
            ASSERT_EQ(e == nullptr, f == nullptr);
            if (e) tails.emplace_back(std::move(e), std::move(f));
          }
          break;
        }
        default:
          if (s != 0 && rng() % 4 == 0) {
            elided.destroy_stream(key);
            full.destroy_stream(key);
          }
          break;
      }
    }
    for (auto* tl : {&elided, &full})  // cuCtxSynchronize
      for (const OpRef& op : tl->tails_of_context(nullptr)) tl->resolve(measured_when_forced, op);
    for (int s = 0; s < 5; ++s) {  // every stream's tail (cuStreamSynchronize)
      const StreamKey key{nullptr, s == 0 ? nullptr : &handles[s]};
      OpRef e = elided.tail(key), f = full.tail(key);
      ASSERT_EQ(e == nullptr, f == nullptr);
      if (e) tails.emplace_back(std::move(e), std::move(f));
    }
    expect_placed_alike(elided, full, ops, events, seed);
    for (auto& [e, f] : tails) {
      elided.resolve(measured_when_forced, e);
      full.resolve(measured_when_forced, f);
      ASSERT_TRUE(elided.finish(e).has_value()) << "seed " << seed;
      EXPECT_EQ(elided.finish(e), full.finish(f)) << "seed " << seed;
    }
  }
  EXPECT_GT(placed_without_op, 20) << "settled launches must be placed without an op";
}

// A record repeated on the same non-blocking stream skips the timeline's lookups (record_event's
// last record): placement must stay that of records with an op of their own, also across an
// event forgotten and its handle recorded again, a stream destroyed and its handle made again,
// and a context forgotten.
TEST(VirtualTimeline, RepeatedRecordsArePlacedAsWithOne) {
  int placed_without_op = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    TwinRun r(seed);
    VirtualTimeline &elided = r.a, &full = r.b;
    for (int step = 0; step < 400; ++step) {
      const StreamKey key = r.pick();
      const StreamKind kind = r.kinds[r.s];
      switch (r.rng() % 9) {
        case 0: {
          const bool measured = r.rng() % 4 == 0;
          const double t = r.issue(), d = std::uniform_real_distribution<double>(0, 2)(r.rng);
          placed_without_op += !r.launch(key, !measured, t, d);  // a settled one's op nobody keeps
          break;
        }
        case 1:
        case 2:
        case 3:
        case 4: {
          const double t = r.issue();
          elided.record_event(r.event, key, kind, 0, t);
          full.record_event(r.event, key, kind, 0, t);
          break;
        }
        case 5:
          r.wait_on_event(key);
          break;
        case 6:
          r.forget_event();
          break;
        case 7:
          r.destroy_stream(key);
          break;
        default:
          if (r.rng() % 8 == 0) r.forget_context();
          break;
      }
    }
    r.expect_alike(seed);
  }
  EXPECT_GT(placed_without_op, 500) << "settled launches must be placed without an op";
}

// A thread's memo of its last record (record_memo.h) stands for the record's lookups while the
// timeline's record generation holds: records made through memos (two threads' worth, each
// record on a non-blocking stream through its memo when it holds) are placed as records with an
// op of their own, across events forgotten, streams destroyed, contexts forgotten and launches
// in between; a memo never holds past any of those.
TEST(VirtualTimeline, MemoizedRecordsArePlacedAsWithOne) {
  int again = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    TwinRun r(seed);
    VirtualTimeline &memoized = r.a, &full = r.b;
    vgpu::pt::RecordMemo memos[2];
    for (int step = 0; step < 400; ++step) {
      const StreamKey key = r.pick();
      const StreamKind kind = r.kinds[r.s];
      vgpu::pt::RecordMemo& memo = memos[r.rng() % 2];
      const bool destroys = step % 5 == 4;  // often: every kind of change meets live memos
      bool changed = false;  // a mark or an entry may have gone: no memo may hold
      switch (destroys ? 6 + r.rng() % 3 : r.rng() % 6) {
        case 0: {
          const double t = r.issue(), d = std::uniform_real_distribution<double>(0, 2)(r.rng);
          r.launch(key, r.rng() % 2 == 0, t, d);
          break;
        }
        case 1:
        case 2:
        case 3:
        case 4: {
          const double t = r.issue();
          full.record_event(r.event, key, kind, 0, t);
          // As timed_api.cpp: the memo when it holds (only ever for the pair it was made for;
          // a handle here may stand in two contexts at once, which a driver's never does)...
          if (memoized.memo_holds(memo, r.event, key.stream) && memo.context == r.context) {
            ASSERT_EQ(kind, StreamKind::non_blocking);
            ASSERT_TRUE(memoized.record_again(memo, t));
            ++again;
            break;
          }
          // ...else looked up, the memo made when the record allows.
          const uint64_t generation = memoized.record_generation();
          memo.event = r.event;
          memo.stream = key.stream;
          memo.context = r.context;
          memo.device = 0;
          memoized.record_event(r.event, key, kind, 0, t, memo, generation);
          EXPECT_EQ(memo.owner != nullptr, kind == StreamKind::non_blocking);
          break;
        }
        case 5:
          r.wait_on_event(key);
          break;
        case 6:
          r.forget_event();
          changed = true;
          break;
        case 7:
          changed = r.destroy_stream(key);
          break;
        default:
          r.forget_context();
          changed = true;
          break;
      }
      if (changed) {
        for (const vgpu::pt::RecordMemo& m : memos) EXPECT_FALSE(memoized.memo_holds(m, m.event, m.stream));
      }
    }
    r.expect_alike(seed);
  }
  EXPECT_GT(again, 1000) << "records must be made through their memos";
}

// `event` recorded on `key`'s stream at `issue` on both timelines, on `tl` through a memo that
// later records of the same event on the same stream can take.
vgpu::pt::RecordMemo recorded_through_memo(VirtualTimeline& tl, VirtualTimeline& reference, const StreamKey& key,
                                           int* event, double issue) {
  vgpu::pt::RecordMemo memo;
  memo.event = event;
  memo.stream = key.stream;
  memo.context = key.context;
  memo.device = 0;
  tl.record_event(event, key, StreamKind::non_blocking, 0, issue, memo, tl.record_generation());
  reference.record_event(event, key, StreamKind::non_blocking, 0, issue);
  return memo;
}

// Another thread inside tl.resolve(), which holds the timeline's lock while it waits for a
// measurement, until release(): what a slow measurement does to the other threads' calls.
class LockHeldByResolver {
 public:
  explicit LockHeldByResolver(VirtualTimeline& tl)
      : thread_([this, &tl] {
          tl.resolve([this](const TimedOp& op, std::optional<double>, bool) {
            std::unique_lock l(mu_);
            holding_ = true;
            cv_.notify_all();
            cv_.wait(l, [this] { return released_; });
            return static_cast<double>(op.measurement) * 1e-6;
          });
        }) {
    std::unique_lock l(mu_);
    cv_.wait(l, [this] { return holding_; });
  }
  ~LockHeldByResolver() { release(); }
  void release() {
    {
      std::lock_guard l(mu_);
      released_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool holding_ = false, released_ = false;
  std::thread thread_;  // last: it starts once the members it uses exist
};

// A memo's record made only when the timeline's lock is free at once (record_again_if_free):
// while another thread holds it (a resolve waiting for a measurement) nothing is recorded and
// nothing waits; once it is free the record is made where record_again makes it.
TEST(VirtualTimeline, ARecordIfFreeNeverWaitsForTheLock) {
  VirtualTimeline tl, reference;
  reference.set_elide_event_records(false);
  int context = 0, handle = 0, event = 0;
  const StreamKey key{&context, &handle};
  vgpu::pt::RecordMemo memo = recorded_through_memo(tl, reference, key, &event, 1.0);
  ASSERT_TRUE(tl.memo_holds(memo, &event, &handle));
  const OpRef pending = tl.append(key, StreamKind::non_blocking, 0, 2.0, -1, {}, 3'000'000);  // 3 s, measured
  const OpRef pending_ref = reference.append(key, StreamKind::non_blocking, 0, 2.0, -1, {}, 3'000'000);
  LockHeldByResolver resolver(tl);
  EXPECT_FALSE(tl.record_again_if_free(memo, 4.0));  // the resolver holds the lock
  resolver.release();
  EXPECT_TRUE(tl.record_again_if_free(memo, 4.0));
  reference.record_event(&event, key, StreamKind::non_blocking, 0, 4.0);
  reference.resolve(measured_when_forced, pending_ref);
  const OpRef e = tl.event_op(&event), f = reference.event_op(&event);
  ASSERT_TRUE(e && f);
  tl.resolve(measured_when_forced, e);
  reference.resolve(measured_when_forced, f);
  EXPECT_EQ(tl.finish(e), reference.finish(f));
  EXPECT_EQ(tl.finish(e), 5.0);  // after the op (2.0 + 3), past its issue (4.0)
}

// A thread's settled records go to its slot without the timeline's lock (record_memo.h's
// RecordSlot): made while another thread holds the lock, and seen by whatever is done under the
// lock next, from any thread, where a record under the lock would have been (the reference
// timeline records every one under its lock). Also after the generation moved in between (an
// event made elsewhere): the record is then looked up. Without the fold as the lock is taken, the
// other thread's op started at its own issue (2.0), before the record's (6.0).
TEST(VirtualTimeline, ASlotRecordTakesNoLockAndIsSeenByTheNextHolder) {
  VirtualTimeline tl, reference;
  int context = 0, handle = 0, event = 0;
  const StreamKey key{&context, &handle};
  vgpu::pt::RecordMemo memo = recorded_through_memo(tl, reference, key, &event, 1.0);
  ASSERT_TRUE(tl.memo_holds(memo, &event, &handle));
  ASSERT_NE(memo.slot, nullptr);
  // Another thread holds the lock (a resolve waiting for a measurement) while the slot's record
  // is made: it does not wait for it.
  int other_handle = 0;
  const StreamKey other{&context, &other_handle};
  const OpRef pending = tl.append(other, StreamKind::non_blocking, 0, 0.0, -1, {}, 1'000'000);
  LockHeldByResolver resolver(tl);
  memo.slot->publish(3.0);
  memo.slot->publish(6.0);  // records folded together: the latest (and greatest) issue
  reference.record_event(&event, key, StreamKind::non_blocking, 0, 3.0);
  reference.record_event(&event, key, StreamKind::non_blocking, 0, 6.0);
  resolver.release();
  // An op of another thread on the same stream, issued earlier by its own clock, starts after
  // the record.
  OpRef op, op_ref;
  std::thread launcher([&] {
    op = tl.append(key, StreamKind::non_blocking, 0, 2.0, 1.0);
    op_ref = reference.append(key, StreamKind::non_blocking, 0, 2.0, 1.0);
  });
  launcher.join();
  EXPECT_EQ(tl.finish(op), reference.finish(op_ref));
  EXPECT_EQ(tl.finish(op), 7.0);  // from the record's 6.0
  const OpRef e = tl.event_op(&event), f = reference.event_op(&event);
  ASSERT_TRUE(e && f);
  EXPECT_EQ(tl.finish(e), reference.finish(f));
  EXPECT_EQ(tl.finish(e), 6.0);  // before the op
  // Re-recorded after the op, with the generation moved since the memo was checked (as an event
  // made by another thread moves it): looked up, and placed after the op.
  ASSERT_TRUE(tl.memo_holds(memo, &event, &handle));
  tl.invalidate_record_memos();
  memo.slot->publish(6.5);
  reference.record_event(&event, key, StreamKind::non_blocking, 0, 6.5);
  const OpRef g = tl.event_op(&event), h = reference.event_op(&event);
  ASSERT_TRUE(g && h);
  tl.resolve(measured_when_forced, g);
  reference.resolve(measured_when_forced, h);
  EXPECT_EQ(tl.finish(g), reference.finish(h));
  EXPECT_EQ(tl.finish(g), 7.0);
  tl.resolve(measured_when_forced, pending);
}

// A thread's slot records racing with another thread's locked work on the same stream (TSan: no
// race on the slot or on what it stands for); once the recording thread is joined, everything it
// recorded is seen: an op issued at 0 starts at its last record's issue.
TEST(VirtualTimeline, SlotRecordsRaceWithAnotherThreadsOps) {
  VirtualTimeline tl;
  int context = 0, handle = 0, event = 0;
  const StreamKey key{&context, &handle};
  constexpr int kRecords = 20000;
  std::thread recorder([&] {
    vgpu::pt::RecordMemo memo;
    memo.event = &event;
    memo.stream = &handle;
    memo.context = &context;
    memo.device = 0;
    tl.record_event(&event, key, StreamKind::non_blocking, 0, 0.0, memo, tl.record_generation());
    ASSERT_NE(memo.slot, nullptr);
    for (int i = 1; i <= kRecords; ++i) memo.slot->publish(static_cast<double>(i));
  });
  for (int i = 0; i < kRecords / 10; ++i) {
    tl.append(key, StreamKind::non_blocking, 0, 0.0, 0.0);
    tl.event_op(&event);
  }
  recorder.join();
  const OpRef op = tl.append(key, StreamKind::non_blocking, 0, 0.0, 1.0);
  EXPECT_EQ(tl.finish(op), kRecords + 1.0);
}

// Threads beyond the timeline's slots record under the lock (their memos have none), as before.
TEST(VirtualTimeline, ThreadsBeyondTheSlotsRecordUnderTheLock) {
  VirtualTimeline tl;
  int context = 0, event = 0;
  std::vector<int> handles(VirtualTimeline::kSlots + 1);
  std::vector<vgpu::pt::RecordMemo> memos(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    vgpu::pt::RecordMemo& m = memos[i];
    m.event = &event;
    m.stream = &handles[i];
    m.context = &context;
    m.device = 0;
    tl.record_event(&event, StreamKey{&context, &handles[i]}, StreamKind::non_blocking, 0, 1.0, m,
                    tl.record_generation());
    ASSERT_TRUE(tl.memo_holds(m, &event, &handles[i]));
    EXPECT_EQ(m.slot == nullptr, i == VirtualTimeline::kSlots) << i;
  }
  // A memo made again keeps its slot.
  tl.record_event(&event, StreamKey{&context, &handles[0]}, StreamKind::non_blocking, 0, 2.0, memos[0],
                  tl.record_generation());
  EXPECT_EQ(memos[0].slot, memos[1].slot - 1);
  EXPECT_TRUE(tl.record_again_if_free(memos.back(), 3.0));
  const OpRef op = tl.append(StreamKey{&context, &handles.back()}, StreamKind::non_blocking, 0, 0.0, 1.0);
  EXPECT_EQ(tl.finish(op), 4.0);
}

TEST(VirtualTimeline, ThreadsSubmitAndResolveTogether) {
  VirtualTimeline tl;
  constexpr int kThreads = 4, kOps = 3000;
  std::vector<std::vector<OpRef>> ops(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&tl, &ops, t] {
      int stream = 0;
      for (int i = 0; i < kOps; ++i) {
        const bool measured = i % 3 == 0;
        const OpRef op = tl.append({nullptr, &stream}, StreamKind::non_blocking, t, 1e-6 * i, measured ? -1 : 2e-6,
                                   {}, 1, true);
        ops[static_cast<size_t>(t)].push_back(op);
        if (measured) tl.start_if_ready(op, /*wait=*/false);
        if (i % 100 == 99) tl.resolve(measured_when_forced, op);
      }
      tl.resolve(measured_when_forced, ops[static_cast<size_t>(t)].back());
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(tl.pending(), 0u);
  for (const auto& mine : ops)
    for (size_t i = 1; i < mine.size(); ++i) {
      ASSERT_TRUE(tl.finish(mine[i]));
      ASSERT_EQ(mine[i]->start, std::max(mine[i]->issue, mine[i - 1]->finish));
    }
}

// A long run keeps bounded memory: once placed, an op is held only while it is its stream's last
// (or something names it), so the ops of a million launches are let go as they go by.
TEST(VirtualTimeline, PlacedOpsAreLetGoOverAMillionLaunches) {
  VirtualTimeline tl;
  int streams[2] = {};
  double clock = 0;
  std::vector<std::weak_ptr<TimedOp>> sampled;
  constexpr int kLaunches = 1 << 20;
  for (int i = 0; i < kLaunches; ++i) {
    clock += 1e-6;
    const StreamKey key{nullptr, &streams[i % 2]};
    const OpRef op = tl.append(key, StreamKind::non_blocking, 0, clock, 3e-6, {}, 0, true);
    if (i % 65536 == 0) sampled.push_back(op);
  }
  EXPECT_EQ(tl.pending(), 0u);
  for (size_t i = 0; i < sampled.size(); ++i) EXPECT_TRUE(sampled[i].expired()) << "sample " << i;
  // The streams' last ops are still held, and placed as the rule says (each stream's launches
  // queue behind each other: 3 us each, issued every 2 us on that stream).
  const OpRef last = tl.tail({nullptr, &streams[1]});
  ASSERT_TRUE(last);
  EXPECT_TRUE(last->resolved);
  EXPECT_NEAR(last->finish, (kLaunches / 2) * 3e-6 + 2e-6, 1e-6);
}

}  // namespace
