// The engine against answers worked out by hand: fair sharing, max-min, latency, dependencies.
#include <gtest/gtest.h>

#include <cmath>

#include "random_traces.h"
#include "simcore/engine.h"
#include "test_clusters.h"

namespace simcore {
namespace {

using testing::kNicBw;
using testing::kNvlinkBw;
using testing::small_cluster;

constexpr double kTol = 1e-9;
constexpr uint64_t kMiB = 1 << 20;

FlowSpec flow(int src, int dst, uint64_t bytes, Time not_before = 0, std::vector<EventId> after = {}) {
  FlowSpec f;
  f.src_gpu = src;
  f.dst_gpu = dst;
  f.bytes = bytes;
  f.not_before = not_before;
  f.after = std::move(after);
  return f;
}

TaskSpec task(int gpu, Time duration, Time not_before = 0, std::vector<EventId> after = {}) {
  TaskSpec t;
  t.gpu = gpu;
  t.duration = duration;
  t.not_before = not_before;
  t.after = std::move(after);
  return t;
}

Interval at(Engine& e, EventId id) {
  auto i = e.query(id);
  EXPECT_TRUE(i.has_value());
  return i.value_or(Interval{-1, -1});
}

// Relative tolerance: the answers are exact up to rounding.
void expect_near(double got, double want) { EXPECT_NEAR(got, want, kTol * std::abs(want) + 1e-18); }

TEST(Analytic, OneFlowAlone) {
  auto e = make_engine(small_cluster(1, 8));
  const EventId f = e->add_flow(flow(0, 1, 64 * kMiB));
  expect_near(at(*e, f).start, 0);
  expect_near(at(*e, f).finish, 64.0 * kMiB / kNvlinkBw);
}

TEST(Analytic, OneLinkSharedByK) {
  for (int k = 1; k <= 7; ++k) {
    auto e = make_engine(small_cluster(1, 8));
    // k senders into GPU 0: its NVLink down link is the only shared link.
    std::vector<EventId> ids;
    for (int s = 1; s <= k; ++s) ids.push_back(e->add_flow(flow(s, 0, 8 * kMiB)));
    for (EventId id : ids) expect_near(at(*e, id).finish, k * 8.0 * kMiB / kNvlinkBw);
  }
}

TEST(Analytic, DisjointLinksDoNotInterfere) {
  auto e = make_engine(small_cluster(2, 4));
  const EventId a = e->add_flow(flow(0, 1, 32 * kMiB));
  const EventId b = e->add_flow(flow(2, 3, 32 * kMiB));
  const EventId c = e->add_flow(flow(1, 5, 32 * kMiB));  // over the NICs
  expect_near(at(*e, a).finish, 32.0 * kMiB / kNvlinkBw);
  expect_near(at(*e, b).finish, 32.0 * kMiB / kNvlinkBw);
  expect_near(at(*e, c).finish, 32.0 * kMiB / kNicBw);
}

TEST(Analytic, ParkingLotIsMaxMinFair) {
  // Long flow L: GPU 0 -> 1 crosses up(0) and down(1). up(0) also carries 0->3 and 0->4,
  // down(1) also carries 2->1. Max-min: up(0) is the bottleneck at B/3 for L, 0->3 and 0->4;
  // 2->1 takes the rest of down(1), 2B/3. All move X bytes: 2->1 ends at 1.5X/B; nothing
  // changes for the others (up(0) still splits three ways), which end at 3X/B.
  auto e = make_engine(small_cluster(1, 8));
  const uint64_t X = 30 * kMiB;
  const EventId L = e->add_flow(flow(0, 1, X));
  const EventId S1 = e->add_flow(flow(2, 1, X));
  const EventId S2 = e->add_flow(flow(0, 3, X));
  const EventId S3 = e->add_flow(flow(0, 4, X));
  expect_near(at(*e, S1).finish, 1.5 * X / kNvlinkBw);
  expect_near(at(*e, L).finish, 3.0 * X / kNvlinkBw);
  expect_near(at(*e, S2).finish, 3.0 * X / kNvlinkBw);
  expect_near(at(*e, S3).finish, 3.0 * X / kNvlinkBw);
}

TEST(Analytic, ParkingLotAcrossTheFabric) {
  // 2 leaves of one node of 2 GPUs, 2:1 oversubscribed: each leaf's uplink is one NIC's worth.
  // Long: GPU 0 -> 2 (leaf 0 up, leaf 1 down). GPU 1 -> 3 shares both leaf links.
  // Both get N/2 on the uplink; each NIC link has room, so both finish at 2X/N.
  ClusterSpec c = small_cluster(2, 2, 1);
  c.fabric.oversubscription = 2.0;
  auto e = make_engine(c);
  const uint64_t X = 10 * kMiB;
  const EventId a = e->add_flow(flow(0, 2, X));
  const EventId b = e->add_flow(flow(1, 3, X));
  // A third flow inside node 0 over NVLink does not touch the fabric.
  const EventId n = e->add_flow(flow(0, 1, X));
  expect_near(at(*e, a).finish, 2.0 * X / kNicBw);
  expect_near(at(*e, b).finish, 2.0 * X / kNicBw);
  expect_near(at(*e, n).finish, 1.0 * X / kNvlinkBw);
}

TEST(Analytic, LatencyIsATailAfterTheLastByte) {
  ClusterSpec c = small_cluster(1, 4);
  const double lat = 5e-6;
  c.nvlink.latency_s = lat;
  auto e = make_engine(c);
  const uint64_t X = 4 * kMiB;
  // A and B share up(0): both at B/2 until A's last byte leaves at 2X/B; B then has the whole
  // link at once (not after A's latency tail) and its last byte leaves at 3X/B.
  const EventId a = e->add_flow(flow(0, 1, X));
  const EventId b = e->add_flow(flow(0, 2, 2 * X));
  expect_near(at(*e, a).finish, 2.0 * X / kNvlinkBw + lat);
  expect_near(at(*e, b).finish, 3.0 * X / kNvlinkBw + lat);
  // An empty flow lasts its latency; a later one starts at its not_before.
  const EventId z = e->add_flow(flow(1, 2, 0, 1.0));
  expect_near(at(*e, z).start, 1.0);
  expect_near(at(*e, z).finish, 1.0 + lat);
}

TEST(Analytic, CrossNodeLatencyAddsHops) {
  ClusterSpec c = small_cluster(4, 1, 2);
  c.nic.latency_s = 2e-6;
  c.fabric.latency_s = 0.5e-6;
  auto e = make_engine(c);
  const EventId near = e->add_flow(flow(0, 1, kMiB));
  const EventId far = e->add_flow(flow(0, 2, kMiB, 1.0));
  expect_near(at(*e, near).finish, 1.0 * kMiB / kNicBw + 2.5e-6);
  expect_near(at(*e, far).finish, 1.0 + 1.0 * kMiB / kNicBw + 3.5e-6);
}

TEST(Analytic, LocalCopyUsesHalfTheMemoryBandwidth) {
  auto e = make_engine(small_cluster(1, 2));
  const EventId a = e->add_flow(flow(1, 1, 100 * kMiB));
  const EventId b = e->add_flow(flow(1, 1, 100 * kMiB));
  expect_near(at(*e, a).finish, 2 * 100.0 * kMiB / (testing::kHbmBw / 2));
  expect_near(at(*e, b).finish, 2 * 100.0 * kMiB / (testing::kHbmBw / 2));
}

TEST(Analytic, DependenciesAndNotBefore) {
  auto e = make_engine(small_cluster(1, 4));
  const double T = 1.0 * kMiB / kNvlinkBw;
  const EventId a = e->add_flow(flow(0, 1, kMiB));
  const EventId t = e->add_task(task(1, 3e-3, 0, {a}));               // after a
  const EventId b = e->add_flow(flow(1, 2, kMiB, 0, {t}));             // after the task
  const EventId c = e->add_flow(flow(2, 3, kMiB, 1.0, {a}));           // not_before wins
  const EventId d = e->add_task(task(3, 1e-3, 0, {b, c}));             // after both
  expect_near(at(*e, t).start, T);
  expect_near(at(*e, t).finish, T + 3e-3);
  expect_near(at(*e, b).start, T + 3e-3);
  expect_near(at(*e, b).finish, 2 * T + 3e-3);
  expect_near(at(*e, c).start, 1.0);
  expect_near(at(*e, d).start, 1.0 + T);
  expect_near(at(*e, d).finish, 1.0 + T + 1e-3);
}

TEST(Analytic, TasksDoNotShare) {
  auto e = make_engine(small_cluster(1, 1));
  const EventId a = e->add_task(task(0, 1.0));
  const EventId b = e->add_task(task(0, 2.0));
  EXPECT_DOUBLE_EQ(at(*e, a).finish, 1.0);
  EXPECT_DOUBLE_EQ(at(*e, b).finish, 2.0);
}

TEST(Analytic, ArrivalsChangeRatesMidway) {
  // B arrives while A is half done: A's second half runs at B/2.
  auto e = make_engine(small_cluster(1, 4));
  const uint64_t X = 8 * kMiB;
  const double T = X / kNvlinkBw;
  const EventId a = e->add_flow(flow(0, 1, X));
  const EventId b = e->add_flow(flow(2, 1, X, T / 2));
  expect_near(at(*e, a).finish, T / 2 + T);        // X/2 left at half speed
  expect_near(at(*e, b).finish, T / 2 + T + T / 2);  // X/2 at half speed, X/2 at full
}

TEST(Analytic, InvalidSubmissionsAreRejected) {
  auto e = make_engine(small_cluster(1, 2));
  EXPECT_EQ(e->add_flow(flow(0, 2, 1)), kNoEvent);
  EXPECT_EQ(e->add_flow(flow(-1, 0, 1)), kNoEvent);
  EXPECT_EQ(e->add_flow(flow(0, 1, 1, 0, {42})), kNoEvent);
  EXPECT_EQ(e->add_flow(flow(0, 1, 1, 0, {kNoEvent})), kNoEvent);
  EXPECT_EQ(e->add_flow(flow(0, 1, 1, std::nan(""))), kNoEvent);
  EXPECT_EQ(e->add_task(task(0, -1.0)), kNoEvent);
  EXPECT_EQ(e->add_task(task(5, 1.0)), kNoEvent);
  EXPECT_FALSE(e->query(7).has_value());
  EXPECT_FALSE(e->is_final(7));
  EXPECT_FALSE(e->wait_final(7).has_value());
  const EventId ok = e->add_flow(flow(0, 1, 1));
  EXPECT_NE(ok, kNoEvent);
  EXPECT_TRUE(e->query(ok).has_value());
}

TEST(Analytic, FullResolveModeGivesTheSameAnswers) {
  EngineOptions o;
  o.solver = SolverMode::full_resolve;
  auto e = make_engine(small_cluster(1, 8), o);
  const uint64_t X = 30 * kMiB;
  const EventId L = e->add_flow(flow(0, 1, X));
  const EventId S1 = e->add_flow(flow(2, 1, X));
  e->add_flow(flow(0, 3, X));
  e->add_flow(flow(0, 4, X));
  const EventId far = e->add_flow(flow(5, 6, X));
  expect_near(at(*e, S1).finish, 1.5 * X / kNvlinkBw);
  expect_near(at(*e, L).finish, 3.0 * X / kNvlinkBw);
  expect_near(at(*e, far).finish, 1.0 * X / kNvlinkBw);
}

// Dense random traffic (flows between 16 GPUs of 2 nodes, many sharing links at once, in arrival
// order and in shuffled order): the incremental solver, which skips the re-solve when a leaving
// flow was no other flow's bottleneck, gives what re-solving every flow at every change gives.
TEST(Analytic, IncrementalSolverMatchesTheFullReSolveOnDenseTraffic) {
  std::mt19937_64 rng(5);
  for (int trace = 0; trace < 40; ++trace) {
    const testing::Trace t = testing::random_trace(rng, 16, 300, 1);
    std::vector<size_t> order(t.events.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto run = [&](SolverMode mode, bool shuffled) {
      EngineOptions o;
      o.solver = mode;
      auto e = make_engine(small_cluster(2, 8), o);
      std::vector<EventId> ids(t.events.size(), kNoEvent);
      if (shuffled) {
        // Dependencies first: an event goes after every event it names.
        std::vector<size_t> todo = order;
        std::shuffle(todo.begin(), todo.end(), rng);
        while (!todo.empty()) {
          for (size_t k = 0; k < todo.size();) {
            const auto& ev = t.events[todo[k]];
            const bool ready = std::all_of(ev.after.begin(), ev.after.end(),
                                           [&](int j) { return ids[j] != kNoEvent; });
            if (!ready) {
              ++k;
              continue;
            }
            ids[todo[k]] = testing::submit(*e, ev, ids);
            e->query(ids[todo[k]]);  // simulated as it arrives: later ones roll back
            todo.erase(todo.begin() + static_cast<long>(k));
          }
        }
      } else {
        for (size_t i = 0; i < t.events.size(); ++i) ids[i] = testing::submit(*e, t.events[i], ids);
      }
      std::vector<Interval> out;
      for (EventId id : ids) out.push_back(*e->query(id));
      return out;
    };
    const auto full = run(SolverMode::full_resolve, false);
    for (bool shuffled : {false, true}) {
      const auto inc = run(SolverMode::incremental, shuffled);
      for (size_t i = 0; i < full.size(); ++i) {
        ASSERT_TRUE(testing::same_time(inc[i].start, full[i].start) &&
                    testing::same_time(inc[i].finish, full[i].finish))
            << "trace " << trace << " event " << i << (shuffled ? " (shuffled)" : "") << ": "
            << inc[i].start << "-" << inc[i].finish << " vs " << full[i].start << "-" << full[i].finish;
      }
    }
  }
}

}  // namespace
}  // namespace simcore
