// The status scan while the processes it reads about come and go: readers (vgpu-smi, NVML,
// cuInit's attach) look at /proc/<pid>/stat of every slot's process, and that process may exit
// between the open and the read. A churner forks short-lived writers (some leave cleanly, some
// die holding their slot) while this process scans the region as fast as it can and other
// processes attach. Nothing may throw or abort, on either side. The run is bounded (a few
// seconds); it asserts behaviour, not time.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/proc_info.h"
#include "status/status_region.h"

namespace vgpu::status {
namespace {

std::vector<DeviceInfo> devices(int n) {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i)
    out.push_back({"NVIDIA H100 80GB HBM3", "GPU-churn-" + std::to_string(i), "00000000:18:00.0",
                   85017493504ull});
  return out;
}

// How a child ended: 0 when it exited 0, else a code that says what went wrong.
int outcome(int status) {
  if (WIFSIGNALED(status)) return 100 + WTERMSIG(status);  // SIGABRT: an exception escaped
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

// Forks writers until `deadline`: each attaches, charges memory, then either detaches or dies
// holding its slot (killed by its parent, or _exit without detaching). 0 if every writer ended
// as planned, else the first unexpected outcome.
int churn(const std::string& job, std::chrono::steady_clock::time_point deadline) {
  int first_bad = 0;
  std::vector<pid_t> live;
  for (unsigned round = 0; std::chrono::steady_clock::now() < deadline; ++round) {
    const pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      auto w = Writer::attach(job, "sim", devices(2));
      if (w) w->add_memory(static_cast<int>(round % 2), 4096);
      if (round % 3 == 0) {
        w.release();  // dies holding its slot
        _exit(0);
      }
      if (round % 3 == 1) pause();  // killed below while others scan its slot
      w.reset();
      _exit(0);
    }
    live.push_back(pid);
    if (live.size() >= 8) {  // keep a few alive at a time; reap the oldest
      const pid_t old = live.front();
      live.erase(live.begin());
      kill(old, SIGKILL);
      int status = 0;
      waitpid(old, &status, 0);
      const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      if (!killed && outcome(status) != 0 && first_bad == 0) first_bad = outcome(status);
    }
  }
  for (pid_t p : live) {
    kill(p, SIGKILL);
    int status = 0;
    waitpid(p, &status, 0);
    const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    if (!killed && outcome(status) != 0 && first_bad == 0) first_bad = outcome(status);
  }
  return first_bad;
}

TEST(StatusChurn, ScanNeverThrowsWhileProcessesComeAndGo) {
  const std::string job = "test-churn-" + std::to_string(getpid());
  auto holder = Writer::attach(job, "sim", devices(2));  // keeps the region for the whole run
  ASSERT_NE(holder, nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);

  std::vector<pid_t> churners;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(churn(job, deadline));
    churners.push_back(pid);
  }
  // Scanning readers in other processes too: each exits 0 only if no scan failed to read.
  std::vector<pid_t> readers;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int failures = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        Snapshot s;
        std::string error;
        if (!read_snapshot(getuid(), job, &s, &error)) ++failures;
      }
      _exit(failures == 0 ? 0 : 3);
    }
    readers.push_back(pid);
  }
  size_t scans = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    Snapshot s;
    std::string error;
    ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
    ASSERT_EQ(s.devices.size(), 2u);
    // Every listed process is one that the scan saw alive; the holder is always among them.
    bool holder_listed = false;
    for (const ProcessSnapshot& p : s.processes) holder_listed |= p.pid == getpid();
    EXPECT_TRUE(holder_listed);
    ++scans;
  }
  for (pid_t p : churners) {
    int status = 0;
    waitpid(p, &status, 0);
    EXPECT_EQ(outcome(status), 0) << "a writer process ended badly (100 + signal: it aborted)";
  }
  for (pid_t p : readers) {
    int status = 0;
    waitpid(p, &status, 0);
    EXPECT_EQ(outcome(status), 0) << "a reader process ended badly (100 + signal: it aborted)";
  }
  EXPECT_GT(scans, 0u);
}

// /proc/<pid>/stat read while the process exits can come back empty or cut short; the parser
// answers "unknown" (0) for every prefix of a real line instead of failing.
TEST(StatusChurn, StatParserTakesEveryPrefixOfALine) {
  const std::string line =
      "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 987654 12 34 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
  EXPECT_EQ(start_time_from_stat(line.data(), line.size()), 987654u);
  const size_t full = line.find("987654") + 6;
  for (size_t n = 0; n < line.size(); ++n) {
    const uint64_t t = start_time_from_stat(line.data(), n);
    EXPECT_TRUE(t == 0 || (n >= full && t == 987654u) || (n < full && t < 987654u)) << n;
  }
  EXPECT_EQ(start_time_from_stat("12 (x)", 6), 0u);
  EXPECT_EQ(start_time_from_stat("no paren at all", 15), 0u);
  EXPECT_EQ(process_start_time(getpid()) != 0, true);
  char name[8];
  process_name(getpid(), name, sizeof name);
  EXPECT_NE(name[0], '\0');
  EXPECT_EQ(read_proc_file(-1, "stat", name, sizeof name), -1);
}

}  // namespace
}  // namespace vgpu::status
