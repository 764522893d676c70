// Engine::add_flows(): like flows of one call are simulated as one flow group
// (simcore/src/flow_group.h). Whatever the group path does, every answer must be the one the
// same flows get submitted one by one: exactly while the members stay alike, and up to rounding
// once they come apart (other traffic on a member's link, members whose dependencies finish
// apart, a rollback reaching a simulated group).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <span>

#include "random_traces.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"
#include "simulator.h"
#include "test_clusters.h"

namespace simcore {
namespace {

using testing::same_time;
using testing::submit;
using testing::Trace;
using testing::TraceEvent;

// 4 nodes x 8 GPUs, 2 nodes a leaf (so a ring crosses leaves), latencies everywhere.
ClusterSpec group_cluster() {
  ClusterSpec c = testing::small_cluster(4, 8, 2);
  c.nvlink.latency_s = 1e-6;
  c.nic.latency_s = 2e-6;
  c.fabric.latency_s = 0.5e-6;
  return c;
}

// A trace cut into calls: each call's events are submitted together (add_flows, or add_task
// for a call of one task). No event depends on an event of its own call.
struct CalledTrace {
  Trace trace;
  std::vector<std::vector<int>> calls;
};

// Ring all-reduce steps: step s, GPU i sends to i + 1 after step s - 1's flows of i - 1 and i.
CalledTrace ring(int gpus, int steps, uint64_t chunk) {
  CalledTrace t;
  for (int s = 0; s < steps; ++s) {
    t.calls.emplace_back();
    for (int i = 0; i < gpus; ++i) {
      TraceEvent e;
      e.src = i;
      e.dst = (i + 1) % gpus;
      e.bytes = chunk;
      if (s > 0) e.after = {(s - 1) * gpus + (i + gpus - 1) % gpus, (s - 1) * gpus + i};
      t.calls.back().push_back(static_cast<int>(t.trace.events.size()));
      t.trace.events.push_back(e);
    }
  }
  return t;
}

// Steps of like flows (same bytes and not_before within a call, random GPUs, so that some of a
// call's flows share links and some meet other calls' flows), each depending on random earlier
// events, with single flows and tasks at random times in between.
CalledTrace stepped(std::mt19937_64& rng, int gpus, int calls) {
  CalledTrace t;
  std::uniform_int_distribution<int> gpu(0, gpus - 1), pct(0, 99);
  for (int c = 0; c < calls; ++c) {
    const int first = static_cast<int>(t.trace.events.size());
    t.calls.emplace_back();
    const int kind = pct(rng);
    const int count = kind < 20 ? 1 : 2 + static_cast<int>(rng() % 10);
    const bool task = kind < 8;
    const uint64_t bytes = (uint64_t(1) << 18) * (1 + rng() % 3);
    const Time not_before = 1e-6 * static_cast<double>(rng() % 60);
    for (int k = 0; k < count; ++k) {
      TraceEvent e;
      e.is_flow = !task;
      e.src = gpu(rng);
      e.dst = pct(rng) < 5 ? e.src : gpu(rng);
      e.bytes = pct(rng) < 5 ? 0 : bytes;
      e.duration = 1e-6 * static_cast<double>(1 + rng() % 20);
      e.not_before = not_before;
      const int deps = first == 0 ? 0 : static_cast<int>(rng() % 3);
      for (int d = 0; d < deps; ++d) {
        const int j = static_cast<int>(rng() % first);
        if (std::find(e.after.begin(), e.after.end(), j) == e.after.end()) e.after.push_back(j);
      }
      t.calls.back().push_back(static_cast<int>(t.trace.events.size()));
      t.trace.events.push_back(std::move(e));
    }
  }
  return t;
}

// One call's events as flows, their dependencies by the ids given so far.
std::vector<FlowSpec> flows_of(const CalledTrace& t, int call, const std::vector<EventId>& ids) {
  std::vector<FlowSpec> flows;
  for (int i : t.calls[call]) {
    const TraceEvent& e = t.trace.events[i];
    FlowSpec f;
    f.src_gpu = e.src;
    f.dst_gpu = e.dst;
    f.bytes = e.bytes;
    f.not_before = e.not_before;
    for (int j : e.after) f.after.push_back(ids[j]);
    flows.push_back(std::move(f));
  }
  return flows;
}

// Submits one call: its flows through add_flows() (a task alone through add_task()).
void submit_call(Engine& engine, const CalledTrace& t, int call, std::vector<EventId>& ids) {
  const std::vector<int>& events = t.calls[call];
  if (events.size() == 1 && !t.trace.events[events[0]].is_flow) {
    ids[events[0]] = submit(engine, t.trace.events[events[0]], ids);
    return;
  }
  const std::vector<FlowSpec> flows = flows_of(t, call, ids);
  std::vector<EventId> out(flows.size());
  engine.add_flows(flows, out);
  for (size_t k = 0; k < events.size(); ++k) ids[events[k]] = out[k];
}

std::vector<Interval> intervals(Engine& e, const std::vector<EventId>& ids) {
  std::vector<Interval> out;
  for (EventId id : ids) out.push_back(e.query(id).value_or(Interval{-1, -1}));
  return out;
}

// Every event one by one, in index order, then one sweep.
std::vector<Interval> one_by_one(const ClusterSpec& c, const Trace& t, Engine::Stats* stats = nullptr) {
  auto e = make_engine(c);
  std::vector<EventId> ids;
  for (const TraceEvent& ev : t.events) ids.push_back(submit(*e, ev, ids));
  auto out = intervals(*e, ids);
  if (stats) *stats = e->stats();
  return out;
}

// The calls in `order`, simulating after a call with probability `sync_chance`.
std::vector<Interval> by_calls(const ClusterSpec& c, const CalledTrace& t, const std::vector<int>& order,
                               double sync_chance, std::mt19937_64& rng, Engine::Stats* stats = nullptr) {
  auto e = make_engine(c);
  std::vector<EventId> ids(t.trace.events.size(), kNoEvent);
  std::bernoulli_distribution sync(sync_chance);
  for (int call : order) {
    submit_call(*e, t, call, ids);
    if (sync(rng)) e->query(ids[t.calls[call][0]]);
  }
  for (EventId id : ids) EXPECT_NE(id, kNoEvent);
  auto out = intervals(*e, ids);
  if (stats) *stats = e->stats();
  return out;
}

std::vector<int> in_order(const CalledTrace& t) {
  std::vector<int> order(t.calls.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  return order;
}

// A random order of the calls in which every call comes after the calls it depends on.
std::vector<int> random_call_order(const CalledTrace& t, std::mt19937_64& rng) {
  const int n = static_cast<int>(t.calls.size());
  std::vector<int> call_of(t.trace.events.size());
  for (int c = 0; c < n; ++c)
    for (int i : t.calls[c]) call_of[i] = c;
  std::vector<int> missing(n, 0), order, ready;
  std::vector<std::vector<int>> dependents(n);
  for (int c = 0; c < n; ++c) {
    std::vector<int> on;
    for (int i : t.calls[c])
      for (int j : t.trace.events[i].after) on.push_back(call_of[j]);
    std::sort(on.begin(), on.end());
    on.erase(std::unique(on.begin(), on.end()), on.end());
    missing[c] = static_cast<int>(on.size());
    for (int d : on) dependents[d].push_back(c);
    if (on.empty()) ready.push_back(c);
  }
  while (!ready.empty()) {
    const size_t k = rng() % ready.size();
    const int c = ready[k];
    ready[k] = ready.back();
    ready.pop_back();
    order.push_back(c);
    for (int d : dependents[c])
      if (--missing[d] == 0) ready.push_back(d);
  }
  return order;
}

::testing::AssertionResult same(const std::vector<Interval>& want, const std::vector<Interval>& got) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!same_time(want[i].start, got[i].start) || !same_time(want[i].finish, got[i].finish))
      return ::testing::AssertionFailure() << "event " << i << ": [" << got[i].start << ", " << got[i].finish
                                           << "] instead of [" << want[i].start << ", " << want[i].finish << "]";
  return ::testing::AssertionSuccess();
}

TEST(FlowGroup, ARingStepByStepEqualsItsFlowsOneByOneExactly) {
  const ClusterSpec c = group_cluster();
  const CalledTrace t = ring(32, 20, 8 << 20);
  std::mt19937_64 rng(1);
  Engine::Stats single, grouped;
  const auto want = one_by_one(c, t.trace, &single);
  const auto got = by_calls(c, t, in_order(t), 0.0, rng, &grouped);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].start, want[i].start) << "flow " << i;
    ASSERT_EQ(got[i].finish, want[i].finish) << "flow " << i;
  }
  // Every flow went through the solver one by one; as groups, none did (each member alone on
  // its links, at its narrowest link's rate).
  EXPECT_GE(single.solved_flows, t.trace.events.size());
  EXPECT_EQ(grouped.solved_flows, 0u);
  EXPECT_EQ(grouped.events_submitted, single.events_submitted);
  // Submitted before anything is simulated, a step's members cannot know when their
  // dependencies finish (leaf crossings take longer), but each dependency's estimate (its
  // finish if it moves alone, Record::estimate) is exact here, and members are grouped by the
  // latest of them (submit_flows' key): none leaves its group to start apart. (Grouped by
  // route class alone, 494 of the 640 did, each copied out: extract().)
  EXPECT_EQ(grouped.group_members_apart, 0u);
  // Each step's groups are told by the groups of the step before through one link per pair
  // of groups (flow_group.h: FlowGroup::Dependent), not an edge per member dependency (1216
  // here), and no link had to become its edges again (no group came apart).
  EXPECT_GE(grouped.group_links, 19u);
  EXPECT_LT(grouped.group_links, 19u * 32 * 2);
  EXPECT_EQ(grouped.group_links_expanded, 0u);
}

// A call with more classes than its class table first holds (submit_flows() sizes the table
// from the last call's count of classes and doubles it as it fills): every class keeps its
// members together across the table's growth, and the answers are the flows' one by one.
TEST(FlowGroup, ACallWithManyClassesKeepsEachClassWholeAsItsTableGrows) {
  ClusterSpec c = group_cluster();
  c.nodes = 8;  // 64 GPUs
  CalledTrace t;
  for (int call = 0; call < 3; ++call) {
    t.calls.emplace_back();
    const int classes = call == 2 ? 8 : 32;  // the second call starts from the first's count
    for (int i = 0; i < 64; ++i) {
      TraceEvent e;
      e.src = i;
      e.dst = (i + 1) % 64;  // each GPU sends once and receives once: members share no link
      e.bytes = static_cast<uint64_t>(1 + i % classes) << 20;
      e.not_before = call;  // calls a second apart: nothing of one meets the next
      t.calls.back().push_back(static_cast<int>(t.trace.events.size()));
      t.trace.events.push_back(e);
    }
  }
  std::mt19937_64 rng(5);
  Engine::Stats grouped;
  const auto want = one_by_one(c, t.trace);
  const auto got = by_calls(c, t, in_order(t), 0.0, rng, &grouped);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].start, want[i].start) << "flow " << i;
    ASSERT_EQ(got[i].finish, want[i].finish) << "flow " << i;
  }
  // Every class has at least two members, alone on their links: all grouped, none solved (a
  // class lost in the table's growth would leave its members alone, each through the solver).
  EXPECT_EQ(grouped.solved_flows, 0u);
}

// A member that names one dependency twice (a program may pass the same event twice) waits for it
// once: the ring's answers are those of the ring that names each once, grouped and one by one.
TEST(FlowGroup, AMemberNamingADependencyTwiceWaitsForItOnce) {
  const ClusterSpec c = group_cluster();
  const CalledTrace plain = ring(16, 6, 1 << 20);
  CalledTrace twice = plain;
  for (TraceEvent& e : twice.trace.events)
    if (!e.after.empty()) e.after.insert(e.after.begin() + 1, e.after.front());
  std::mt19937_64 rng(3);
  const auto want = one_by_one(c, plain.trace);
  EXPECT_TRUE(same(want, one_by_one(c, twice.trace)));
  EXPECT_TRUE(same(want, by_calls(c, twice, in_order(twice), 0.0, rng)));
  EXPECT_TRUE(same(want, by_calls(c, twice, in_order(twice), 0.5, rng)));
}

TEST(FlowGroup, ARingStepByStepWithQueriesEqualsItsFlowsOneByOne) {
  // A query after every step: each step's groups are simulated before the next arrives, and
  // the next step's sweep starts before some of them finish. Nothing reaches them (a step's
  // flows start on links the previous step's flows have left), so they stay whole.
  const ClusterSpec c = group_cluster();
  const CalledTrace t = ring(32, 20, 8 << 20);
  std::mt19937_64 rng(2);
  const auto want = one_by_one(c, t.trace);
  Engine::Stats grouped;
  const auto got = by_calls(c, t, in_order(t), 1.0, rng, &grouped);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].start, want[i].start) << "flow " << i;
    ASSERT_EQ(got[i].finish, want[i].finish) << "flow " << i;
  }
  EXPECT_EQ(grouped.solved_flows, 0u);
  // Behind a query, a step's dependencies are simulated: members are grouped by the instant
  // they finished (submit_flows' key), so none has to leave its group to start apart.
  EXPECT_EQ(grouped.group_members_apart, 0u);
}

TEST(FlowGroup, MembersThatMeetOtherTrafficOrStartApartComeApart) {
  const ClusterSpec c = group_cluster();
  std::mt19937_64 rng(3);
  uint64_t saved = 0, solved = 0, apart = 0, expanded = 0;
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const CalledTrace t = stepped(rng, 32, 40);
    Engine::Stats single, grouped;
    const auto want = one_by_one(c, t.trace, &single);
    ASSERT_TRUE(same(want, by_calls(c, t, in_order(t), 0.0, rng, &grouped)));
    saved += single.solved_flows - std::min(single.solved_flows, grouped.solved_flows);
    solved += grouped.solved_flows;
    apart += grouped.group_members_apart;
    expanded += grouped.group_links_expanded;
  }
  EXPECT_GT(saved, 0u);   // some groups stayed whole
  EXPECT_GT(solved, 0u);  // and some came apart into flows the solver shared out
  EXPECT_GT(apart, 0u);   // and some members started apart from their group
  EXPECT_GT(expanded, 0u);  // and groups told through links came apart (extract(), split())
}

TEST(FlowGroup, CallsInShuffledOrderGiveTheVirtualTimeAnswer) {
  const ClusterSpec c = group_cluster();
  std::mt19937_64 rng(4);
  uint64_t rollbacks = 0, expanded = 0;
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const CalledTrace t = stepped(rng, 32, 40);
    const auto want = one_by_one(c, t.trace);
    for (double sync : {1.0, 0.3}) {
      Engine::Stats stats;
      ASSERT_TRUE(same(want, by_calls(c, t, random_call_order(t, rng), sync, rng, &stats)));
      rollbacks += stats.rollbacks;
      expanded += stats.group_links_expanded;
    }
  }
  EXPECT_GT(rollbacks, 50u);  // calls did land in the simulated past of groups
  EXPECT_GT(expanded, 0u);    // and took groups told through links apart
}

TEST(FlowGroup, ALateFlowRollsBackAcrossASimulatedGroup) {
  const ClusterSpec c = group_cluster();
  const CalledTrace t = ring(16, 6, 8 << 20);
  // A flow 2 -> 4 shares GPU 2's and GPU 4's NVLink with step 2's flows 2 -> 3 and 3 -> 4; it
  // arrives last, starting in the middle of the ring's simulated history.
  std::mt19937_64 rng(5);
  auto grouped = make_engine(c);
  std::vector<EventId> ids(t.trace.events.size());
  for (size_t call = 0; call < t.calls.size(); ++call) submit_call(*grouped, t, static_cast<int>(call), ids);
  const auto before = intervals(*grouped, ids);
  FlowSpec late;
  late.src_gpu = 2;
  late.dst_gpu = 4;
  late.bytes = 4 << 20;
  late.not_before = before[2 * 16 + 3].start + 0.5 * (before[2 * 16 + 3].finish - before[2 * 16 + 3].start);
  const EventId late_id = grouped->add_flow(late);
  auto got = intervals(*grouped, ids);
  got.push_back(*grouped->query(late_id));
  EXPECT_GE(grouped->stats().rollbacks, 1u);

  Trace with_late = t.trace;
  TraceEvent e;
  e.src = late.src_gpu;
  e.dst = late.dst_gpu;
  e.bytes = late.bytes;
  e.not_before = late.not_before;
  with_late.events.push_back(e);
  const auto want = one_by_one(c, with_late);
  ASSERT_TRUE(same(want, got));
  // The rollback split simulated groups told through links: those became their edges first
  // (expand_link()), and the answers are still the one-by-one ones.
  EXPECT_GT(grouped->stats().group_links, 0u);
  EXPECT_GT(grouped->stats().group_links_expanded, 0u);
  // The late flow slowed step 2's flow 3 -> 4 down.
  EXPECT_GT(got[2 * 16 + 3].finish, before[2 * 16 + 3].finish);
}

// A ring of `gpus` submitted by rank 0 step by step (each step in one add_flows() call, or flow
// by flow), promising after each step the earliest start of the step it just submitted; the
// ids of every step in order. `bytes(s)`: each flow's size in step s; `labels`: "s<step>g<gpu>";
// `after_step` runs once a step's floor is promised.
struct RingSteps {
  int gpus = 32, steps = 30;
  bool grouped = true, labels = false;
  std::function<uint64_t(int)> bytes = [](int) { return uint64_t{4} << 20; };
  std::function<void()> after_step = [] {};
};
std::vector<EventId> submit_ring_with_floors(Engine& e, const RingSteps& r) {
  const int gpus = r.gpus;
  e.register_rank(0);
  std::vector<EventId> prev(gpus, kNoEvent), cur(gpus), all;
  std::vector<FlowSpec> step(gpus);
  Time floor = 0;
  for (int s = 0; s < r.steps; ++s) {
    for (int i = 0; i < gpus; ++i) {
      FlowSpec& f = step[i];
      f.src_gpu = i;
      f.dst_gpu = (i + 1) % gpus;
      f.bytes = r.bytes(s);
      f.not_before = floor;
      f.after.clear();
      if (s > 0) f.after = {prev[(i + gpus - 1) % gpus], prev[i]};
      if (r.labels) f.label = "s" + std::to_string(s) + "g" + std::to_string(i);
      if (!r.grouped) cur[i] = e.add_flow(f);
    }
    if (r.grouped) e.add_flows(step, cur);
    floor = e.query(cur[0])->start;
    for (EventId id : cur) floor = std::min(floor, e.query(id)->start);
    e.set_rank_floor(0, floor);
    r.after_step();
    all.insert(all.end(), cur.begin(), cur.end());
    std::swap(prev, cur);
  }
  return all;
}

// A rank submitting a ring step by step and promising, after each step, the earliest start of
// the step it submitted: groups are reclaimed behind the floor (their members' final intervals
// stay queryable) exactly as the same flows one by one.
TEST(FlowGroup, ReclaimedGroupsAnswerAsTheirFlowsOneByOne) {
  const ClusterSpec c = group_cluster();
  const int gpus = 32, steps = 30;
  auto run = [&](bool grouped, std::vector<Interval>& out, Engine::Stats& stats, std::string& timeline) {
    auto e = make_engine(c);
    uint64_t peak_live = 0;
    const std::vector<EventId> all = submit_ring_with_floors(
        *e, RingSteps{.gpus = gpus, .steps = steps, .grouped = grouped, .labels = true,
                      .after_step = [&] { peak_live = std::max(peak_live, e->stats().events_live); }});
    e->unregister_rank(0);
    for (EventId id : all) out.push_back(*e->query(id));
    stats = e->stats();
    stats.events_live = peak_live;
    timeline = e->timeline_json();
  };
  std::vector<Interval> want, got;
  Engine::Stats single, grouped;
  std::string single_timeline, grouped_timeline;
  run(false, want, single, single_timeline);
  run(true, got, grouped, grouped_timeline);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].start, want[i].start) << "flow " << i;
    ASSERT_EQ(got[i].finish, want[i].finish) << "flow " << i;
  }
  EXPECT_EQ(grouped.solved_flows, 0u);
  EXPECT_EQ(grouped.events_live, single.events_live);  // the same history kept behind the floor
  EXPECT_LT(grouped.events_live, static_cast<uint64_t>(gpus * steps / 2));
  EXPECT_EQ(grouped_timeline.size(), single_timeline.size());
  for (const char* label : {"\"s0g0\"", "\"s14g31\"", "\"s29g7\""})
    EXPECT_NE(grouped_timeline.find(label), std::string::npos) << label;
}

// EngineOptions::huge_pages (vgpud, vgpu-netsim) changes where the engine's stores live, never
// an answer: a ring long enough to fill several id chunks, its groups retired through their
// handles behind the floor, answers exactly alike with and without it.
TEST(FlowGroup, AnEngineOnHugePagesAnswersExactlyAlike) {
  const ClusterSpec c = group_cluster();
  auto run = [&](bool huge_pages) {
    EngineOptions o;
    o.huge_pages = huge_pages;
    auto e = make_engine(c, o);
    // 12,800 flows: four chunks of ids
    const std::vector<EventId> all = submit_ring_with_floors(
        *e, RingSteps{.gpus = 32, .steps = 400, .bytes = [](int s) { return uint64_t(1 + s % 3) << 20; }});
    std::vector<Interval> out;
    for (EventId id : all) out.push_back(*e->query(id));
    return out;
  };
  const std::vector<Interval> plain = run(false), huge = run(true);
  ASSERT_EQ(plain.size(), huge.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_EQ(huge[i].start, plain[i].start) << "flow " << i;
    ASSERT_EQ(huge[i].finish, plain[i].finish) << "flow " << i;
  }
  EXPECT_GT(plain.back().finish, 0.0);
}

// A whole ring all-reduce submitted before one query is one sweep over every step. Its groups
// are scheduled at once, and the links of every group that starts are listed for its transfer's
// end: neither may be kept for every flow to the sweep's end (the schedules of groups whose
// dependencies are all unfinished groups are written only once the first of them finishes;
// the list keeps only the groups still moving), and the answers are the flows' one by one.
TEST(FlowGroup, AWholeRingBeforeOneQueryKeepsNoScheduleOrLinkListPerFlow) {
  ClusterSpec c = group_cluster();
  c.nodes = 32;  // 256 GPUs, 16 leaves
  const int gpus = 256, steps = 2 * (gpus - 1);
  const CalledTrace t = ring(gpus, steps, 4 << 20);
  const auto want = one_by_one(c, t.trace);
  EngineOptions o;
  o.record_timeline = false;
  detail::Simulator sim(c, o);
  std::vector<EventId> ids(t.trace.events.size(), kNoEvent);
  for (size_t call = 0; call < t.calls.size(); ++call) {
    const std::vector<FlowSpec> flows = flows_of(t, static_cast<int>(call), ids);
    std::vector<EventId> out(flows.size());
    sim.submit_flows(std::span<const FlowSpec>(flows), std::span<EventId>(out));
    for (size_t k = 0; k < out.size(); ++k) ids[t.calls[call][k]] = out[k];
  }
  sim.sync();
  for (size_t i = 0; i < want.size(); ++i) {
    const Interval got = sim.interval(ids[i]);
    ASSERT_EQ(got.start, want[i].start) << "flow " << i;
    ASSERT_EQ(got.finish, want[i].finish) << "flow " << i;
  }
  EXPECT_EQ(sim.stats().group_links_expanded, 0u);
  EXPECT_EQ(sim.stats().group_members_apart, 0u);
  // 130,560 flows: their schedules written all at once took 20 bytes each (40 slabs of 64 KiB;
  // 2 now), and every member's links (2-6 each) stayed listed (room for 524,288 entries; 65,536
  // now).
  EXPECT_LE(sim.schedule_slabs(), 2u);
  EXPECT_LT(sim.group_links_capacity(), want.size());
}

TEST(FlowGroup, EveryMemberHasItsOwnTimelineEntryAndRefusedFlowsGetNoId) {
  auto e = make_engine(group_cluster());
  std::vector<FlowSpec> flows(4);
  for (int k = 0; k < 4; ++k) {
    flows[k].src_gpu = k;
    flows[k].dst_gpu = k + 4;
    flows[k].bytes = 1 << 20;
    flows[k].label = "member" + std::to_string(k);
  }
  flows[2].dst_gpu = 999;  // refused
  std::vector<EventId> ids(4);
  e->add_flows(flows, ids);
  EXPECT_EQ(ids[2], kNoEvent);
  for (int k : {0, 1, 3}) ASSERT_NE(ids[k], kNoEvent);
  EXPECT_EQ(e->query(ids[0])->finish, e->query(ids[3])->finish);
  const std::string json = e->timeline_json();
  for (int k : {0, 1, 3}) EXPECT_NE(json.find("member" + std::to_string(k)), std::string::npos) << json;
  EXPECT_EQ(json.find("member2"), std::string::npos);
}

// The ids of one call come in call order, as add_flow() one by one would number them, however
// the call's flows fall into groups (here: two classes of different bytes, interleaved, and a
// flow alone between them), so that a caller may keep its events' ids as two numbers
// (vgpu-netsim does).
TEST(FlowGroup, IdsOfACallComeInCallOrder) {
  auto e = make_engine(group_cluster());
  std::vector<FlowSpec> flows(9);
  for (int k = 0; k < 9; ++k) {
    flows[k].src_gpu = k;
    flows[k].dst_gpu = k + 16;
    flows[k].bytes = k % 2 == 0 ? 1 << 20 : 1 << 21;
  }
  flows[4].not_before = 1e-3;  // alone
  std::vector<EventId> ids(9);
  e->add_flows(flows, ids);
  for (int k = 1; k < 9; ++k) EXPECT_EQ(ids[k], ids[0] + static_cast<EventId>(k)) << k;
  // And each id answers for its own flow: the two classes and the lone flow differ.
  EXPECT_EQ(e->query(ids[0])->finish, e->query(ids[8])->finish);
  EXPECT_EQ(e->query(ids[1])->finish, e->query(ids[7])->finish);
  EXPECT_LT(e->query(ids[0])->finish, e->query(ids[1])->finish);
  EXPECT_EQ(e->query(ids[4])->start, 1e-3);
  const EventId next = e->add_flow(flows[0]);
  EXPECT_EQ(next, ids[8] + 1);
}

// Calls of 16 like flows between random GPUs (so a class's members often share a node's NIC
// with other classes), half depending on a recent flow, queried now and then: the answers of
// add_flow() one by one. A group being started holds the links it claimed for its first
// members while it claims the rest (it is still pending then): taken for free there, a flow
// its start pulls in would not split it (answers microseconds off; simcore24).
TEST(FlowGroup, RandomCallsOfLikeFlowsEqualTheirFlowsOneByOne) {
  for (const int gpus : {16, 64}) {
    ClusterSpec c = default_cluster();
    c.gpus_per_node = 8;
    c.nodes = gpus / 8;
    for (unsigned seed : {1u, 2u, 3u}) {
      SCOPED_TRACE("gpus " + std::to_string(gpus) + " seed " + std::to_string(seed));
      std::mt19937_64 rng(seed);
      std::vector<std::vector<FlowSpec>> calls;
      std::vector<int> queried;
      size_t flows = 0;
      for (int b = 0; b < 200; ++b) {
        std::vector<FlowSpec> call(16);
        const uint64_t bytes = uint64_t{1} << (16 + rng() % 8);
        for (FlowSpec& f : call) {
          f.bytes = bytes;
          f.src_gpu = static_cast<int>(rng() % gpus);
          f.dst_gpu = static_cast<int>(rng() % gpus);
          f.not_before = static_cast<double>(rng() % 4) * 1e-5 * b;
          // A recent flow, by its index (made an id below).
          if (flows != 0 && rng() % 2) f.after = {flows - 1 - rng() % std::min<size_t>(flows, 40)};
        }
        flows += call.size();
        calls.push_back(std::move(call));
        if (b % 7 == 3) queried.push_back(b);
      }
      const auto run = [&](bool grouped) {
        auto e = make_engine(c);
        std::vector<EventId> ids;
        size_t q = 0;
        for (size_t b = 0; b < calls.size(); ++b) {
          std::vector<FlowSpec> call = calls[b];
          for (FlowSpec& f : call)
            for (EventId& d : f.after) d = ids[d];
          std::vector<EventId> out(call.size());
          if (grouped) e->add_flows(call, out);
          else
            for (size_t k = 0; k < call.size(); ++k) out[k] = e->add_flow(call[k]);
          ids.insert(ids.end(), out.begin(), out.end());
          if (q < queried.size() && queried[q] == static_cast<int>(b)) {
            e->query(out[0]);
            ++q;
          }
        }
        return intervals(*e, ids);
      };
      ASSERT_TRUE(same(run(false), run(true)));
    }
  }
}

}  // namespace
}  // namespace simcore
