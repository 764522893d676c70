// The NCCL gate's rule (passthrough/nccl_gate_table.h): which launches wait, on which counts, for
// which value. The GPU's side (cuStreamWaitValue32 on those counts) is the device check's
// (tests/gpu/fidelity, VGPU_NCCL_GATE=1); here the counts are plain shared memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "passthrough/nccl_gate_table.h"

using vgpu::pt::nccl_gate::Table;

namespace {

vgpu_nccl_launch launch(uint64_t comm, int nranks, int rank, std::initializer_list<const char*> funcs) {
  vgpu_nccl_launch w{};
  w.comm_id = comm;
  w.nranks = nranks;
  w.rank = rank;
  for (const char* f : funcs) std::strncpy(w.op[w.count++].func, f, sizeof w.op[0].func - 1);
  return w;
}

uint32_t read(const uint32_t* count) { return __atomic_load_n(count, __ATOMIC_ACQUIRE); }
void arrive(const Table::Plan& p) { Table::arrive(p.mine, p.value); }

// Two processes of a job: two tables over one shared block.
struct Job {
  std::unique_ptr<void, decltype(&std::free)> rows{std::calloc(1, Table::kBytes), &std::free};
  Table a{rows.get()}, b{rows.get()};
};

TEST(NcclGate, TheKthCollectiveOfARankWaitsForEveryOtherRanksKth) {
  Job job;
  const Table::Plan r0 = job.a.plan(launch(7, 3, 0, {"AllReduce"}), 0);
  ASSERT_NE(r0.mine, nullptr);
  EXPECT_EQ(r0.value, 1u);
  ASSERT_EQ(r0.peers.size(), 2u);
  arrive(r0);
  // Rank 1 in another process: the same row, its own count, rank 0's among its peers.
  const Table::Plan r1 = job.b.plan(launch(7, 3, 1, {"AllReduce"}), 0);
  ASSERT_NE(r1.mine, nullptr);
  EXPECT_NE(r1.mine, r0.mine);
  EXPECT_EQ(r1.value, 1u);
  bool sees_rank0 = false;
  for (const uint32_t* p : r1.peers) sees_rank0 = sees_rank0 || (p == r0.mine && read(p) >= r1.value);
  EXPECT_TRUE(sees_rank0) << "rank 1 does not wait on rank 0's count, or rank 0's arrival is not there";
  for (const uint32_t* p : r0.peers) EXPECT_NE(p, r0.mine);
  // Rank 0's second collective waits for value 2 of the others, which no one reached yet.
  const Table::Plan again = job.a.plan(launch(7, 3, 0, {"AllGather"}), 0);
  EXPECT_EQ(again.value, 2u);
  for (const uint32_t* p : again.peers) EXPECT_LT(read(p), again.value);
}

TEST(NcclGate, RanksOfOneProcessCountApart) {
  Job job;  // nccl-tests -g 2: both ranks in one process
  const Table::Plan r0 = job.a.plan(launch(9, 2, 0, {"ReduceScatter"}), 0);
  const Table::Plan r1 = job.a.plan(launch(9, 2, 1, {"ReduceScatter"}), 0);
  EXPECT_EQ(r0.value, 1u);
  EXPECT_EQ(r1.value, 1u);
  ASSERT_EQ(r0.peers.size(), 1u);
  EXPECT_EQ(r0.peers[0], r1.mine);
  EXPECT_EQ(r1.peers[0], r0.mine);
}

TEST(NcclGate, PointToPointAndUnknownLaunchesAreNeverGatedNorCounted) {
  Job job;
  EXPECT_EQ(job.a.plan(launch(5, 2, 0, {"Send"}), 0).mine, nullptr);
  EXPECT_EQ(job.a.plan(launch(5, 2, 0, {"AllReduce", "Recv"}), 0).mine, nullptr);
  EXPECT_EQ(job.a.plan(launch(5, 2, 0, {}), 0).mine, nullptr) << "no operation known at launch";
  EXPECT_EQ(job.a.plan(launch(5, 1, 0, {"AllReduce"}), 0).mine, nullptr) << "one rank waits for no one";
  EXPECT_EQ(job.a.plan(launch(5, Table::kRanks + 1, 0, {"AllReduce"}), 0).mine, nullptr);
  EXPECT_EQ(job.a.plan(launch(5, 2, 2, {"AllReduce"}), 0).mine, nullptr) << "rank out of range";
  EXPECT_EQ(job.a.plan(launch(0, 2, 0, {"AllReduce"}), 0).mine, nullptr) << "no communicator id";
  // None of those counted: the first collective is still the first.
  EXPECT_EQ(job.a.plan(launch(5, 2, 0, {"AllReduce"}), 0).value, 1u);
}

TEST(NcclGate, CommunicatorsHaveRowsOfTheirOwnUntilTheTableIsFull) {
  Job job;
  const Table::Plan x = job.a.plan(launch(1, 2, 0, {"AllReduce"}), 0);
  const Table::Plan y = job.a.plan(launch(1 + Table::kComms, 2, 0, {"AllReduce"}), 0);  // same first slot
  ASSERT_NE(x.mine, nullptr);
  ASSERT_NE(y.mine, nullptr);
  EXPECT_NE(x.mine, y.mine);
  for (uint64_t c = 2; c < Table::kComms; ++c) ASSERT_NE(job.a.plan(launch(c, 2, 0, {"AllReduce"}), 0).mine, nullptr);
  EXPECT_EQ(job.a.plan(launch(100000, 2, 0, {"AllReduce"}), 0).mine, nullptr) << "a full table gates nothing more";
  EXPECT_EQ(job.b.plan(launch(1, 2, 1, {"AllReduce"}), 0).peers[0], x.mine) << "a known communicator still finds its row";
}

TEST(NcclGate, ARankLeftWaitingPastTheLimitLetsItsCommunicatorGo) {
  Job job;
  // Rank 0 launched two all-reduces, rank 1 (another process) one: rank 0's second waits for ever.
  arrive(job.a.plan(launch(3, 2, 0, {"AllReduce"}), 10.0));
  arrive(job.b.plan(launch(3, 2, 1, {"AllReduce"}), 10.0));
  const Table::Plan second = job.a.plan(launch(3, 2, 0, {"AllReduce"}), 11.0);
  arrive(second);
  EXPECT_TRUE(job.a.release_stalled(11.0 + 4.0, 5.0).empty()) << "not yet past the limit";
  EXPECT_TRUE(job.b.release_stalled(100.0, 5.0).empty()) << "rank 1's own launches are all matched";
  const std::vector<std::string> let_go = job.a.release_stalled(11.0 + 6.0, 5.0);
  ASSERT_EQ(let_go.size(), 1u);
  EXPECT_NE(let_go[0].find("rank 0"), std::string::npos) << let_go[0];
  EXPECT_NE(let_go[0].find("counts: 2 1"), std::string::npos) << let_go[0];
  // Every stream waiting on that row goes on, in any process, and the row gates nothing more.
  for (const uint32_t* p : second.peers) EXPECT_GE(read(p), second.value);
  EXPECT_EQ(job.b.plan(launch(3, 2, 1, {"AllReduce"}), 20.0).mine, nullptr);
  // A late arrival does not bring a count back under a value a stream may wait for.
  Table::arrive(second.mine, 3);
  EXPECT_EQ(read(second.mine), UINT32_MAX);
  EXPECT_TRUE(job.a.release_stalled(100.0, 5.0).empty()) << "let go once";
  // Other communicators are still gated.
  EXPECT_NE(job.a.plan(launch(4, 2, 0, {"AllReduce"}), 20.0).mine, nullptr);
}

TEST(NcclGate, RanksThatAllArrivedAreNeverLetGo) {
  Job job;
  for (int i = 0; i < 3; ++i) {
    arrive(job.a.plan(launch(6, 2, 0, {"AllGather"}), i));
    arrive(job.b.plan(launch(6, 2, 1, {"AllGather"}), i));
  }
  EXPECT_TRUE(job.a.release_stalled(1000.0, 5.0).empty());
  EXPECT_TRUE(job.b.release_stalled(1000.0, 5.0).empty());
  EXPECT_EQ(job.a.plan(launch(6, 2, 0, {"AllGather"}), 1000.0).value, 4u) << "still gated";
}

}  // namespace
