// The per-job status region: what writers put in, readers see; dead processes are reclaimed;
// other users cannot read it.
#include "status/status_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
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

// The job's companion files (the kernel durations its processes share) live as long as the
// region: the last process to leave removes them, another job's stay.
TEST(StatusRegion, CompanionsGoWithTheRegion) {
  const std::string job = unique_job("companions"), other = unique_job("companions-other");
  auto w = Writer::attach(job, "sim", devices(1));
  ASSERT_NE(w, nullptr);
  const std::string mine = companion_path(region_name(getuid(), job), 0);
  const std::string theirs = companion_path(region_name(getuid(), other), 0);
  EXPECT_EQ(mine, "/dev/shm/" + region_name(getuid(), job) + ".durations-gpu0");
  for (const std::string& p : {mine, companion_path(region_name(getuid(), job), 3), theirs})
    std::ofstream(p) << "table";
  w.reset();
  struct stat st{};
  EXPECT_NE(stat(mine.c_str(), &st), 0);
  EXPECT_NE(stat(companion_path(region_name(getuid(), job), 3).c_str(), &st), 0);
  EXPECT_EQ(stat(theirs.c_str(), &st), 0) << "another job's companion was removed";
  // A companion whose region is gone is swept by the next job that attaches.
  auto next = Writer::attach(unique_job("companions-next"), "sim", devices(1));
  EXPECT_NE(stat(theirs.c_str(), &st), 0);
  unlink(theirs.c_str());
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
  // A process of this user starting meanwhile (a test running in parallel) removes it first.
  if (!read_snapshot(getuid(), job, &s, &error) && error.rfind("no status region", 0) == 0) return;
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

std::string shm(const std::string& name) { return "/dev/shm/" + name; }

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  fchmod(fd, mode);
  close(fd);
}

// The bytes of a valid region of `n` devices with no process in it (made by a writer that died).
std::string valid_region_bytes(int n) {
  const std::string job = unique_job("template");
  std::string bytes;
  pid_t child = fork();
  if (child == 0) {  // kept for a launcher: no other process sweeps it away meanwhile
    setenv("VGPU_STATUS_KEEP", "1", 1);
    auto w = Writer::attach(job, "sim", devices(n));
    if (!w) _exit(1);
    w.reset();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  bytes = file_bytes(shm(region_name(getuid(), job)));
  unlink(shm(region_name(getuid(), job)).c_str());
  return bytes;
}

// Checks that this process's writer works in a region of its own: its memory is read back and
// it is the only process listed.
void expect_private_and_working(const std::string& job, Writer& w) {
  w.add_memory(0, 12345);
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  ASSERT_EQ(s.processes.size(), 1u);
  EXPECT_EQ(s.processes[0].pid, getpid());
  EXPECT_EQ(s.devices[0].used, 12345u);
}

// A region file of ours open to others, or a symlink under the region's name, is never joined
// (anyone could rewrite it): the job takes the next name, and its readers find it there.
TEST(StatusRegion, RegionOpenToOthersOrSymlinkIsNotJoined) {
  const std::string job = unique_job("open");
  const std::string name = region_name(getuid(), job);
  const std::string planted = valid_region_bytes(1);
  ASSERT_FALSE(planted.empty());
  write_file(shm(name), planted, 0666);
  const std::string target = shm(unique_job("target"));
  write_file(target, planted, 0600);
  ASSERT_EQ(symlink(target.c_str(), shm(name + "+1").c_str()), 0);
  {
    auto w = Writer::attach(job, "sim", devices(1));
    ASSERT_NE(w, nullptr);
    expect_private_and_working(job, *w);
    EXPECT_EQ(file_bytes(shm(name)), planted);  // neither file was touched
    EXPECT_EQ(file_bytes(target), planted);
    struct stat st{};
    ASSERT_EQ(lstat(shm(name + "+2").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    std::vector<std::string> jobs = list_jobs(getuid());
    EXPECT_EQ(std::count(jobs.begin(), jobs.end(), job), 1);
  }
  EXPECT_NE(access(shm(name + "+2").c_str(), F_OK), 0);  // the last to leave removed its own
  unlink(shm(name).c_str());
  unlink(shm(name + "+1").c_str());
  unlink(target.c_str());
}

// Another user pre-creates the job's region (mode 0666, a valid header) and the runtime
// directory: the job neither joins nor writes the region, and still reports its status.
TEST(StatusRegion, RegionOfAnotherUserIsNotJoined) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to become another user";
  const std::string job = unique_job("foreign");
  const std::string name = region_name(getuid(), job);
  const std::string planted = valid_region_bytes(1);
  pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const int fd = open(shm(name).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) _exit(3);
    fchmod(fd, 0666);
    _exit(write(fd, planted.data(), planted.size()) == static_cast<ssize_t>(planted.size()) ? 0 : 4);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  {
    auto w = Writer::attach(job, "sim", devices(1));
    ASSERT_NE(w, nullptr);
    expect_private_and_working(job, *w);
    EXPECT_EQ(file_bytes(shm(name)), planted);  // not written
  }
  unlink(shm(name).c_str());
}

// A region of ours whose header is garbage (a crash, another program) is replaced by the next
// writer at once and reported by a reader as what it is.
TEST(StatusRegion, GarbageRegionIsReplaced) {
  const std::string job = unique_job("garbage");
  const std::string name = region_name(getuid(), job);
  std::string valid = valid_region_bytes(2);
  const std::vector<std::string> garbage = {
      std::string(), std::string(100, 'x'), std::string(1 << 16, '\0'),
      valid.substr(0, valid.size() / 2),           // cut short
      valid.substr(0, 12) + std::string("\xff\xff\xff\x00", 4) + valid.substr(16),  // 16M devices
  };
  for (const std::string& g : garbage) {
    write_file(shm(name), g, 0600);
    Snapshot s;
    std::string error;
    EXPECT_FALSE(read_snapshot(getuid(), job, &s, &error));
    EXPECT_NE(error.find("not a valid vgpu status region"), std::string::npos) << error;
    write_file(shm(name), g, 0600);
    auto w = Writer::attach(job, "sim", devices(2));
    ASSERT_NE(w, nullptr) << g.size();
    expect_private_and_working(job, *w);
    EXPECT_NE(file_bytes(shm(name)), g);  // the name now holds a new region
  }
}

// Text read from a region is printable: a job id (or process name) with terminal escapes
// cannot reach vgpu-smi's or NVML's output.
TEST(StatusRegion, TextFromTheRegionIsPrintable) {
  const std::string job = unique_job("esc") + "\x1b]0;owned\x07\x1b[31m\n";
  auto w = Writer::attach(job, "sim", devices(1));
  ASSERT_NE(w, nullptr);
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  ASSERT_FALSE(s.job.empty());
  for (char c : s.job) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
  for (char c : s.processes.at(0).name) EXPECT_TRUE(c >= 0x20 && c < 0x7f);
}

// A killed job's region (in /dev/shm: memory) is removed by the next process of the same user,
// whatever its job; a live job's region and one kept for vgpu-run are not.
TEST(StatusRegion, DeadJobsRegionsAreRemovedByTheNextProcessOfAnyJob) {
  const std::string dead = unique_job("killed"), kept = unique_job("kept"), live = unique_job("live");
  auto live_writer = Writer::attach(live, "sim", devices(1));
  ASSERT_NE(live_writer, nullptr);
  pid_t child = fork();
  if (child == 0) {
    auto w = Writer::attach(dead, "sim", devices(3));
    if (!w) _exit(1);
    w.release();  // killed: its region stays behind
    setenv("VGPU_STATUS_KEEP", "1", 1);
    auto k = Writer::attach(kept, "sim", devices(1));
    if (!k) _exit(1);
    k.reset();  // left for vgpu-run
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto other = Writer::attach(unique_job("next"), "sim", devices(1));
  ASSERT_NE(other, nullptr);
  EXPECT_NE(access(shm(region_name(getuid(), dead)).c_str(), F_OK), 0);
  EXPECT_EQ(access(shm(region_name(getuid(), kept)).c_str(), F_OK), 0);
  EXPECT_EQ(access(shm(region_name(getuid(), live)).c_str(), F_OK), 0);
  unlink(shm(region_name(getuid(), kept)).c_str());
}

}  // namespace
}  // namespace vgpu::status
