// The NCCL plugin keeps the job's vgpud bounded (nccl_plugin/core/virtual_time.h): two rank
// processes (RANK 0 and 1 of WORLD_SIZE 2, as torchrun starts them; each a fresh exec of this
// binary), one sending and one receiving many transfers through the plugin with no driver
// installed, as the passthrough's rank processes do through the job's vgpud. The receiver reads
// vgpud's counters after kEarly and after kLate transfers: the live events, flow segments and
// held results stay where they were (each process registered its rank, the receiver moved its
// floor and released its flows' ids once no later flow names them), while vgpud kept every one
// of them before.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "own_daemon.h"
#include "plugin_fixture.h"
#include "simcore/remote_engine.h"

using namespace vtest;

namespace {

constexpr size_t kBytes = 64 * 1024;
constexpr int kBuffers = 4;     // each end cycles through its staging buffers, as NCCL does
constexpr int kEarly = 3000;    // transfers before the first reading
constexpr int kLate = 12000;    // ... and before the second
constexpr int kSenderGpu = 5;   // node 1
constexpr int kReceiverGpu = 0;

int run_sender(int in_fd) {
  const auto& n = net();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  if (read(in_fd, handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) return 10;
  plugin().set_thread_gpu(kSenderGpu);
  void* sc = nullptr;
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (sc == nullptr) {
    if (std::chrono::steady_clock::now() > end) return 11;
    if (n.connect(plugin().ctx, 0, handle, &sc, nullptr) != ncclSuccess) return 12;
  }
  std::vector<unsigned char> src(kBytes * kBuffers, 7);
  void* mr = nullptr;
  if (n.regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &mr) != ncclSuccess) return 13;
  for (int k = 0; k < kLate; ++k) {
    void* req = nullptr;
    if (n.isend(sc, src.data() + (k % kBuffers) * kBytes, kBytes, 1, mr, nullptr, &req) != ncclSuccess || !req)
      return 14;
    if (wait_all({req}) != ncclSuccess) return 15;
  }
  n.deregMr(sc, mr);
  n.closeSend(sc);
  return 0;
}

int run_receiver(int handle_fd, int out_fd) {
  const auto& n = net();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  plugin().set_thread_gpu(kReceiverGpu);
  if (n.listen(plugin().ctx, 0, handle, &lc) != ncclSuccess) return 20;
  if (write(handle_fd, handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) return 21;
  void* rc = nullptr;
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (rc == nullptr) {
    if (std::chrono::steady_clock::now() > end) return 22;
    if (n.accept(lc, &rc, nullptr) != ncclSuccess) return 23;
  }
  std::vector<unsigned char> dst(kBytes * kBuffers);
  void* mr = nullptr;
  if (n.regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &mr) != ncclSuccess) return 24;
  // vgpud's counters through a connection of our own (it registers no rank).
  std::unique_ptr<simcore::Engine> probe = simcore::connect_engine(simcore::RemoteOptions{});
  if (probe == nullptr) return 25;
  for (int k = 0; k < kLate; ++k) {
    void* d[1] = {dst.data() + (k % kBuffers) * kBytes};
    size_t s[1] = {kBytes};
    int t[1] = {1};
    void* m[1] = {mr};
    void* req = nullptr;
    if (n.irecv(rc, 1, d, s, t, m, nullptr, &req) != ncclSuccess || !req) return 26;
    if (wait_all({req}) != ncclSuccess) return 27;
    if (k + 1 == kEarly || k + 1 == kLate) {
      const simcore::Engine::Stats st = probe->stats();
      if (write(out_fd, &st, sizeof st) != static_cast<ssize_t>(sizeof st)) return 28;
    }
  }
  n.deregMr(rc, mr);
  n.closeRecv(rc);
  n.closeListen(lc);
  return 0;
}

pid_t start_rank(const char* role, int rank, int fd_a, int fd_b) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  dup2(fd_a, 3);
  if (fd_b >= 0) dup2(fd_b, 4);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", "2", 1);
  execl("/proc/self/exe", "daemon_bounded_rank", role, static_cast<char*>(nullptr));
  _exit(127);
}

}  // namespace

TEST(NcclDaemonBounded, TwoRankProcessesKeepVgpudBounded) {
  int handle[2], results[2];
  ASSERT_EQ(pipe(handle), 0);
  ASSERT_EQ(pipe(results), 0);
  const pid_t receiver = start_rank("--receiver", 0, handle[1], results[1]);
  const pid_t sender = start_rank("--sender", 1, handle[0], -1);
  ASSERT_GT(receiver, 0);
  ASSERT_GT(sender, 0);
  close(handle[0]);
  close(handle[1]);
  close(results[1]);
  simcore::Engine::Stats early{}, late{};
  const bool read_early = read(results[0], &early, sizeof early) == static_cast<ssize_t>(sizeof early);
  const bool read_late = read_early && read(results[0], &late, sizeof late) == static_cast<ssize_t>(sizeof late);
  close(results[0]);
  int rs = 0, ss = 0;
  ASSERT_EQ(waitpid(receiver, &rs, 0), receiver);
  ASSERT_EQ(waitpid(sender, &ss, 0), sender);
  EXPECT_TRUE(WIFEXITED(rs) && WEXITSTATUS(rs) == 0) << "receiver status " << rs;
  EXPECT_TRUE(WIFEXITED(ss) && WEXITSTATUS(ss) == 0) << "sender status " << ss;
  ASSERT_TRUE(read_early && read_late);
  std::printf("vgpud after %d / %d transfers: %llu / %llu submitted, %llu / %llu live events, %llu / %llu flow "
              "segments, %llu / %llu B history, %llu / %llu B results, floor %.6f / %.6f s\n",
              kEarly, kLate, (unsigned long long)early.events_submitted, (unsigned long long)late.events_submitted,
              (unsigned long long)early.events_live, (unsigned long long)late.events_live,
              (unsigned long long)early.flow_segments, (unsigned long long)late.flow_segments,
              (unsigned long long)early.history_bytes, (unsigned long long)late.history_bytes,
              (unsigned long long)early.result_bytes, (unsigned long long)late.result_bytes, early.floor, late.floor);
  EXPECT_EQ(late.events_submitted, static_cast<uint64_t>(kLate));
  // Bounded: four times the transfers, not more held (a margin for where the floor stood).
  EXPECT_LT(late.events_live, static_cast<uint64_t>(kEarly) / 2);
  EXPECT_LE(late.events_live, early.events_live + 256);
  EXPECT_LE(late.flow_segments, early.flow_segments + 256);
  EXPECT_LE(late.history_bytes, early.history_bytes * 3 / 2);
  // The ids released: vgpud forgets the results of past flows (a few chunks of 4096 stay).
  EXPECT_LE(late.result_bytes, early.result_bytes * 3 / 2);
  EXPECT_GT(late.floor, early.floor);
}

// A daemon of our own, shut down at the end (own_daemon.h).
int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--sender") return run_sender(3);
  if (argc >= 2 && std::string(argv[1]) == "--receiver") return run_receiver(3, 4);
  OwnDaemon daemon("nccl-bounded-");
  if (!daemon.ok()) return 2;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
