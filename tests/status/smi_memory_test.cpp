// vgpu-smi --vgpu and --query-gpu against a running job, on each backend: per virtual device, the
// memory used (exactly what cuMemGetInfo told the program) and the physical memory behind it.
// A program (hold_memory) holds memory on virtual devices 1 and 3 through cuMemAlloc, a CUDA
// array and cuMemCreate, under a job of its own:
//   - on the sim backend there is no physical memory;
//   - on the passthrough backend (over the sim backend as its real driver, all virtual devices on
//     its device 0), under the private policy every byte charged is a real allocation, so each
//     device's physical memory equals its virtual usage; under shared pages the large
//     allocations share chunks, so it does not; either way what the allocations added to the
//     physical memory of the virtual devices adds up to what they added on the real driver's
//     device.
// Paths come from the environment: VGPU_SMI, STATUS_HOLD_SIM, STATUS_HOLD_PASSTHROUGH,
// STATUS_REAL_LIBCUDA.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint64_t kMiB = 1ull << 20;

std::string env_path(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '|')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

// Runs vgpu-smi with `args`; its stdout, or "" with a test failure when it fails.
std::string smi(const std::vector<std::string>& args) {
  int out_pipe[2];
  EXPECT_EQ(pipe(out_pipe), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    std::vector<std::string> argv = {env_path("VGPU_SMI")};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c;
    for (std::string& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    execv(c[0], c.data());
    _exit(127);
  }
  close(out_pipe[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(out_pipe[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(out_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "vgpu-smi failed:\n" << out;
  return out;
}

// The memory-holding program, until destroyed (its stdin closes).
class Holder {
 public:
  Holder(const std::string& path, const std::map<std::string, std::string>& env) {
    int in_pipe[2], out_pipe[2];
    EXPECT_EQ(pipe(in_pipe), 0);
    EXPECT_EQ(pipe(out_pipe), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in_pipe[0], 0);
      dup2(out_pipe[1], 1);
      close(in_pipe[1]);
      close(out_pipe[0]);
      // meson's LD_LIBRARY_PATH holds both backends' libcuda.so.1, in an order of its own: each
      // program finds its own through its RUNPATH.
      unsetenv("LD_LIBRARY_PATH");
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      execl(path.c_str(), path.c_str(), nullptr);
      _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    stdin_ = in_pipe[1];
    out_ = fdopen(out_pipe[0], "r");
    char line[256];
    while (std::fgets(line, sizeof line, out_)) {
      if (std::string(line).rfind("READY", 0) == 0) {
        ready_ = true;
        break;
      }
      int d = -1;
      unsigned long long context = 0, used = 0;
      if (std::sscanf(line, "DEVICE %d CONTEXT %llu USED %llu", &d, &context, &used) == 3) {
        context_[d] = context;
        used_[d] = used;
      }
      char library[200];
      if (std::sscanf(line, "LIBRARY %199s", library) == 1) library_ = library;
      if (std::sscanf(line, "REAL CONTEXT %llu USED %llu", &context, &used) == 2) {
        real_context_ = context;
        real_used_ = used;
      }
    }
  }
  ~Holder() {
    close(stdin_);
    int status;
    waitpid(pid_, &status, 0);
    std::fclose(out_);
  }
  bool ready() const { return ready_; }
  // Which backend it ran on: the passthrough's library lives in a folder of that name.
  bool on_passthrough() const { return library_.find("/passthrough/") != std::string::npos; }
  // What cuMemGetInfo showed on device d once its context was made, and at the end.
  uint64_t context(int d) const { return context_.count(d) ? context_.at(d) : 0; }
  uint64_t used(int d) const { return used_.count(d) ? used_.at(d) : 0; }
  size_t devices() const { return used_.size(); }
  // The same from the real driver under the passthrough (all virtual devices on its device 0).
  uint64_t real_context() const { return real_context_; }
  uint64_t real_used() const { return real_used_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* out_ = nullptr;
  bool ready_ = false;
  std::string library_;
  std::map<int, uint64_t> context_, used_;
  uint64_t real_context_ = 0, real_used_ = 0;
};

std::string unique_job(const char* what) {
  static std::atomic<int> n{0};
  return "statustest-" + std::string(what) + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

struct VgpuRow {
  std::string used, physical;
};

// The device rows of `vgpu-smi --vgpu`: GPU, clock, busy, kernels, memory used, physical memory.
std::map<int, VgpuRow> vgpu_rows(const std::string& text) {
  std::map<int, VgpuRow> rows;
  for (const std::string& l : lines_of(text)) {
    if (l.size() < 2 || l[0] != '|') continue;
    std::istringstream row(l.substr(1));
    int gpu = -1;
    std::string clock, s1, busy, s2, kernels, used, rest;
    if (!(row >> gpu >> clock >> s1 >> busy >> s2 >> kernels >> used) || s1 != "s" || s2 != "s") continue;
    std::getline(row, rest);
    rows[gpu] = {used, trim(rest)};
  }
  return rows;
}

// `--query-gpu=memory.used,vgpu.memory.physical`: per device, both in MiB.
std::vector<std::pair<uint64_t, uint64_t>> queried(const std::string& job) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const std::string& l : lines_of(smi({"--job", job, "--query-gpu=memory.used,vgpu.memory.physical",
                                            "--format=csv,noheader,nounits"}))) {
    unsigned long long used = 0, physical = 0;
    EXPECT_EQ(std::sscanf(l.c_str(), "%llu, %llu", &used, &physical), 2) << l;
    out.emplace_back(used, physical);
  }
  return out;
}

std::string mib_text(uint64_t bytes) { return std::to_string(bytes / kMiB) + "MiB"; }

TEST(SmiMemory, SimBackendShowsVirtualUsageAndNoPhysicalMemory) {
  const std::string job = unique_job("sim");
  Holder h(env_path("STATUS_HOLD_SIM"), {{"VGPU_JOB_ID", job}});
  ASSERT_TRUE(h.ready());
  ASSERT_FALSE(h.on_passthrough());
  ASSERT_EQ(h.devices(), 8u);
  EXPECT_GT(h.used(1), (1ull << 30) + 3 * kMiB);
  EXPECT_GT(h.used(3), 336 * kMiB);  // 256 MiB + 16 MiB array + 64 MiB VMM, and the context

  const std::string table = smi({"--job", job, "--vgpu"});
  EXPECT_NE(table.find("backend: sim"), std::string::npos) << table;
  const auto rows = vgpu_rows(table);
  ASSERT_EQ(rows.size(), 8u) << table;
  for (const auto& [d, row] : rows) {
    EXPECT_EQ(row.used, mib_text(h.used(d))) << "device " << d << "\n" << table;
    EXPECT_EQ(row.physical, "none (sim backend)") << "device " << d << "\n" << table;
  }
  const auto q = queried(job);
  ASSERT_EQ(q.size(), 8u);
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(q[d].first, h.used(d) / kMiB) << "device " << d;
    EXPECT_EQ(q[d].second, 0u) << "device " << d;
  }
}

class SmiPassthrough : public ::testing::TestWithParam<const char*> {};

TEST_P(SmiPassthrough, ShowsVirtualUsageAndThePhysicalMemoryBehindIt) {
  const bool shared = std::string(GetParam()) == "shared";
  const std::string job = unique_job(GetParam());
  std::map<std::string, std::string> env = {
      {"VGPU_JOB_ID", job}, {"STATUS_REAL_JOB_ID", job + "-real"},
      {"VGPU_REAL_LIBCUDA", env_path("STATUS_REAL_LIBCUDA")}, {"VGPU_PHYSICAL_DEVICES", "0"},
      {"VGPU_MEMORY_POLICY", GetParam()}};
  if (shared) {
    env["VGPU_SHARED_CHUNK"] = std::to_string(64 * kMiB);  // chunks of 2..64 MiB: 126 MiB
    env["VGPU_SHARED_MIN_BYTES"] = "0";
  }
  Holder h(env_path("STATUS_HOLD_PASSTHROUGH"), env);
  ASSERT_TRUE(h.ready());
  ASSERT_TRUE(h.on_passthrough());
  ASSERT_EQ(h.devices(), 8u);
  EXPECT_GT(h.used(1), (1ull << 30) + 3 * kMiB);
  EXPECT_GT(h.used(3), 336 * kMiB);

  const std::string table = smi({"--job", job, "--vgpu"});
  EXPECT_NE(table.find("backend: passthrough"), std::string::npos) << table;
  const auto rows = vgpu_rows(table);
  ASSERT_EQ(rows.size(), 8u) << table;
  const auto q = queried(job);
  ASSERT_EQ(q.size(), 8u);
  // The physical memory behind each device: under the private policy every byte charged is a
  // real allocation; under shared pages device 1's gigabyte lives in the shared chunks, which its
  // allocation made (2..64 MiB: 126 MiB, shown on device 1), and device 3's 256 MiB lives there
  // too while its array and VMM allocation do not.
  std::map<int, uint64_t> physical = {{1, h.used(1)}, {3, h.used(3)}};
  if (shared) {
    physical[1] = h.used(1) - ((1ull << 30) + 4 * kMiB) + 126 * kMiB;
    physical[3] = h.used(3) - 256 * kMiB;
  }
  for (int d = 0; d < 8; ++d) {
    SCOPED_TRACE("device " + std::to_string(d) + "\n" + table);
    const VgpuRow& row = rows.at(d);
    EXPECT_EQ(row.used, mib_text(h.used(d)));
    EXPECT_EQ(q[d].first, h.used(d) / kMiB);
    if (d != 1 && d != 3) {  // never touched: no context, nothing behind it
      EXPECT_EQ(h.used(d), 0u);
      EXPECT_EQ(row.physical, "none yet");
      EXPECT_EQ(q[d].second, 0u);
      continue;
    }
    EXPECT_EQ(row.physical, mib_text(physical[d]));
    EXPECT_EQ(q[d].second, physical[d] / kMiB);
  }
  // The physical memory the allocations added on the virtual devices adds up to what they added
  // on the physical GPU (the real driver's device 0). Contexts are left out: each virtual
  // device's real context shows its reservation, while the sim as real driver charges one
  // reservation per device however many contexts it has.
  EXPECT_GT(h.real_context(), 0u);
  EXPECT_EQ(h.real_used() - h.real_context(), physical[1] - h.context(1) + physical[3] - h.context(3));
}

INSTANTIATE_TEST_SUITE_P(Policies, SmiPassthrough, ::testing::Values("private", "shared"));

}  // namespace
