// The per-job status region: what writers put in, readers see; dead processes are reclaimed;
// other users cannot read it.
#include "status/status_region.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace vgpu::status {
namespace {

std::vector<DeviceInfo> devices(int n) {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i)
    out.push_back({"NVIDIA H100 80GB HBM3", "GPU-test-" + std::to_string(i),
                   "00000000:18:00.0", 85017493504ull});
  return out;
}

std::string unique_job(const char* what) {
  return std::string("test-") + what + "-" + std::to_string(getpid());
}

TEST(StatusRegion, WriterUpdatesAreReadBack) {
  const std::string job = unique_job("rw");
  auto w = Writer::attach(job, "sim", devices(4));
  ASSERT_NE(w, nullptr);
  w->add_memory(1, 3 << 20);
  w->add_memory(1, -(1 << 20));
  w->add_work(2, 0.5, true);
  w->add_work(2, 0.25, false);
  w->advance_clock(2, 1.0);
  w->advance_clock(2, 0.5);  // the clock never goes back
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  ASSERT_EQ(s.devices.size(), 4u);
  EXPECT_EQ(s.backend, "sim");
  EXPECT_EQ(s.devices[1].used, 2u << 20);
  EXPECT_EQ(s.devices[0].used, 0u);
  EXPECT_EQ(s.devices[2].kernels, 1u);
  EXPECT_DOUBLE_EQ(s.devices[2].busy_s, 0.75);
  EXPECT_DOUBLE_EQ(s.devices[2].clock_s, 1.0);
  EXPECT_DOUBLE_EQ(s.devices[2].utilization(), 0.75);
  EXPECT_EQ(s.devices[3].info.uuid, "GPU-test-3");
  ASSERT_EQ(s.processes.size(), 1u);
  EXPECT_EQ(s.processes[0].pid, getpid());
  EXPECT_EQ(s.processes[0].memory[1], 2u << 20);

  struct stat st{};
  ASSERT_EQ(stat(("/dev/shm/" + region_name(getuid(), job)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  w.reset();  // the last process leaves: the region goes
  EXPECT_FALSE(read_snapshot(getuid(), job, &s, &error));
}

TEST(StatusRegion, ProcessesOfOneJobShareItAndDeadOnesAreReclaimed) {
  const std::string job = unique_job("dead");
  auto w = Writer::attach(job, "sim", devices(2));
  ASSERT_NE(w, nullptr);
  w->add_memory(0, 100);
  pid_t child = fork();
  if (child == 0) {
    auto cw = Writer::attach(job, "sim", devices(2));
    if (!cw) _exit(1);
    cw->add_memory(0, 1000);
    cw->add_memory(1, 7);
    cw.release();  // killed without detaching: the slot stays behind
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  ASSERT_EQ(s.processes.size(), 1u);  // the dead child is not listed, nor counted
  EXPECT_EQ(s.devices[0].used, 100u);
  EXPECT_EQ(s.devices[1].used, 0u);
}

TEST(StatusRegion, StaleRegionOfDeadJobIsRemovedByReader) {
  const std::string job = unique_job("stale");
  pid_t child = fork();
  if (child == 0) {
    auto cw = Writer::attach(job, "sim", devices(1));
    if (!cw) _exit(1);
    cw.release();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  EXPECT_TRUE(s.processes.empty());
  EXPECT_FALSE(read_snapshot(getuid(), job, &s, &error));  // cleaned up
}

// Under vgpu-run (VGPU_STATUS_KEEP=1) the last process leaves the region for the launcher: a
// job shorter than the launcher's poll still reports. The next process of the same job attaches
// to it and adds to the same figures; neither a leaving writer nor a reader removes it.
TEST(StatusRegion, KeptForTheLauncherAfterTheLastProcessLeft) {
  const std::string job = unique_job("keep");
  setenv("VGPU_STATUS_KEEP", "1", 1);
  auto w = Writer::attach(job, "sim", devices(2));
  ASSERT_NE(w, nullptr);
  w->add_work(1, 0.5, true);
  w.reset();
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  EXPECT_TRUE(s.processes.empty());
  EXPECT_EQ(s.devices[1].kernels, 1u);
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;  // the reader left it too
  auto again = Writer::attach(job, "sim", devices(2));
  ASSERT_NE(again, nullptr);
  again->add_work(1, 0.25, true);
  again.reset();
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  EXPECT_EQ(s.devices[1].kernels, 2u);
  EXPECT_DOUBLE_EQ(s.devices[1].busy_s, 0.75);
  unsetenv("VGPU_STATUS_KEEP");
  EXPECT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;  // now the reader removes it
  EXPECT_FALSE(read_snapshot(getuid(), job, &s, &error));
}

TEST(StatusRegion, JobsAreSeparate) {
  auto a = Writer::attach(unique_job("a"), "sim", devices(1));
  auto b = Writer::attach(unique_job("b"), "sim", devices(3));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a->add_memory(0, 5);
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), unique_job("b"), &s, &error));
  EXPECT_EQ(s.devices.size(), 3u);
  EXPECT_EQ(s.devices[0].used, 0u);
  auto jobs = list_jobs(getuid());
  EXPECT_NE(std::find(jobs.begin(), jobs.end(), unique_job("a")), jobs.end());
}

TEST(StatusRegion, MismatchedDeviceCountIsRefused) {
  const std::string job = unique_job("mismatch");
  auto a = Writer::attach(job, "sim", devices(2));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(Writer::attach(job, "sim", devices(3)), nullptr);
}

// A region left by processes that all exited, describing another device list (a run with another
// configuration under the same job id), is replaced rather than refused.
TEST(StatusRegion, StaleRegionWithOtherDevicesIsReplaced) {
  const std::string job = unique_job("replaced");
  pid_t child = fork();
  if (child == 0) {
    auto cw = Writer::attach(job, "sim", devices(3));
    if (!cw) _exit(1);
    cw.release();  // dies without detaching
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto w = Writer::attach(job, "passthrough", devices(2));
  ASSERT_NE(w, nullptr);
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  EXPECT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.backend, "passthrough");
}

TEST(StatusRegion, AnotherUserCannotReadIt) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to become another user";
  const std::string job = unique_job("perm");
  auto w = Writer::attach(job, "sim", devices(1));
  ASSERT_NE(w, nullptr);
  pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    Snapshot s;
    std::string error;
    // Even asking for root's region by name fails: the file is 0600.
    _exit(read_snapshot(0, job, &s, &error) ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace vgpu::status
