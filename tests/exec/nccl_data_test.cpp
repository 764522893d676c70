// The data of NCCL collectives on the sim backend without a driver: the arithmetic of each
// collective (vgpu/sim/exec/nccl_reduce.h) and the job's exchange of the ranks' parts
// (nccl_data_exchange.h), each NcclDataExchange standing for one process, threads for ranks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "sim/exec/nccl_data_exchange.h"
#include "sim/exec/nccl_reduce.h"

namespace vgpu {
namespace {

using nccl_data::Op;

vgpu_nccl_task task(const char* func, const char* type, uint64_t count, int root = -1) {
  vgpu_nccl_task t{};
  std::strncpy(t.func, func, sizeof t.func - 1);
  std::strncpy(t.datatype, type, sizeof t.datatype - 1);
  t.count = count;
  t.root = root;
  return t;
}

template <class T> std::vector<char> bytes(const std::vector<T>& v) {
  std::vector<char> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <class T> std::vector<T> values(const std::vector<char>& b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

std::vector<char> run(const vgpu_nccl_task& t, int nranks, int rank, Op op, const std::vector<std::vector<char>>& parts,
                      bool* ok) {
  size_t post = 0, recv = 0;
  EXPECT_TRUE(nccl_data::sizes(t, nranks, rank, &post, &recv));
  std::vector<char> out(recv, 0x7f);
  *ok = nccl_data::combine(t, nranks, rank, op, parts, out.data(), out.size());
  return out;
}

TEST(NcclReduce, AllReduceSumsInEveryDatatype) {
  bool ok = false;
  auto f = run(task("AllReduce", "ncclFloat32", 3), 2, 0, Op::sum,
               {bytes<float>({1, 2, 3}), bytes<float>({10, 20, 30})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<float>(f), (std::vector<float>{11, 22, 33}));
  auto i = run(task("AllReduce", "ncclInt64", 2), 3, 2, Op::prod,
               {bytes<int64_t>({2, -1}), bytes<int64_t>({3, 5}), bytes<int64_t>({4, 7})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<int64_t>(i), (std::vector<int64_t>{24, -35}));
  // bfloat16 1.5 (0x3fc0) + 2.5 (0x4020) = 4.0 (0x4080); half 1.0 (0x3c00) + 0.5 (0x3800) = 1.5 (0x3e00).
  auto b = run(task("AllReduce", "ncclBfloat16", 1), 2, 1, Op::sum,
               {bytes<uint16_t>({0x3fc0}), bytes<uint16_t>({0x4020})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<uint16_t>(b), (std::vector<uint16_t>{0x4080}));
  auto h = run(task("AllReduce", "ncclFloat16", 1), 2, 0, Op::sum,
               {bytes<uint16_t>({0x3c00}), bytes<uint16_t>({0x3800})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<uint16_t>(h), (std::vector<uint16_t>{0x3e00}));
}

TEST(NcclReduce, GatherBroadcastScatterAndReduce) {
  bool ok = false;
  auto g = run(task("AllGather", "ncclInt32", 2), 3, 1, Op::sum,
               {bytes<int32_t>({1, 2}), bytes<int32_t>({3, 4}), bytes<int32_t>({5, 6})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<int32_t>(g), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  // Broadcast: only the root posts.
  auto bc = run(task("Broadcast", "ncclUint8", 3, 1), 2, 0, Op::sum, {{}, bytes<uint8_t>({7, 8, 9})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<uint8_t>(bc), (std::vector<uint8_t>{7, 8, 9}));
  // Reduce-scatter: rank 1 gets the sum of every rank's second block.
  auto rs = run(task("ReduceScatter", "ncclFloat64", 2), 2, 1, Op::sum,
                {bytes<double>({1, 2, 3, 4}), bytes<double>({10, 20, 30, 40})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<double>(rs), (std::vector<double>{33, 44}));
  // Reduce: the root gets the sum, the others nothing.
  auto root = run(task("Reduce", "ncclUint32", 1, 0), 2, 0, Op::sum, {bytes<uint32_t>({5}), bytes<uint32_t>({6})}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(values<uint32_t>(root), (std::vector<uint32_t>{11}));
  size_t post = 0, recv = 1;
  ASSERT_TRUE(nccl_data::sizes(task("Reduce", "ncclUint32", 1, 0), 2, 1, &post, &recv));
  EXPECT_EQ(recv, 0u);
}

TEST(NcclReduce, RefusesWhatItCannotCompute) {
  bool ok = true;
  // A rank that could not post (empty part) leaves the buffer alone.
  run(task("AllReduce", "ncclFloat32", 2), 2, 0, Op::sum, {bytes<float>({1, 2}), {}}, &ok);
  EXPECT_FALSE(ok);
  run(task("AllReduce", "ncclFloat32", 1), 2, 0, Op::unknown, {bytes<float>({1}), bytes<float>({2})}, &ok);
  EXPECT_FALSE(ok);
  size_t post = 0, recv = 0;
  EXPECT_FALSE(nccl_data::sizes(task("Send", "ncclFloat32", 1), 2, 0, &post, &recv));
  EXPECT_FALSE(nccl_data::sizes(task("AllReduce", "ncclNoSuchType", 1), 2, 0, &post, &recv));
  EXPECT_EQ(nccl_data::op_of_kernel("ncclDevKernel_AllReduce_Prod_f32_RING_LL"), Op::prod);
  EXPECT_EQ(nccl_data::op_of_kernel("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"),
            Op::sum);
  EXPECT_EQ(nccl_data::op_of_kernel("ncclDevKernel_Generic_4"), Op::sum);
}

struct Folder {
  std::string path = "/dev/shm/vgpu-nccl-data-test-" + std::to_string(getpid());
  ~Folder() { std::filesystem::remove_all(path); }
};

TEST(NcclDataExchange, EveryRankGetsEveryPartAndOldPostsGo) {
  Folder dir;
  constexpr int kRanks = 4, kCollectives = 6;
  std::vector<std::vector<std::vector<std::vector<char>>>> got(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      NcclDataExchange ex(dir.path);  // one "process" per rank
      for (int k = 0; k < kCollectives; ++k) {
        const std::vector<char> mine(static_cast<size_t>(r + 1), static_cast<char>('a' + k));
        ASSERT_TRUE(ex.post(0xabc, k, 0, r, mine.data(), mine.size()));
        std::vector<std::vector<char>> parts;
        ASSERT_TRUE(ex.collect(0xabc, k, 0, kRanks, 60, &parts));
        ex.done(0xabc, k, r);
        got[r].push_back(parts);
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r)
    for (int k = 0; k < kCollectives; ++k)
      for (int q = 0; q < kRanks; ++q)
        EXPECT_EQ(got[r][k][q], std::vector<char>(static_cast<size_t>(q + 1), static_cast<char>('a' + k)))
            << "rank " << r << " collective " << k << " part of " << q;
  // Only the last collective's posts are left (each rank removed its older ones).
  int left = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    EXPECT_NE(e.path().filename().string().find("abc-5-0-"), std::string::npos) << e.path();
    ++left;
  }
  EXPECT_EQ(left, kRanks);
}

TEST(NcclDataExchange, ARankThatNeverComesTimesOut) {
  Folder dir;
  NcclDataExchange ex(dir.path);
  const char mine = 1;
  ASSERT_TRUE(ex.post(0xdef, 0, 0, 0, &mine, 1));
  std::vector<std::vector<char>> parts;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ex.collect(0xdef, 0, 0, 2, 0.2, &parts));  // rank 1 never posts
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));  // returned, did not hang
}

TEST(NcclDataExchange, ARankThatAbandonsReleasesTheOthersAtOnce) {
  Folder dir;
  NcclDataExchange a(dir.path), b(dir.path);
  const char mine = 1;
  ASSERT_TRUE(a.post(0x123, 3, 0, 0, &mine, 1));
  b.abandon(0x123, 3, 1);
  std::vector<std::vector<char>> parts;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(a.collect(0x123, 3, 0, 2, 600, &parts));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

// A send's virtual arrival reaches its receive in another "process" (nccl_p2p.h): by pair, side
// and order, the receive waiting for a send posted later, each read once.
TEST(NcclDataExchange, ASendsArrivalReachesItsReceiveInOrder) {
  Folder dir;
  NcclDataExchange sender(dir.path), receiver(dir.path);
  ASSERT_TRUE(sender.post_arrival(0xabc, 0, 1, 0, false, 0.25));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sender.post_arrival(0xabc, 0, 1, 1, false, 1.5);
  });
  double t = -1;
  EXPECT_TRUE(receiver.take_arrival(0xabc, 0, 1, 0, false, 10, &t));
  EXPECT_EQ(t, 0.25);
  EXPECT_TRUE(receiver.take_arrival(0xabc, 0, 1, 1, false, 10, &t));  // waits for it
  EXPECT_EQ(t, 1.5);
  later.join();
  EXPECT_FALSE(receiver.take_arrival(0xabc, 0, 1, 0, false, 0, &t));  // taken: gone
  EXPECT_FALSE(receiver.take_arrival(0xabc, 0, 1, 1, true, 0, &t));   // the receive's side: never posted
  EXPECT_FALSE(receiver.take_arrival(0xabc, 1, 0, 0, false, 0, &t));  // the other direction: never sent
}

TEST(NcclDataExchange, AReceiveWhoseSendNeverComesTimesOut) {
  Folder dir;
  NcclDataExchange ex(dir.path);
  double t = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ex.take_arrival(0xabc, 0, 1, 0, false, 0.2, &t));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));  // returned, did not hang
}

TEST(NcclDataExchange, AFolderThatCannotBeMadeRefusesPosts) {
  NcclDataExchange ex("/nonexistent-dir/vgpu-nccl-data");
  const char mine = 1;
  EXPECT_FALSE(ex.post(1, 0, 0, 0, &mine, 1));
  std::vector<std::vector<char>> parts;
  EXPECT_FALSE(ex.collect(1, 0, 0, 1, 0.1, &parts));
}

}  // namespace
}  // namespace vgpu
