// The real vgpud (simcore's engine over the configured cluster) against the same engine in
// process: whatever goes through the daemon must come back exactly as the engine answers it.
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <set>

#include "child_process.h"
#include "daemon_fixture.h"
#include "share_barrier.h"
#include "simcore/cluster_config.h"
#include "simcore/remote_engine.h"

#ifndef VGPUD_PATH
#error "VGPUD_PATH must name the vgpud binary"
#endif
#ifndef CLIENT_TOOL_PATH
#error "CLIENT_TOOL_PATH must name the daemon_client_tool binary"
#endif

namespace simcore::testing {
namespace {

class RealDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // reap the daemons started on demand
    job_ = unique_job("real");
  }
  void TearDown() override {
    std::string err;
    EXPECT_TRUE(shutdown_daemon(options(), &err)) << err;
  }
  RemoteOptions options(int rank = -1) const {
    RemoteOptions o;
    o.job_id = job_;
    o.socket_dir = tmp_.path();
    o.rank = rank;
    o.vgpud_path = VGPUD_PATH;
    o.connect_timeout_s = 20;
    return o;
  }
  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"VGPU_JOB_ID=" + job_, "VGPU_DAEMON_DIR=" + tmp_.path(),
                                  std::string("VGPU_VGPUD=") + VGPUD_PATH};
    e.insert(e.end(), extra.begin(), extra.end());
    return e;
  }

  TempDir tmp_;
  std::string job_;
};

// One scenario, applied to any engine: flows that share links, tasks after them, ranks.
std::vector<EventId> submit_scenario(Engine& e) {
  std::vector<EventId> ids;
  for (int i = 0; i < 4; ++i)  // four flows out of GPU 0: they share its NVLink port
    ids.push_back(e.add_flow(FlowSpec{0, 1 + i, (1ull << 26) * (i + 1), 0, {}, "f"}));
  ids.push_back(e.add_flow(FlowSpec{2, 3, 1ull << 28, 1e-4, {}, "g"}));
  ids.push_back(e.add_task(TaskSpec{1, 0, 5e-4, 0, {ids[0], ids[4]}, "k"}));
  ids.push_back(e.add_flow(FlowSpec{5, 5, 1ull << 30, 0, {ids[5]}, "hbm copy"}));
  ids.push_back(e.add_flow(FlowSpec{0, 99, 1, 0, {}, "no such GPU"}));  // refused: kNoEvent
  ids.push_back(e.add_task(TaskSpec{0, 0, -1, 0, {}, "negative"}));     // refused: kNoEvent
  // A latecomer in the virtual past of everything above: rolls the simulation back.
  ids.push_back(e.add_flow(FlowSpec{0, 2, 1ull << 27, 0, {}, "late"}));
  return ids;
}

TEST_F(RealDaemon, AnswersExactlyAsTheInProcessEngine) {
  ConfigResult config = load_cluster_config();
  ASSERT_TRUE(config.ok()) << config.error.to_string();
  auto local = make_engine(*config.cluster);
  std::string err;
  // Its timeline is compared with the in-process engine's, which keeps reclaimed events too.
  ::setenv("VGPU_DAEMON_TIMELINE", "1", 1);
  auto remote = connect_engine(options(0), &err);
  ::unsetenv("VGPU_DAEMON_TIMELINE");
  ASSERT_TRUE(remote) << err;

  const auto lids = submit_scenario(*local);
  const auto rids = submit_scenario(*remote);
  ASSERT_EQ(lids, rids);
  EXPECT_EQ(rids[7], kNoEvent);
  EXPECT_EQ(rids[8], kNoEvent);
  for (EventId id : rids) {
    if (id == kNoEvent) continue;
    const auto l = local->query(id), r = remote->query(id);
    ASSERT_TRUE(l && r) << id;
    EXPECT_EQ(l->start, r->start) << id;   // bit-exact: doubles travel as their bits
    EXPECT_EQ(l->finish, r->finish) << id;
    EXPECT_EQ(local->is_final(id), remote->is_final(id)) << id;
  }
  // With a registered rank, finality follows its floor on both.
  local->register_rank(0);
  remote->register_rank(0);
  const EventId lt = local->add_task(TaskSpec{3, 0, 1.0, 0, {}, "t"});
  const EventId rt = remote->add_task(TaskSpec{3, 0, 1.0, 0, {}, "t"});
  EXPECT_FALSE(remote->is_final(rt));
  EXPECT_EQ(local->is_final(lt), remote->is_final(rt));
  local->set_rank_floor(0, 10);
  remote->set_rank_floor(0, 10);
  const auto lw = local->wait_final(lt), rw = remote->wait_final(rt);
  ASSERT_TRUE(lw && rw);
  EXPECT_EQ(lw->finish, rw->finish);
  EXPECT_EQ(local->stats().events_submitted, remote->stats().events_submitted);
  EXPECT_GT(remote->stats().events_submitted, 0u);
  const std::string timeline = remote->timeline_json();
  EXPECT_EQ(timeline, local->timeline_json());
  EXPECT_NE(timeline.find("hbm copy"), std::string::npos);
  EXPECT_FALSE(remote->wait_final(123456));
}

// A ring all-reduce's steps, each submitted in one add_flows() call: through the daemon the
// call reaches its engine as one add_flows() (one AddFlows request), whose like flows become
// flow groups there, with the answers and ids of the same flows added one by one in process.
TEST_F(RealDaemon, ConsecutiveFlowsGoThroughAddFlowsWithTheSameAnswers) {
  ConfigResult config = load_cluster_config();
  ASSERT_TRUE(config.ok()) << config.error.to_string();
  const int n = config.cluster->total_gpus();
  ASSERT_GE(n, 2);
  auto local = make_engine(*config.cluster);
  std::string err;
  auto remote = connect_engine(options(0), &err);
  ASSERT_TRUE(remote) << err;

  constexpr int kSteps = 6;
  std::vector<EventId> lprev, rprev, all;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<FlowSpec> step;
    for (int i = 0; i < n; ++i) {
      FlowSpec f{i, (i + 1) % n, 1ull << 24, 0, {}, "ring"};
      if (s > 0) f.after = {lprev[(i + n - 1) % n], lprev[i]};
      step.push_back(f);
    }
    std::vector<EventId> lids;
    for (const FlowSpec& f : step) lids.push_back(local->add_flow(f));
    // The same dependencies by the remote engine's ids (equal, as checked below).
    for (int i = 0; s > 0 && i < n; ++i) step[i].after = {rprev[(i + n - 1) % n], rprev[i]};
    std::vector<EventId> rids(step.size(), kNoEvent);
    remote->add_flows(step, rids);
    ASSERT_EQ(lids, rids) << "step " << s;
    lprev = lids;
    rprev = rids;
    all.insert(all.end(), rids.begin(), rids.end());
  }
  for (EventId id : all) {
    const auto l = local->query(id), r = remote->query(id);
    ASSERT_TRUE(l && r) << id;
    EXPECT_EQ(l->start, r->start) << id;  // bit-exact
    EXPECT_EQ(l->finish, r->finish) << id;
  }
  // One by one, every flow goes through the max-min solver; the daemon's grouped steps need it
  // for none (a step's flows share no link and start together).
  const auto ls = local->stats(), rs = remote->stats();
  EXPECT_EQ(rs.events_submitted, ls.events_submitted);
  EXPECT_GT(ls.solved_flows, 0u);
  EXPECT_LT(rs.solved_flows, ls.solved_flows / 2) << "the daemon took the flows one at a time";
}

// ShareCollectives (protocol 7), as a rank process places its collectives' flows and reads their
// answers: each round's two collectives go in one request and their latest finishes come back,
// bit-equal to the in-process engine's; the flows are released and the rank's floor moves in the
// same request, so the daemon's engine keeps what a few rounds need, not every round's history
// and results (without the floor and the release it keeps them all: that is what the last check
// tells apart).
TEST_F(RealDaemon, ShareCollectivesAnswersInOneRequestAndKeepsTheEngineBounded) {
  ConfigResult config = load_cluster_config();
  ASSERT_TRUE(config.ok()) << config.error.to_string();
  const int n = config.cluster->total_gpus();
  ASSERT_GE(n, 2);
  EngineOptions quiet;
  quiet.record_timeline = false;
  auto local = make_engine(*config.cluster, quiet);
  auto kept = make_engine(*config.cluster, quiet);  // the same rounds, read by Query alone
  std::string err;
  auto remote = connect_engine(options(0), &err);
  ASSERT_TRUE(remote) << err;
  constexpr int kRank = (1 << 20) + 3;
  local->register_rank(kRank);
  remote->register_rank(kRank);
  constexpr double kPeriod = 1e-3;
  auto rounds = [&](int from, int to) {
    for (int k = from; k < to; ++k) {
      std::vector<FlowSpec> ring;
      for (int i = 0; i < n; ++i) ring.push_back(FlowSpec{i, (i + 1) % n, 1ull << 24, k * kPeriod, {}, ""});
      std::vector<EventId> kids(n);
      kept->add_flows(ring, kids);
      // Two collectives of one rank each: the first half of the ring, the rest.
      const size_t half = static_cast<size_t>(n / 2);
      const std::vector<SharedCollective> both = {
          SharedCollective{1, static_cast<uint64_t>(k), 1, {0}, {ring.begin(), ring.begin() + half}},
          SharedCollective{2, static_cast<uint64_t>(k), 1, {0}, {ring.begin() + half, ring.end()}},
      };
      uint32_t lreg = 99, rreg = 0;
      // Nothing this rank submits later starts before this round's start.
      const auto l = share_collectives(*local, both, kRank, k * kPeriod, &lreg);
      const auto r = share_collectives(*remote, both, kRank, k * kPeriod, &rreg);
      ASSERT_EQ(l.size(), 2u);
      ASSERT_EQ(r.size(), 2u);
      for (size_t g = 0; g < 2; ++g) {
        ASSERT_TRUE(l[g].finish && r[g].finish) << "round " << k;
        EXPECT_EQ(*l[g].finish, *r[g].finish) << "round " << k;  // bit-exact
        EXPECT_GT(*r[g].finish, k * kPeriod);
        EXPECT_EQ(r[g].covered, 1u);
      }
      EXPECT_EQ(lreg, 0u);  // in process: not known
      EXPECT_EQ(rreg, 1u);  // this client's one rank
      double latest = 0;
      for (EventId id : kids) latest = std::max(latest, kept->query(id)->finish);
      EXPECT_EQ(latest, std::max(*r[0].finish, *r[1].finish)) << "round " << k;
    }
  };
  constexpr int kRounds = 800;  // past the engine's first growth of its containers
  rounds(0, kRounds);
  const Engine::Stats once = remote->stats();
  rounds(kRounds, 4 * kRounds);
  const Engine::Stats four = remote->stats();
  EXPECT_EQ(four.events_submitted, 4 * once.events_submitted);
  // Bounded: what the engine keeps after 4N rounds is what it kept after N (a margin for where
  // the reclaiming stands), while the rounds kept by Query alone grow with them.
  EXPECT_LE(four.events_live, once.events_live + 2 * static_cast<uint64_t>(n));
  EXPECT_LE(four.result_bytes, once.result_bytes + once.result_bytes / 4 + 4096 * 20);
  EXPECT_LE(four.history_bytes, once.history_bytes + once.history_bytes / 4 + 4096);
  EXPECT_LE(four.flow_segments, once.flow_segments + 2 * static_cast<uint64_t>(n));
  EXPECT_LE(four.timeline_bytes, once.timeline_bytes + once.timeline_bytes / 4 + 4096);  // VGPU_DAEMON_TIMELINE=0
  const Engine::Stats all = kept->stats();
  EXPECT_EQ(all.events_submitted, four.events_submitted);
  EXPECT_GT(all.result_bytes + all.history_bytes, 3 * (four.result_bytes + four.history_bytes));
}

TEST_F(RealDaemon, RanksInSeparateProcessesShareOneSimulation) {
  std::vector<std::unique_ptr<Child>> ranks;
  for (int i = 0; i < 8; ++i)
    ranks.push_back(std::make_unique<Child>(
        std::vector<std::string>{CLIENT_TOOL_PATH, "add", std::to_string(1 << 20)}, env()));
  std::set<std::string> ids;
  for (auto& r : ranks) {
    auto l = r->line();
    ASSERT_TRUE(l);
    EXPECT_EQ(l->rfind("id ", 0), 0u) << *l;
    ids.insert(*l);
    EXPECT_TRUE(r->succeeds());
  }
  EXPECT_EQ(ids.size(), 8u);  // one engine numbered them all
  std::string err;
  auto e = connect_engine(options(), &err);
  ASSERT_TRUE(e) << err;
  EXPECT_EQ(e->stats().events_submitted, 8u);
}

TEST_F(RealDaemon, ABadClusterConfigIsReportedToTheRank) {
  Child rank({CLIENT_TOOL_PATH, "add", "1"}, env({"VGPU_NODES=banana"}));
  const std::string out = rank.rest();
  EXPECT_FALSE(rank.succeeds());
  EXPECT_NE(out.find("exited at startup"), std::string::npos) << out;
  EXPECT_NE(out.find("VGPU_NODES"), std::string::npos) << out;
}

// A received message (no key: it waits for nobody) sent in one request with a collective is
// answered with that collective, so it counts the flows another process sends for it later:
// here three flows out of GPU 0 (its NVLink port), the message and rank 0's from one request,
// rank 1's from another; the message's answer is what one engine gives with all three placed.
TEST(ShareBarrierRealEngine, AMessageSentWithACollectiveCountsTheOtherProcessesFlows) {
  ConfigResult config = load_cluster_config();
  ASSERT_TRUE(config.ok());
  auto engine = make_engine(*config.cluster);
  daemon::ShareBarrier barrier(*engine, nullptr, 60);
  const daemon::ShareBarrier::Clock::time_point now{};
  constexpr uint64_t kBytes = 256ull << 20;
  const FlowSpec to1{0, 1, kBytes, 0, {}, "rank 0"}, to2{0, 2, kBytes, 0, {}, "message"},
      to3{0, 3, kBytes, 0, {}, "rank 1"};
  barrier.submit(1, 10, wire::ShareCollectives{0, std::nullopt, {wire::SharedItem{5, 0, 2, {0}, {to1}},
                                                                 wire::SharedItem{6, 0, 0, {1}, {to2}}}},
                 false, now);
  EXPECT_TRUE(barrier.take(now).empty());  // rank 1 of the collective has not sent its flows
  barrier.submit(2, 20, wire::ShareCollectives{0, std::nullopt, {wire::SharedItem{5, 0, 2, {1}, {to3}}}}, false, now);
  const auto ready = barrier.take(now);
  ASSERT_EQ(ready.size(), 2u);
  const auto& first = ready[0].client == 1 ? ready[0] : ready[1];
  ASSERT_EQ(first.reply.answers.size(), 2u);
  ASSERT_TRUE(first.reply.answers[1].finish);
  // One engine, all three flows: the message's finish; and with the first request's two only.
  auto all = make_engine(*config.cluster), two = make_engine(*config.cluster);
  const EventId message = (all->add_flow(to1), all->add_flow(to2));
  all->add_flow(to3);
  const EventId message_of_two = (two->add_flow(to1), two->add_flow(to2));
  EXPECT_DOUBLE_EQ(*first.reply.answers[1].finish, all->query(message)->finish);
  EXPECT_GT(*first.reply.answers[1].finish, 1.2 * two->query(message_of_two)->finish);
}

}  // namespace
}  // namespace simcore::testing
