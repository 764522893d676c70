// Ranks as separate processes (fork): the handle crosses the process boundary through a pipe,
// the bytes through the plugin's shared memory. And a peer that dies mid-transfer gives an error
// on the survivor, never a hang.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "plugin_fixture.h"

using namespace vtest;

namespace {

constexpr size_t kBytes = (size_t{8} << 20) + 123;

// Child: connect to the handle, send kBytes of pattern 7 with tag 5, exit 0 on success.
[[noreturn]] void child_send(int rfd, bool die_midway, bool stop_midway = false) {
  const auto& n = net();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  if (read(rfd, handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) _exit(10);
  void* sc = nullptr;
  for (int i = 0; i < 1000000 && sc == nullptr; ++i) {
    if (n.connect(plugin().ctx, 0, handle, &sc, nullptr) != ncclSuccess) _exit(11);
  }
  if (sc == nullptr) _exit(12);
  std::vector<unsigned char> src(kBytes);
  fill_pattern(src, 7);
  void* mr = nullptr;
  void* req = nullptr;
  if (n.regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &mr) != ncclSuccess) _exit(13);
  if (n.isend(sc, src.data(), src.size(), 5, mr, nullptr, &req) != ncclSuccess) _exit(14);
  if (die_midway) _exit(0);  // the ring holds part of the message; the rest never comes
  if (stop_midway) raise(SIGSTOP);  // the receiver waits, and says so, until SIGCONT
  if (wait_all({req}) != ncclSuccess) _exit(15);
  n.closeSend(sc);
  _exit(0);
}

}  // namespace

TEST(NcclProcesses, SendBetweenTwoProcesses) {
  const auto& n = net();
  ASSERT_NE(plugin().ctx, nullptr);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[1]);
    child_send(fds[0], false);
  }
  close(fds[0]);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclSuccess);
  ASSERT_EQ(write(fds[1], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  close(fds[1]);
  void* rc = nullptr;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (rc == nullptr && std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(n.accept(lc, &rc, nullptr), ncclSuccess);
  }
  ASSERT_NE(rc, nullptr);
  std::vector<unsigned char> want(kBytes), dst(kBytes);
  fill_pattern(want, 7);
  void* mr = nullptr;
  ASSERT_EQ(n.regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &mr), ncclSuccess);
  void* d[1] = {dst.data()};
  size_t s[1] = {dst.size()};
  int tg[1] = {5};
  void* m[1] = {mr};
  void* req = nullptr;
  ASSERT_EQ(n.irecv(rc, 1, d, s, tg, m, nullptr, &req), ncclSuccess);
  std::vector<std::vector<int>> got;
  EXPECT_EQ(wait_all({req}, &got), ncclSuccess);
  EXPECT_EQ(got[0][0], static_cast<int>(kBytes));
  EXPECT_TRUE(want == dst);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  n.deregMr(rc, mr);
  n.closeRecv(rc);
  n.closeListen(lc);
}

// Segment names carry their creator's pid and a count of its own: a rank whose pid once belonged
// to a process killed before it unlinked its segments (a crashed job on a long-lived machine)
// finds those names taken. The child stands such leftovers on every name its next listen could
// take (its count goes on from the parent's, below 1000 here), then listens.
TEST(NcclProcesses, SegmentsLeftByAnExitedProcessOfTheSamePidAreReplaced) {
  const auto& n = net();
  ASSERT_NE(plugin().ctx, nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<std::string> left;
    for (int k = 0; k < 1000; ++k) {
      const std::string name = "/vgpu-nccl." + std::to_string(getuid()) + ".nccl-plugin-tests.L." +
                               std::to_string(getpid()) + "." + std::to_string(k);
      const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) continue;
      close(fd);
      left.push_back(name);
    }
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* lc = nullptr;
    const bool listened = n.listen(plugin().ctx, 0, handle, &lc) == ncclSuccess && lc != nullptr;
    if (lc != nullptr) n.closeListen(lc);
    for (const std::string& name : left) shm_unlink(name.c_str());
    _exit(left.size() == 1000 && listened ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST(NcclProcesses, DeadSenderIsAnErrorNotAHang) {
  const auto& n = net();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[1]);
    child_send(fds[0], true);
  }
  close(fds[0]);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclSuccess);
  ASSERT_EQ(write(fds[1], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  close(fds[1]);
  void* rc = nullptr;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (rc == nullptr && std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(n.accept(lc, &rc, nullptr), ncclSuccess);
  }
  ASSERT_NE(rc, nullptr);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);  // the sender is gone (and reaped)
  std::vector<unsigned char> dst(kBytes);
  void* mr = nullptr;
  ASSERT_EQ(n.regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &mr), ncclSuccess);
  void* d[1] = {dst.data()};
  size_t s[1] = {dst.size()};
  int tg[1] = {5};
  void* m[1] = {mr};
  void* req = nullptr;
  ASSERT_EQ(n.irecv(rc, 1, d, s, tg, m, nullptr, &req), ncclSuccess);
  EXPECT_EQ(wait_all({req}), ncclSystemError);
  n.deregMr(rc, mr);
  n.closeRecv(rc);
  n.closeListen(lc);
}

// A sender stopped (SIGSTOP) mid-message: the receiver keeps waiting (it may be continued), but
// not silently: once the peer has been stopped for a second, one line says so whatever the log
// level. Continued, the transfer completes.
TEST(NcclProcesses, StoppedSenderIsReportedNotWaitedOnSilently) {
  const auto& n = net();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[1]);
    child_send(fds[0], false, true);
  }
  close(fds[0]);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclSuccess);
  ASSERT_EQ(write(fds[1], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  close(fds[1]);
  void* rc = nullptr;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (rc == nullptr && std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(n.accept(lc, &rc, nullptr), ncclSuccess);
  }
  ASSERT_NE(rc, nullptr);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);  // the sender stopped itself
  ASSERT_TRUE(WIFSTOPPED(status));
  std::vector<unsigned char> dst(kBytes);
  void* mr = nullptr;
  ASSERT_EQ(n.regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &mr), ncclSuccess);
  void* d[1] = {dst.data()};
  size_t sz[1] = {dst.size()};
  int tg[1] = {5};
  void* m[1] = {mr};
  void* req = nullptr;
  ASSERT_EQ(n.irecv(rc, 1, d, sz, tg, m, nullptr, &req), ncclSuccess);
  // Poll with stderr captured until the line comes (or the test's deadline passes).
  char path[] = "/tmp/vgpu-nccl-stopped-XXXXXX";
  const int log_fd = mkstemp(path);
  ASSERT_GE(log_fd, 0);
  unlink(path);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(log_fd, 2);
  std::string said;
  end = std::chrono::steady_clock::now() + kDeadline;
  while (said.find("is stopped") == std::string::npos && std::chrono::steady_clock::now() < end) {
    int done = 0;
    if (n.test(req, &done, nullptr) != ncclSuccess || done) break;
    std::fflush(stderr);
    char buf[4096];
    const ssize_t k = pread(log_fd, buf, sizeof buf, 0);
    said.assign(buf, k > 0 ? static_cast<size_t>(k) : 0);
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(log_fd);
  EXPECT_NE(said.find("peer process " + std::to_string(pid) + " is stopped"), std::string::npos) << said;
  kill(pid, SIGCONT);
  EXPECT_EQ(wait_all({req}), ncclSuccess);
  std::vector<unsigned char> want(kBytes);
  fill_pattern(want, 7);
  EXPECT_TRUE(want == dst);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  n.deregMr(rc, mr);
  n.closeRecv(rc);
  n.closeListen(lc);
}

TEST(NcclProcesses, DeadReceiverIsAnErrorNotAHang) {
  const auto& n = net();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: listen, hand over the handle, accept, then die without receiving.
    close(fds[0]);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* lc = nullptr;
    if (n.listen(plugin().ctx, 0, handle, &lc) != ncclSuccess) _exit(20);
    if (write(fds[1], handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) _exit(21);
    void* rc = nullptr;
    for (int i = 0; i < 100000000 && rc == nullptr; ++i) {
      if (n.accept(lc, &rc, nullptr) != ncclSuccess) _exit(22);
    }
    _exit(rc != nullptr ? 0 : 23);
  }
  close(fds[1]);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  ASSERT_EQ(read(fds[0], handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  close(fds[0]);
  void* sc = nullptr;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (sc == nullptr && std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(n.connect(plugin().ctx, 0, handle, &sc, nullptr), ncclSuccess);
  }
  ASSERT_NE(sc, nullptr);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::vector<unsigned char> src(kBytes);
  void* mr = nullptr;
  ASSERT_EQ(n.regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &mr), ncclSuccess);
  void* req = nullptr;
  ASSERT_EQ(n.isend(sc, src.data(), src.size(), 0, mr, nullptr, &req), ncclSuccess);
  EXPECT_EQ(wait_all({req}), ncclSystemError);
  n.deregMr(sc, mr);
  n.closeSend(sc);
}
