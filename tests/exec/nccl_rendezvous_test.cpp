// The table where NCCL ranks in different processes meet (vgpu/sim/exec/nccl_rendezvous.h). Each
// NcclRendezvous object maps the table on its own, as each process of a job does; threads stand
// in for the processes.
#include "sim/exec/nccl_rendezvous.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

namespace vgpu {
namespace {

std::string table_path(const char* name) {
  return "/dev/shm/vgpu-nccl-test-" + std::to_string(getpid()) + "-" + name;
}

struct Cleanup {
  std::string path;
  ~Cleanup() { unlink(path.c_str()); }
};

TEST(NcclRendezvous, EveryRankGetsTheLatestArrivalAndEveryGpu) {
  const std::string path = table_path("latest");
  Cleanup c{path};
  constexpr int kRanks = 4, kCollectives = 10;
  std::vector<std::vector<NcclRendezvous::Arrivals>> got(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      NcclRendezvous table(path);  // one "process" per rank
      for (int k = 0; k < kCollectives; ++k)
        got[r].push_back(table.arrive(0xc0ffee, kRanks, r, 40 + r, k * 1.0 + r * 0.25, true, 60));
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r)
    for (int k = 0; k < kCollectives; ++k) {
      const auto& a = got[r][k];
      EXPECT_TRUE(a.complete) << r << " " << k;
      EXPECT_EQ(a.known, kRanks);
      EXPECT_DOUBLE_EQ(a.latest, k * 1.0 + (kRanks - 1) * 0.25) << "rank " << r << " collective " << k;
      EXPECT_EQ(a.gpus, (std::vector<int>{40, 41, 42, 43}));
    }
}

// A pipeline stage's send/recv communicator pairs GPU 3 of one node with GPU 11 of the next:
// each rank's process posts its GPU at its send/recv launches (counting no collective), and
// learns the other's once it has posted; a collective's arrival posts it too. GPU 0 is a GPU,
// not "unknown".
TEST(NcclRendezvous, TheRosterTellsEveryRanksGpuWithoutACollective) {
  const std::string path = table_path("roster");
  Cleanup c{path};
  NcclRendezvous stage0(path), stage1(path);
  EXPECT_EQ(stage0.roster(0x9a1, 2, 0, 3), (std::vector<int>{3, -1}));
  EXPECT_EQ(stage1.roster(0x9a1, 2, 1, 11), (std::vector<int>{3, 11}));
  EXPECT_EQ(stage0.roster(0x9a1, 2, 0, 3), (std::vector<int>{3, 11}));
  EXPECT_EQ(stage0.roster(0x9a2, 2, 1, 0), (std::vector<int>{-1, 0}));  // another communicator
  EXPECT_EQ(stage1.roster(0x9a2, 2, 0, 8), (std::vector<int>{8, 0}));
  // No collective was counted: the first arrival of each rank still meets the other's first.
  std::thread t([&] { EXPECT_TRUE(stage1.arrive(0x9a1, 2, 1, 11, 5.0, true, 60).complete); });
  const auto a = stage0.arrive(0x9a1, 2, 0, 3, 2.0, true, 60);
  t.join();
  EXPECT_DOUBLE_EQ(a.latest, 5.0);
  // A rank known only from its arrival is in the roster.
  NcclRendezvous other(path);
  (void)other.arrive(0x9a3, 3, 2, 20, 1.0, false, 60);
  EXPECT_EQ(stage0.roster(0x9a3, 3, 0, 4), (std::vector<int>{4, -1, 20}));
  EXPECT_EQ(stage0.roster(0x9a3, 3, 5, 4), (std::vector<int>(3, -1)));  // not a rank of it
}

TEST(NcclRendezvous, CommunicatorsAreSeparate) {
  const std::string path = table_path("comms");
  Cleanup c{path};
  NcclRendezvous a(path), b(path);
  std::thread t([&] { EXPECT_DOUBLE_EQ(b.arrive(2, 2, 1, 1, 7.0, true, 60).latest, 7.0); });
  // Communicator 1 has two ranks too, but only rank 0 of it ever arrives: no waiting for it here.
  EXPECT_FALSE(a.arrive(1, 2, 0, 0, 9.0, false, 60).complete);
  EXPECT_DOUBLE_EQ(a.arrive(2, 2, 0, 0, 3.0, true, 60).latest, 7.0);
  t.join();
}

TEST(NcclRendezvous, WithoutWaitingOnlyThePostedArrivalsCount) {
  const std::string path = table_path("nowait");
  Cleanup c{path};
  NcclRendezvous a(path), b(path);
  auto first = a.arrive(5, 2, 0, 0, 1.0, false, 60);
  EXPECT_FALSE(first.complete);
  EXPECT_EQ(first.known, 1);
  EXPECT_EQ(first.gpus, (std::vector<int>{0, -1}));
  auto second = b.arrive(5, 2, 1, 3, 2.0, false, 60);
  EXPECT_TRUE(second.complete);
  EXPECT_DOUBLE_EQ(second.latest, 2.0);
  EXPECT_EQ(second.gpus, (std::vector<int>{0, 3}));
}

TEST(NcclRendezvous, ARankThatNeverComesIsWaitedForOnlyUntilTheTimeout) {
  const std::string path = table_path("timeout");
  Cleanup c{path};
  NcclRendezvous a(path);
  auto got = a.arrive(6, 3, 0, 0, 1.5, true, 0.05);
  EXPECT_FALSE(got.complete);
  EXPECT_EQ(got.known, 1);
  EXPECT_DOUBLE_EQ(got.latest, 1.5);
}

// A job of many process groups (3D parallelism on 64 ranks: 8 tensor-parallel groups, 16 data-
// parallel ones, 32 pipeline pairs; before sim30 each collective-placing communicator took three
// entries): every one of 400 communicators still meets its other rank,
// from two "processes" whose tables are mapped apart. The table held 64 entries, about 21 such
// communicators: later ones were timed from their own process's ranks.
TEST(NcclRendezvous, FourHundredCommunicatorsAllMeet) {
  const std::string path = table_path("many");
  Cleanup c{path};
  NcclRendezvous a(path), b(path);
  constexpr int kComms = 400;
  int complete = 0;
  for (int i = 0; i < kComms; ++i) {
    const uint64_t comm = 0x5eed0000ull + 7919ull * i;
    a.arrive(comm, 2, 0, 0, 1.0, false, 60);
    const NcclRendezvous::Arrivals got = b.arrive(comm, 2, 1, 1, 2.0, false, 60);
    complete += got.complete && got.latest == 2.0;
  }
  EXPECT_EQ(complete, kComms);
}

TEST(NcclRendezvous, NoTableMeansOnlyThisRank) {
  NcclRendezvous a("/nonexistent-dir/vgpu-nccl-table");
  auto got = a.arrive(7, 2, 1, 5, 4.0, true, 60);
  EXPECT_FALSE(got.complete);
  EXPECT_EQ(got.known, 1);
  EXPECT_DOUBLE_EQ(got.latest, 4.0);
}

}  // namespace
}  // namespace vgpu
