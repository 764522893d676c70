// Ranks, floors and finality: what is final never moves, wait_final blocks until the floors
// pass, history is reclaimed as floors advance.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "random_traces.h"
#include "simcore/chrome_trace.h"
#include "simcore/engine.h"
#include "test_clusters.h"

namespace simcore {
namespace {

using testing::random_trace;
using testing::same_time;
using testing::submit;
using testing::Trace;

ClusterSpec cluster() {
  ClusterSpec c = testing::small_cluster(2, 4, 1);
  c.fabric.oversubscription = 2.0;
  c.nvlink.latency_s = 1e-6;
  c.nic.latency_s = 2e-6;
  c.fabric.latency_s = 0.5e-6;
  return c;
}

std::vector<Interval> reference(const Trace& t) {
  auto e = make_engine(cluster());
  std::vector<EventId> ids;
  for (const auto& ev : t.events) ids.push_back(submit(*e, ev, ids));
  std::vector<Interval> out;
  for (EventId id : ids) out.push_back(*e->query(id));
  return out;
}

FlowSpec flow(int src, int dst, uint64_t bytes, Time not_before = 0) {
  FlowSpec f;
  f.src_gpu = src;
  f.dst_gpu = dst;
  f.bytes = bytes;
  f.not_before = not_before;
  return f;
}

// Ranks submit their events in their own order (each rank's not_before never decreases), in a
// random interleaving, each promising the not_before of its next event. Whatever is_final
// reports final must already be the reference answer.
TEST(Ranks, FinalEventsNeverMove) {
  std::mt19937_64 rng(99);
  uint64_t checked_early = 0;
  for (int trace = 0; trace < 400; ++trace) {
    const int ranks = 1 + static_cast<int>(rng() % 4);
    const Trace t = random_trace(rng, 8, 10 + static_cast<int>(rng() % 50), ranks);
    const auto ref = reference(t);
    auto e = make_engine(cluster());
    std::vector<std::vector<int>> queue(ranks);
    for (size_t i = 0; i < t.events.size(); ++i) queue[t.events[i].rank].push_back(static_cast<int>(i));
    std::vector<size_t> next(ranks, 0);
    for (int r = 0; r < ranks; ++r) e->register_rank(r);
    std::vector<EventId> ids(t.events.size(), kNoEvent);
    std::map<size_t, Interval> seen_final;
    SCOPED_TRACE("trace " + std::to_string(trace));
    for (size_t done = 0; done < t.events.size();) {
      const int r = static_cast<int>(rng() % ranks);
      if (next[r] == queue[r].size()) continue;
      const int i = queue[r][next[r]];
      bool ready = true;
      for (int j : t.events[i].after) ready = ready && ids[j] != kNoEvent;
      if (!ready) continue;
      ids[i] = submit(*e, t.events[i], ids);
      ++next[r];
      ++done;
      if (next[r] < queue[r].size()) e->set_rank_floor(r, t.events[queue[r][next[r]]].not_before);
      else if (rng() % 2) e->unregister_rank(r);
      else e->set_rank_floor(r, std::numeric_limits<double>::infinity());
      // Probe a few events: once final, an interval is the reference's and stays so.
      for (int probe = 0; probe < 3; ++probe) {
        const size_t k = rng() % t.events.size();
        if (ids[k] == kNoEvent || !e->is_final(ids[k])) continue;
        const Interval got = *e->query(ids[k]);
        ASSERT_TRUE(same_time(got.finish, ref[k].finish) && same_time(got.start, ref[k].start))
            << "event " << k << " final at [" << got.start << ", " << got.finish << "], reference ["
            << ref[k].start << ", " << ref[k].finish << "]";
        seen_final.emplace(k, got);
        ++checked_early;
      }
    }
    for (int r = 0; r < ranks; ++r)
      if (queue[r].empty()) e->unregister_rank(r);  // a rank that had nothing to submit
    for (size_t i = 0; i < t.events.size(); ++i) {
      ASSERT_TRUE(e->is_final(ids[i]));
      const Interval got = *e->query(ids[i]);
      ASSERT_TRUE(same_time(got.start, ref[i].start) && same_time(got.finish, ref[i].finish)) << "event " << i;
    }
    for (const auto& [k, iv] : seen_final) ASSERT_EQ(e->query(ids[k])->finish, iv.finish);
  }
  EXPECT_GT(checked_early, 1000u);
}

// A long stream from 4 ranks whose floors advance: the history held stays bounded.
TEST(Ranks, HistoryIsReclaimedAsFloorsAdvance) {
  constexpr int kRanks = 4, kEvents = 20000;
  std::mt19937_64 rng(5);
  auto run = [&](bool with_ranks) {
    auto e = make_engine(cluster(), EngineOptions{SolverMode::incremental, false});
    if (with_ranks)
      for (int r = 0; r < kRanks; ++r) e->register_rank(r);
    std::vector<Time> clock(kRanks, 0.0);
    std::vector<EventId> last(kRanks, kNoEvent);
    uint64_t max_live = 0, max_segments = 0;
    for (int i = 0; i < kEvents; ++i) {
      const int r = i % kRanks;
      FlowSpec f = flow(static_cast<int>(rng() % 8), static_cast<int>(rng() % 8), 1 << 16, clock[r]);
      if (last[(r + 1) % kRanks] != kNoEvent && rng() % 2) f.after.push_back(last[(r + 1) % kRanks]);
      last[r] = e->add_flow(f);
      clock[r] += 1e-6 * static_cast<double>(1 + rng() % 3);
      if (with_ranks) e->set_rank_floor(r, clock[r]);
      if (i % 100 == 0) {
        const auto s = e->stats();
        max_live = std::max(max_live, s.events_live);
        max_segments = std::max(max_segments, s.flow_segments);
      }
    }
    return std::make_tuple(max_live, max_segments, e->stats());
  };
  const auto [live, segments, stats] = run(true);
  EXPECT_LT(live, 300u);
  EXPECT_LT(segments, 600u);
  EXPECT_EQ(stats.events_submitted, static_cast<uint64_t>(kEvents));
  EXPECT_GT(stats.floor, 0.0);
  const auto [live_unbounded, segments_unbounded, stats_unbounded] = run(false);
  EXPECT_EQ(live_unbounded, static_cast<uint64_t>(kEvents - 100 + 1));
  EXPECT_GT(stats_unbounded.history_bytes, 20 * stats.history_bytes);
}

TEST(Ranks, WaitFinalBlocksUntilEveryFloorPasses) {
  auto e = make_engine(testing::small_cluster(1, 4));
  e->register_rank(0);
  e->register_rank(1);
  const EventId x = e->add_flow(flow(0, 1, 4 << 20));
  const Time finish = e->query(x)->finish;
  std::atomic<bool> returned{false};
  std::optional<Interval> got;
  std::thread waiter([&] {
    got = e->wait_final(x);
    returned = true;
  });
  EXPECT_FALSE(e->is_final(x));
  e->set_rank_floor(0, 1.0);
  e->set_rank_floor(1, finish / 2);
  EXPECT_FALSE(e->is_final(x));
  EXPECT_FALSE(returned.load());
  e->set_rank_floor(1, finish);
  waiter.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->finish, finish);
  EXPECT_TRUE(e->is_final(x));
}

TEST(Ranks, ShutdownReleasesWaiters) {
  auto e = make_engine(testing::small_cluster(1, 4));
  e->register_rank(0);
  const EventId x = e->add_flow(flow(0, 1, 1 << 20));
  std::optional<Interval> got = Interval{};
  std::thread waiter([&] { got = e->wait_final(x); });
  e->shutdown();
  waiter.join();
  EXPECT_FALSE(got.has_value());
}

TEST(Ranks, RanksWaitingOnEachOtherMakeProgress) {
  auto e = make_engine(testing::small_cluster(1, 4));
  e->register_rank(0);
  e->register_rank(1);
  const EventId a = e->add_flow(flow(0, 1, 8 << 20));
  const EventId b = e->add_flow(flow(2, 3, 1 << 20));
  // Neither rank promises anything by hand: rank 0 waits for a, rank 1 for b and then for a.
  // While waiting, each rank's floor follows what it waits for, so both get through.
  std::optional<Interval> ga, gb, gb2;
  std::thread t0([&] { ga = e->wait_final_for_rank(a, 0); });
  std::thread t1([&] {
    gb = e->wait_final_for_rank(b, 1);
    gb2 = e->wait_final_for_rank(a, 1);
  });
  t0.join();
  t1.join();
  ASSERT_TRUE(ga && gb && gb2);
  EXPECT_EQ(gb2->finish, ga->finish);
  EXPECT_EQ(ga->finish, e->query(a)->finish);
  EXPECT_EQ(gb->finish, e->query(b)->finish);
  // Each rank's floor is now what it waited for: later work is not final before they promise more.
  const EventId c = e->add_flow(flow(0, 2, 1 << 20, ga->finish));
  EXPECT_FALSE(e->is_final(c));
  e->set_rank_floor(0, 1.0);
  e->set_rank_floor(1, 1.0);
  EXPECT_TRUE(e->is_final(c));
}

TEST(Ranks, WithoutRanksEverythingIsFinalAtOnce) {
  auto e = make_engine(testing::small_cluster(1, 4));
  const EventId a = e->add_flow(flow(0, 1, 1 << 20));
  EXPECT_TRUE(e->is_final(a));
  EXPECT_EQ(e->wait_final(a)->finish, e->query(a)->finish);
  // Still rolled back by a later submission in its past (a single user's own business).
  const Time before = e->query(a)->finish;
  e->add_flow(flow(0, 2, 1 << 20));
  EXPECT_GT(e->query(a)->finish, before);
  // The first rank starts at the reclaimed floor (0): nothing is final until it promises more.
  e->register_rank(7);
  EXPECT_FALSE(e->is_final(a));
  e->set_rank_floor(7, 1.0);
  EXPECT_TRUE(e->is_final(a));
}

// An event keeps its dependencies by id after they are retired (retire() does not touch the
// records that refer to it), and the retired event's slot goes to the next submission. When a
// late flow makes the dependent wait again, the retired dependency must count as done (every
// sweep starts past its finish), never as the new event in its slot.
TEST(Ranks, ARetiredDependencyIsNotTheEventThatReusedItsSlot) {
  auto run = [](bool ranks) {
    auto e = make_engine(cluster());
    if (ranks) e->register_rank(0);
    const EventId a = e->add_flow(flow(0, 1, 4'000'000));    // 10 us + 1 us: finishes at 11 us
    const EventId lng = e->add_flow(flow(2, 3, 40'000'000));  // alone: finishes at 101 us
    TaskSpec t;
    t.gpu = 5;
    t.duration = 5e-6;
    t.after = {a, lng};
    const EventId b = e->add_task(t);
    EXPECT_NEAR(e->query(b)->start, 101e-6, 1e-12);
    if (ranks) {
      e->set_rank_floor(0, 20e-6);  // a is retired, its slot freed
      EXPECT_EQ(e->stats().events_live, 2u);
    }
    TaskSpec late;  // takes a's slot, and finishes long after everything else
    late.gpu = 6;
    late.duration = 1e-6;
    late.not_before = 500e-6;
    const EventId c = e->add_task(late);
    // Shares GPU 3's NVLink down link with `lng` from 30 us: `lng` ends later, and b waits again.
    const EventId d = e->add_flow(flow(1, 3, 40'000'000, 30e-6));
    return std::vector<Interval>{*e->query(a), *e->query(lng), *e->query(b), *e->query(c), *e->query(d)};
  };
  const auto with_ranks = run(true), reference = run(false);
  EXPECT_GT(reference[1].finish, 101e-6 + 1e-9);                    // the late flow moved lng
  EXPECT_NEAR(reference[2].start, reference[1].finish, 1e-12);      // b waits for lng only
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_NEAR(with_ranks[i].start, reference[i].start, 1e-12) << i;
    EXPECT_NEAR(with_ranks[i].finish, reference[i].finish, 1e-12) << i;
  }
}

TEST(Ranks, BrokenPromiseIsMovedToTheFloor) {
  auto e = make_engine(testing::small_cluster(1, 4));
  e->register_rank(0);
  e->set_rank_floor(0, 1.0);
  const EventId late = e->add_flow(flow(0, 1, 1 << 20, 0.5));
  EXPECT_EQ(e->query(late)->start, 1.0);
  // Promises only move forward.
  e->set_rank_floor(0, 0.25);
  const EventId x = e->add_flow(flow(0, 1, 0, 0.75));
  EXPECT_EQ(e->query(x)->start, 1.0);
}

TEST(Ranks, TimelineIsChromeTraceJson) {
  auto e = make_engine(testing::small_cluster(1, 4));
  FlowSpec f = flow(0, 1, 4000000);  // 10 us at 400 GB/s
  f.label = "send \"a\"";
  const EventId a = e->add_flow(f);
  e->add_flow(flow(0, 2, 4000000));   // overlaps a on GPU 0: another net lane
  e->add_flow(flow(0, 3, 1000, 1.0)); // long after: reuses the first lane
  TaskSpec t;
  t.gpu = 1, t.lane = 3, t.duration = 1e-3, t.after = {a}, t.label = "kernel";
  e->add_task(t);
  const auto json = nlohmann::json::parse(e->timeline_json());
  std::map<std::string, nlohmann::json> by_name;
  std::set<std::pair<int, int>> flow_lanes;
  for (const auto& ev : json.at("traceEvents")) {
    if (ev.at("ph") != "X") continue;
    by_name[ev.at("name").get<std::string>()] = ev;
    if (ev.at("cat") == "flow") flow_lanes.insert({ev.at("pid").get<int>(), ev.at("tid").get<int>()});
  }
  ASSERT_TRUE(by_name.count("send \"a\""));
  const auto& fa = by_name["send \"a\""];
  EXPECT_EQ(fa.at("pid"), 0);
  EXPECT_NEAR(fa.at("ts").get<double>(), 0.0, 1e-6);
  EXPECT_NEAR(fa.at("dur").get<double>(), 20.0, 1e-6);  // shares GPU 0's up link: 20 us
  EXPECT_EQ(fa.at("args").at("dst"), 1);
  ASSERT_TRUE(by_name.count("kernel"));
  EXPECT_EQ(by_name["kernel"].at("pid"), 1);
  EXPECT_EQ(by_name["kernel"].at("tid"), 3);
  EXPECT_NEAR(by_name["kernel"].at("ts").get<double>(), 20.0, 1e-6);
  EXPECT_NEAR(by_name["kernel"].at("dur").get<double>(), 1000.0, 1e-6);
  EXPECT_EQ(flow_lanes.size(), 2u);  // two overlapping flows, the third reuses a lane
}

// A kernel's span that holds work other kernels lost beside a collective (vgpu's passthrough books
// it on the device's next kernel) says so: "carried_us" beside "issued_us", only when there is any.
TEST(Ranks, ATimelineEntryTellsTheWorkItCarried) {
  std::vector<TimelineEntry> entries(2);
  entries[0].lane = 0, entries[0].start = 1e-3, entries[0].finish = 2e-3, entries[0].issue = 0.5e-3;
  entries[0].carried = 0.25e-3, entries[0].label = "carrier";
  entries[1].lane = 0, entries[1].start = 2e-3, entries[1].finish = 3e-3, entries[1].issue = 0.5e-3;
  entries[1].label = "plain";
  const auto json = nlohmann::json::parse(chrome_trace_json(entries));
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& ev : json.at("traceEvents"))
    if (ev.at("ph") == "X") by_name[ev.at("name").get<std::string>()] = ev;
  ASSERT_EQ(by_name.size(), 2u);
  EXPECT_NEAR(by_name["carrier"].at("args").at("carried_us").get<double>(), 250.0, 1e-9);
  EXPECT_NEAR(by_name["carrier"].at("args").at("issued_us").get<double>(), 500.0, 1e-9);
  EXPECT_FALSE(by_name["plain"].at("args").contains("carried_us"));
}

}  // namespace
}  // namespace simcore

namespace simcore {
namespace {

// One task of a chain of tasks on rank 0: 1 us long, not before `clock`, after `prev`.
EventId add_chain_task(Engine& e, Time clock, EventId prev) {
  TaskSpec t;
  t.duration = 1e-6;
  t.not_before = clock;
  if (prev != kNoEvent) t.after.push_back(prev);
  return e.add_task(t);
}

// A submitter that releases the ids it will not name again (Engine::release) lets the engine
// forget the final results too, a chunk of ids at a time; ids not released, or not yet final,
// keep answering; an id forgotten is unknown (nullopt, refused as a dependency), never a crash.
TEST(Ranks, ReleasedFinalEventsAreForgotten) {
  constexpr int kEvents = 100'000;
  auto run = [&](bool release) {
    auto e = make_engine(testing::small_cluster(1, 2), EngineOptions{SolverMode::incremental, false});
    e->register_rank(0);
    Time clock = 0;
    EventId prev = kNoEvent, kept = kNoEvent;
    for (int i = 0; i < kEvents; ++i) {
      const EventId id = add_chain_task(*e, clock, prev);
      if (i == 10) kept = id;  // held by the submitter: never released
      if (release && prev != kNoEvent && prev != kept) e->release(prev);
      prev = id;
      clock += 2e-6;
      e->set_rank_floor(0, clock);
    }
    return std::make_tuple(e->stats(), std::move(e), kept, prev);
  };
  auto [kept_stats, kept_engine, k1, p1] = run(false);
  auto [stats, engine, kept, last] = run(true);
  EXPECT_EQ(stats.events_submitted, static_cast<uint64_t>(kEvents));
  // 20 bytes per event kept without releases; with them, a few chunks (the one holding `kept`,
  // the newest ones not yet final or not full).
  EXPECT_GT(kept_stats.result_bytes, 20u * kEvents);
  EXPECT_LT(stats.result_bytes, 5u * 4096 * 20);
  // The kept event and the newest still answer; a released final one of a freed chunk does not.
  ASSERT_TRUE(engine->query(kept).has_value());
  EXPECT_NEAR(engine->query(kept)->start, 10 * 2e-6, 1e-12);
  EXPECT_TRUE(engine->query(last).has_value());
  EXPECT_FALSE(engine->query(kept + 5000).has_value());
  TaskSpec t;
  t.after.push_back(kept + 5000);
  EXPECT_EQ(engine->add_task(t), kNoEvent);
  t.after = {kept};
  EXPECT_NE(engine->add_task(t), kNoEvent);
  // Released twice, or an unknown id: ignored.
  engine->release(last);
  engine->release(last);
  engine->release(kNoEvent);
  engine->release(last + 1000);
  EXPECT_TRUE(engine->query(last).has_value());
}

// Released a step at a time (Engine::release(span): one call and one lock for many ids), the
// same ids are forgotten as when released one by one; ids in the span that are unknown, held
// or released twice are ignored as by release(id).
TEST(Ranks, IdsReleasedInBatchesAreForgottenAsOneByOne) {
  constexpr int kEvents = 100'000;
  auto e = make_engine(testing::small_cluster(1, 2), EngineOptions{SolverMode::incremental, false});
  e->register_rank(0);
  Time clock = 0;
  EventId prev = kNoEvent, kept = kNoEvent;
  std::vector<EventId> batch;
  for (int i = 0; i < kEvents; ++i) {
    const EventId id = add_chain_task(*e, clock, prev);
    if (i == 10) kept = id;
    if (prev != kNoEvent && prev != kept) batch.push_back(prev);
    if (batch.size() == 300) {
      batch.push_back(batch.back());  // twice in one call
      batch.push_back(kNoEvent);
      e->release(std::span<const EventId>(batch));
      batch.clear();
    }
    prev = id;
    clock += 2e-6;
    e->set_rank_floor(0, clock);
  }
  const auto stats = e->stats();
  EXPECT_LT(stats.result_bytes, 5u * 4096 * 20);
  ASSERT_TRUE(e->query(kept).has_value());
  EXPECT_NEAR(e->query(kept)->start, 10 * 2e-6, 1e-12);
  EXPECT_TRUE(e->query(prev).has_value());
  EXPECT_FALSE(e->query(kept + 5000).has_value());
  e->release(std::span<const EventId>());
  EXPECT_TRUE(e->query(prev).has_value());
}

}  // namespace
}  // namespace simcore
