// Where virtual time comes from, run once per VGPU_SIMCORE mode by meson (unset: an engine in
// this process; "daemon": the job's vgpud, started on demand; "off": none), with no clock hook
// installed (as under the real driver today):
// - every transfer still gets a virtual interval, and a rank's next transfer starts no earlier
//   than the transfers it already completed finished (virtual time advances instead of piling
//   every transfer up at 0);
// - the sender and the receiver report the same flow and interval, ranks as threads or as
//   processes (a child process re-executes this binary to be a fresh rank);
// - with the engine off, the bytes move and nothing carries virtual time.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "own_daemon.h"
#include "plugin_fixture.h"
#include "simcore/remote_engine.h"

using namespace vtest;

namespace {

enum class Mode { local, daemon, off };

Mode mode() {
  const char* m = std::getenv("VGPU_SIMCORE");
  if (m != nullptr && std::string(m) == "daemon") return Mode::daemon;
  if (m != nullptr && std::string(m) == "off") return Mode::off;
  return Mode::local;
}

constexpr size_t kBytes = 3'000'000;
constexpr int kSenderGpu = 5;  // node 1
constexpr int kReceiverGpu = 0;

struct Done {
  vgpu_nccl_completion c{};
  bool ok = false;
};

// Polls `req` to completion and returns the completion the plugin recorded for it.
Done complete(void* req) {
  Done d;
  d.ok = wait_all({req}) == ncclSuccess && plugin().last_completion(&d.c) == 0;
  return d;
}

// Both ends polled from one thread (the sender must keep filling the ring while the receiver
// drains it); each completion is taken right after its own test() reported done.
void complete_both(void* sreq, void* rreq, Done* send, Done* recv) {
  send->ok = recv->ok = false;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while ((sreq != nullptr || rreq != nullptr) && std::chrono::steady_clock::now() < end) {
    int done = 0;
    if (sreq != nullptr) {
      if (net().test(sreq, &done, nullptr) != ncclSuccess) return;
      if (done) {
        send->ok = plugin().last_completion(&send->c) == 0;
        sreq = nullptr;
      }
    }
    if (rreq != nullptr) {
      if (net().test(rreq, &done, nullptr) != ncclSuccess) return;
      if (done) {
        recv->ok = plugin().last_completion(&recv->c) == 0;
        rreq = nullptr;
      }
    }
  }
}

void expect_timed(const vgpu_nccl_completion& c) {
  if (mode() == Mode::off) {
    EXPECT_EQ(c.flow_id, 0u);
    EXPECT_TRUE(std::isnan(c.start));
    EXPECT_TRUE(std::isnan(c.finish));
    return;
  }
  EXPECT_NE(c.flow_id, 0u);
  EXPECT_GE(c.start, 0.0);
  EXPECT_GT(c.finish, c.start);
}

void expect_same_flow(const vgpu_nccl_completion& send, const vgpu_nccl_completion& recv) {
  EXPECT_EQ(send.is_send, 1);
  EXPECT_EQ(recv.is_send, 0);
  EXPECT_EQ(send.flow_id, recv.flow_id);
  EXPECT_EQ(send.bytes, recv.bytes);
  if (mode() != Mode::off) {
    EXPECT_DOUBLE_EQ(send.start, recv.start);
    EXPECT_DOUBLE_EQ(send.finish, recv.finish);
  }
}

// The child rank: connect to the handle on `in_fd`, send two messages one after the other, and
// write both send completions to `out_fd`.
int child_send(int in_fd, int out_fd) {
  const auto& n = net();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  if (read(in_fd, handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) return 10;
  plugin().set_thread_gpu(kSenderGpu);
  void* sc = nullptr;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (sc == nullptr) {
    if (std::chrono::steady_clock::now() > end) return 11;
    if (n.connect(plugin().ctx, 0, handle, &sc, nullptr) != ncclSuccess) return 12;
  }
  std::vector<unsigned char> src(kBytes);
  void* mr = nullptr;
  if (n.regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &mr) != ncclSuccess) return 13;
  for (unsigned k = 0; k < 2; ++k) {
    fill_pattern(src, 40 + k);
    void* req = nullptr;
    if (n.isend(sc, src.data(), src.size(), 9, mr, nullptr, &req) != ncclSuccess || !req) return 14;
    Done d = complete(req);
    if (!d.ok) return 15;
    if (write(out_fd, &d.c, sizeof d.c) != static_cast<ssize_t>(sizeof d.c)) return 16;
  }
  n.deregMr(sc, mr);
  n.closeSend(sc);
  return 0;
}

}  // namespace

TEST(NcclEngineModes, TransfersAdvanceVirtualTimeWithoutAClock) {
  const auto& n = net();
  ASSERT_NE(plugin().ctx, nullptr);
  Pair p = gpu_pair(kSenderGpu, kReceiverGpu);
  ASSERT_NE(p.send, nullptr);
  ASSERT_NE(p.recv, nullptr);

  std::vector<unsigned char> src(kBytes), dst(kBytes);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), kBytes, NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), kBytes, NCCL_PTR_HOST, &rmr), ncclSuccess);
  vgpu_nccl_completion sends[3], recvs[3];
  for (int k = 0; k < 3; ++k) {
    fill_pattern(src, 70 + k);
    void *sreq = nullptr, *rreq = nullptr;
    void* d[1] = {dst.data()};
    size_t s[1] = {kBytes};
    int t[1] = {4};
    void* m[1] = {rmr};
    ASSERT_EQ(n.irecv(p.recv, 1, d, s, t, m, nullptr, &rreq), ncclSuccess);
    ASSERT_EQ(n.isend(p.send, src.data(), kBytes, 4, smr, nullptr, &sreq), ncclSuccess);
    Done q, r;
    complete_both(sreq, rreq, &q, &r);
    ASSERT_TRUE(r.ok && q.ok);
    EXPECT_TRUE(src == dst) << k;
    recvs[k] = r.c;
    sends[k] = q.c;
    SCOPED_TRACE(k);
    expect_timed(recvs[k]);
    expect_same_flow(sends[k], recvs[k]);
    EXPECT_EQ(recvs[k].gpu, kReceiverGpu);
    EXPECT_EQ(recvs[k].peer_gpu, kSenderGpu);
    EXPECT_EQ(sends[k].gpu, kSenderGpu);
    if (k > 0 && mode() != Mode::off) {
      // Both ranks completed the previous transfer before posting this one.
      EXPECT_GE(recvs[k].start, recvs[k - 1].finish);
    }
  }
  double latest = -1;
  if (mode() == Mode::off) {
    EXPECT_EQ(plugin().latest_completion(kSenderGpu, &latest), -1);
  } else {
    ASSERT_EQ(plugin().latest_completion(kSenderGpu, &latest), 0);
    EXPECT_DOUBLE_EQ(latest, sends[2].finish);
    ASSERT_EQ(plugin().latest_completion(kReceiverGpu, &latest), 0);
    EXPECT_DOUBLE_EQ(latest, recvs[2].finish);
  }
  n.deregMr(p.send, smr);
  n.deregMr(p.recv, rmr);
  close_pair(p);
}

TEST(NcclEngineModes, ProcessesReportTheSameFlows) {
  const auto& n = net();
  ASSERT_NE(plugin().ctx, nullptr);
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A fresh process, as a rank started by torchrun is: no engine connection inherited.
    dup2(to_child[0], 3);
    dup2(from_child[1], 4);
    execl("/proc/self/exe", "engine_modes_child", "--child-send", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  plugin().set_thread_gpu(kReceiverGpu);
  ASSERT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclSuccess);
  plugin().set_thread_gpu(-1);
  ASSERT_EQ(write(to_child[1], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  void* rc = nullptr;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (rc == nullptr && std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(n.accept(lc, &rc, nullptr), ncclSuccess);
  }
  ASSERT_NE(rc, nullptr);
  std::vector<unsigned char> dst(kBytes), want(kBytes);
  void* mr = nullptr;
  ASSERT_EQ(n.regMr(rc, dst.data(), kBytes, NCCL_PTR_HOST, &mr), ncclSuccess);
  vgpu_nccl_completion recvs[2];
  for (unsigned k = 0; k < 2; ++k) {
    void* d[1] = {dst.data()};
    size_t s[1] = {kBytes};
    int t[1] = {9};
    void* m[1] = {mr};
    void* req = nullptr;
    ASSERT_EQ(n.irecv(rc, 1, d, s, t, m, nullptr, &req), ncclSuccess);
    Done r = complete(req);
    ASSERT_TRUE(r.ok);
    recvs[k] = r.c;
    fill_pattern(want, 40 + k);
    EXPECT_TRUE(want == dst) << k;
  }
  vgpu_nccl_completion sends[2];
  for (auto& c : sends) {
    ASSERT_EQ(read(from_child[0], &c, sizeof c), static_cast<ssize_t>(sizeof c));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k);
    expect_timed(recvs[k]);
    expect_same_flow(sends[k], recvs[k]);
    EXPECT_EQ(sends[k].gpu, kSenderGpu);
    EXPECT_EQ(recvs[k].peer_gpu, kSenderGpu);
    if (mode() == Mode::off) continue;
    // The flow lives in this process's engine (local) or the job's daemon: ask it directly.
    double s = 0, f = 0;
    ASSERT_EQ(plugin().flow_interval(recvs[k].flow_id, &s, &f), 0);
    EXPECT_DOUBLE_EQ(s, recvs[k].start);
    EXPECT_DOUBLE_EQ(f, recvs[k].finish);
  }
  // The sender waited for its first transfer before the second: its clock moved past it.
  if (mode() != Mode::off) {
    EXPECT_GE(recvs[1].start, recvs[0].finish);
  }
  close(to_child[1]);
  close(from_child[0]);
  n.deregMr(rc, mr);
  n.closeRecv(rc);
  n.closeListen(lc);
}

// The job's vgpud stopped (SIGSTOP) under a transfer: the call waiting on it gives up within
// about a second (not after the 120 s call timeout), and the transfer fails with
// ncclSystemError instead of moving on without virtual time (README: Reliability). Runs last:
// the daemon is killed afterwards.
TEST(NcclEngineModes, AStoppedDaemonFailsTheTransferInsteadOfStallingIt) {
  if (mode() != Mode::daemon) GTEST_SKIP() << "daemon mode only";
  const auto& n = net();
  Pair p = gpu_pair(kSenderGpu, kReceiverGpu);
  ASSERT_NE(p.send, nullptr);
  ASSERT_NE(p.recv, nullptr);
  // The daemon the plugin started is our child (we are its subreaper): find it.
  pid_t daemon = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos || line.find("(vgpud)") == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid()) daemon = static_cast<pid_t>(std::stol(name));
  }
  ASSERT_GT(daemon, 0) << "no vgpud child found";
  ASSERT_EQ(kill(daemon, SIGSTOP), 0);
  std::vector<unsigned char> src(kBytes), dst(kBytes);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), kBytes, NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), kBytes, NCCL_PTR_HOST, &rmr), ncclSuccess);
  void *sreq = nullptr, *rreq = nullptr;
  void* d[1] = {dst.data()};
  size_t sz[1] = {kBytes};
  int t[1] = {4};
  void* m[1] = {rmr};
  ASSERT_EQ(n.irecv(p.recv, 1, d, sz, t, m, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(n.isend(p.send, src.data(), kBytes, 4, smr, nullptr, &sreq), ncclSuccess);
  ncclResult_t failed = ncclSuccess;
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (failed == ncclSuccess && std::chrono::steady_clock::now() < end) {
    int done = 0;
    failed = n.test(rreq, &done, nullptr);
    if (failed == ncclSuccess && sreq != nullptr && n.test(sreq, &done, nullptr) == ncclSuccess && done)
      sreq = nullptr;
  }
  EXPECT_EQ(failed, ncclSystemError);
  kill(daemon, SIGCONT);
  kill(daemon, SIGKILL);
  waitpid(daemon, nullptr, 0);
  // The listener's segment in /dev/shm goes with it (left, one a run piled up on the test machine;
  // the send and receive comms hold the failed transfer and stay as a failed job leaves them).
  EXPECT_EQ(n.closeListen(p.listen), ncclSuccess);
}

// Daemon mode: a daemon of our own (socket in a fresh directory, unique job), reaped and shut
// down at the end. The child rank re-executes this binary with --child-send.
int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--child-send") return child_send(3, 4);
  std::optional<OwnDaemon> daemon;
  if (mode() == Mode::daemon && std::getenv("VGPU_DAEMON_DIR") == nullptr && !daemon.emplace("nccl-modes-").ok())
    return 2;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
