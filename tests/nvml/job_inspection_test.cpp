// vgpu-smi and the virtual NVML against a running sim-backend job: a program (hold_memory) holds
// memory on devices 1 and 3 under a unique VGPU_JOB_ID, and every view must report exactly what
// the driver told that program (cuMemGetInfo, cuDeviceGetUuid, cuDeviceGetPCIBusId).
// Paths come from the environment: VGPU_SMI, VGPU_HOLD_MEMORY.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nvml/nvml_abi.h"

namespace {

struct DriverDevice {
  std::string uuid, pci;
  unsigned long long total = 0, used = 0;
};

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

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(", ", start);
    out.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 2;
  }
  return out;
}

// (domain, bus, device) of a bus id in either the driver's or NVML's spelling.
std::tuple<unsigned, unsigned, unsigned> pci_tuple(const std::string& s) {
  unsigned d = 0, b = 0, dev = 0, f = 0;
  EXPECT_EQ(std::sscanf(s.c_str(), "%x:%x:%x.%x", &d, &b, &dev, &f), 4) << s;
  return {d, b, dev};
}

struct RunResult {
  int status = -1;
  std::string out, err;
};

// Runs a command with extra environment, optionally as another user (root only).
RunResult run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
              uid_t as_uid = static_cast<uid_t>(-1)) {
  int out_pipe[2], err_pipe[2];
  EXPECT_EQ(pipe(out_pipe), 0);
  EXPECT_EQ(pipe(err_pipe), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    if (as_uid != static_cast<uid_t>(-1) && (setgid(as_uid) != 0 || setuid(as_uid) != 0)) _exit(126);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunResult r;
  auto drain = [](int fd, std::string* to) {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) to->append(buf, static_cast<size_t>(n));
    close(fd);
  };
  std::thread t([&] { drain(err_pipe[0], &r.err); });
  drain(out_pipe[0], &r.out);
  t.join();
  int status = 0;
  waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The memory-holding program, running until stop() or kill().
class Holder {
 public:
  explicit Holder(const std::string& job) : job_(job) {
    int in_pipe[2], out_pipe[2];
    EXPECT_EQ(pipe(in_pipe), 0);
    EXPECT_EQ(pipe(out_pipe), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in_pipe[0], 0);
      dup2(out_pipe[1], 1);
      close(in_pipe[1]);
      close(out_pipe[0]);
      setenv("VGPU_JOB_ID", job.c_str(), 1);
      const std::string path = env_path("VGPU_HOLD_MEMORY");
      execl(path.c_str(), path.c_str(), nullptr);
      _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    stdin_ = in_pipe[1];
    FILE* out = fdopen(out_pipe[0], "r");
    char line[512];
    while (std::fgets(line, sizeof line, out)) {
      std::string l(line);
      if (l.rfind("READY", 0) == 0) {
        ready_ = true;
        break;
      }
      int ordinal = -1;
      char uuid[128], pci[128];
      unsigned long long total = 0, used = 0;
      if (std::sscanf(line, "DEVICE %d UUID %127s PCI %127s TOTAL %llu USED %llu", &ordinal, uuid, pci, &total,
                      &used) == 5)
        devices_.push_back({uuid, pci, total, used});
      int pid = 0, kernel_device = 0, kernels = 0;
      if (std::sscanf(line, "PID %d", &pid) == 1) reported_pid_ = pid;
      if (std::sscanf(line, "KERNELS %d %d", &kernel_device, &kernels) == 2) kernels_ = kernels;
    }
    out_ = out;
  }
  ~Holder() {
    stop();
    if (out_) std::fclose(out_);
  }
  void stop() {
    if (stdin_ >= 0) close(stdin_), stdin_ = -1;
    reap();
  }
  void kill_hard() {
    ::kill(pid_, SIGKILL);
    reap();
  }
  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }
  int reported_pid() const { return reported_pid_; }
  int kernels() const { return kernels_; }  // launched on device 1
  const std::vector<DriverDevice>& devices() const { return devices_; }
  const std::string& job() const { return job_; }

 private:
  void reap() {
    if (pid_ > 0 && !reaped_) {
      int status;
      waitpid(pid_, &status, 0);
      reaped_ = true;
    }
  }
  std::string job_;
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* out_ = nullptr;
  bool ready_ = false, reaped_ = false;
  int reported_pid_ = 0;
  int kernels_ = 0;
  std::vector<DriverDevice> devices_;
};

std::string unique_job(const char* what) {
  static std::atomic<int> n{0};
  return "nvmltest-" + std::string(what) + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

RunResult smi(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {env_path("VGPU_SMI")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {});
}

// NVML's framebuffer of an H100 80GB HBM3 (nvidia-smi on the real part), and what it reports as
// reserved.
constexpr unsigned long long kNvmlTotalMiB = 81559, kNvmlReservedMiB = 480;

constexpr const char* kQuery =
    "--query-gpu=index,name,uuid,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu";

class JobInspection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    holder_ = new Holder(unique_job("held"));
    // The NVML client in this process looks at the holder's job.
    setenv("VGPU_JOB_ID", holder_->job().c_str(), 1);
  }
  static void TearDownTestSuite() {
    delete holder_;
    holder_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(holder_->ready()) << "hold_memory did not start";
    ASSERT_GE(holder_->devices().size(), 4u);
  }
  static Holder* holder_;
};
Holder* JobInspection::holder_ = nullptr;

TEST_F(JobInspection, DriverChargedTheAllocationsAndTheContext) {
  // The program allocated 1 GiB + 3 MiB on device 1 and 256 MiB on device 3; the driver adds its
  // context charge on top. Nothing else is held.
  EXPECT_GT(holder_->devices()[1].used, (1ull << 30) + (3ull << 20));
  EXPECT_GT(holder_->devices()[3].used, 256ull << 20);
  EXPECT_EQ(holder_->devices()[0].used, 0u);
  EXPECT_EQ(holder_->reported_pid(), holder_->pid());
}

TEST_F(JobInspection, QueryGpuCsvReportsTheDriversNumbers) {
  RunResult r = smi({"--job", holder_->job(), kQuery, "--format=csv,noheader,nounits"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = lines_of(r.out);
  ASSERT_EQ(rows.size(), holder_->devices().size()) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const DriverDevice& d = holder_->devices()[i];
    const auto cells = split_csv(rows[i]);
    ASSERT_EQ(cells.size(), 8u) << rows[i];
    EXPECT_EQ(cells[0], std::to_string(i));
    EXPECT_EQ(cells[1], "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(cells[2], d.uuid);
    EXPECT_EQ(pci_tuple(cells[3]), pci_tuple(d.pci));
    // NVML's total, as nvidia-smi reads on a real H100 80GB HBM3 (CUDA's total is 81079 MiB);
    // free is what neither the driver's reservation nor the job's processes hold.
    EXPECT_EQ(cells[4], std::to_string(kNvmlTotalMiB));
    EXPECT_EQ(cells[5], std::to_string(d.used >> 20)) << "device " << i;
    EXPECT_EQ(cells[6], std::to_string(kNvmlTotalMiB - kNvmlReservedMiB - (d.used >> 20))) << "device " << i;
  }
}

TEST_F(JobInspection, QueryGpuCsvHeaderAndUnitsAsNvidiaSmi) {
  RunResult r = smi({"--job", holder_->job(), kQuery, "--format=csv", "-i", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = lines_of(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0],
            "index, name, uuid, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
            "utilization.gpu [%]");
  const DriverDevice& d = holder_->devices()[1];
  const auto cells = split_csv(rows[1]);
  ASSERT_EQ(cells.size(), 8u);
  EXPECT_EQ(cells[4], std::to_string(kNvmlTotalMiB) + " MiB");
  EXPECT_EQ(cells[5], std::to_string(d.used >> 20) + " MiB");
  EXPECT_EQ(cells[7], "100 %");  // device 1 ran back-to-back kernels for over a second
}

TEST_F(JobInspection, ActivityOfTheBusyDeviceIsLive) {
  // hold_memory ran 300 kernels of ~5 ms (fallback model) back to back on device 1, and still
  // runs: the sim backend must have reported them while the job is alive.
  RunResult r = smi({"--job", holder_->job(), "--query-gpu=index,utilization.gpu,vgpu.kernels,vgpu.busy,vgpu.clock",
                     "--format=csv,noheader,nounits"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = lines_of(r.out);
  ASSERT_EQ(rows.size(), holder_->devices().size()) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto cells = split_csv(rows[i]);
    ASSERT_EQ(cells.size(), 5u) << rows[i];
    if (i == 1) {
      EXPECT_EQ(cells[1], "100") << rows[i];
      EXPECT_EQ(cells[2], std::to_string(holder_->kernels())) << rows[i];
      EXPECT_GT(std::stod(cells[3]), 1.0) << rows[i];                   // 300 x ~5 ms
      EXPECT_GE(std::stod(cells[4]), std::stod(cells[3])) << rows[i];  // clock >= busy
    } else {
      EXPECT_EQ(cells[1], "0") << rows[i];
      EXPECT_EQ(cells[2], "0") << rows[i];
    }
  }
}

TEST_F(JobInspection, ComputeAppsAndFullReportShowTheJob) {
  RunResult r = smi({"--job", holder_->job(), "--query-compute-apps=pid,used_memory,gpu_uuid,gpu_bus_id",
                     "--format=csv,noheader,nounits"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = lines_of(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;  // devices 1 and 3
  for (size_t k = 0; k < 2; ++k) {
    const DriverDevice& d = holder_->devices()[k == 0 ? 1 : 3];
    const auto cells = split_csv(rows[k]);
    ASSERT_EQ(cells.size(), 4u) << rows[k];
    EXPECT_EQ(cells[0], std::to_string(holder_->pid()));
    EXPECT_EQ(cells[1], std::to_string(d.used >> 20));
    EXPECT_EQ(cells[2], d.uuid);
  }
  r = smi({"--job", holder_->job(), "--query-compute-apps=pid,used_memory", "--format=csv"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lines_of(r.out)[0], "pid, used_gpu_memory [MiB]");

  r = smi({"--job", holder_->job(), "-q", "-i", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto has = [&](const std::string& label, const std::string& value) {
    for (const std::string& l : lines_of(r.out))
      if (l.find(label) != std::string::npos && l.size() > 55 && l.substr(55) == ": " + value) return true;
    return false;
  };
  EXPECT_TRUE(has("        GPU  ", "100 %")) << r.out;
  EXPECT_TRUE(has("        SM  ", "1980 MHz")) << r.out;  // Clocks: boost while busy
  EXPECT_TRUE(has("Process ID", std::to_string(holder_->pid()))) << r.out;
  EXPECT_TRUE(has("Used GPU Memory", std::to_string(holder_->devices()[1].used >> 20) + " MiB")) << r.out;
  r = smi({"--job", holder_->job(), "-q", "-i", "0"});
  EXPECT_NE(r.out.find("    Processes                                          : None"), std::string::npos) << r.out;
}

TEST_F(JobInspection, ListGpus) {
  RunResult r = smi({"--job", holder_->job(), "-L"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = lines_of(r.out);
  ASSERT_EQ(rows.size(), holder_->devices().size());
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(rows[i], "GPU " + std::to_string(i) + ": NVIDIA H100 80GB HBM3 (UUID: " + holder_->devices()[i].uuid + ")");
}

TEST_F(JobInspection, DefaultTableShowsDevicesMemoryAndTheProcess) {
  RunResult r = smi({"--job", holder_->job()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Driver Version: 580.159.04"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA Version: 13.0"), std::string::npos) << r.out;
  for (int dev : {1, 3}) {
    const DriverDevice& d = holder_->devices()[dev];
    const std::string usage = std::to_string(d.used >> 20) + "MiB /  " + std::to_string(kNvmlTotalMiB) + "MiB";
    EXPECT_NE(r.out.find(usage), std::string::npos) << usage << "\n" << r.out;
    // The process row: GPU, pid, its memory on that GPU.
    bool found = false;
    for (const std::string& l : lines_of(r.out)) {
      if (l.size() < 2) continue;
      std::istringstream row(l.substr(1));
      int gpu = -1;
      std::string gi, ci, type, name, mem;
      long pid = 0;
      if (row >> gpu >> gi >> ci >> pid >> type >> name >> mem && gpu == dev && pid == holder_->pid())
        found = mem == std::to_string(d.used >> 20) + "MiB";
    }
    EXPECT_TRUE(found) << "no process row for GPU " << dev << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("vgpu job: " + holder_->job()), std::string::npos);
  EXPECT_NE(r.out.find("none (sim backend)"), std::string::npos);
  EXPECT_NE(r.out.find("launch policy: n/a (sim)"), std::string::npos);
}

TEST_F(JobInspection, BadArgumentsExitWithTwo) {
  EXPECT_EQ(smi({"--bogus"}).status, 2);
  EXPECT_EQ(smi({"-i", "x"}).status, 2);
  EXPECT_EQ(smi({"--query-gpu=index"}).status, 2);  // --format missing
  EXPECT_EQ(smi({"--query-gpu=nonsense", "--format=csv"}).status, 2);
  EXPECT_EQ(smi({"--job", holder_->job(), "-i", "99"}).status, 6);
  EXPECT_EQ(smi({"--job", "no-such-job-" + std::to_string(getpid())}).status, 6);
}

// ---- the NVML C API, linked into this process, looking at the holder's job ----

class Nvml : public JobInspection {
 protected:
  void SetUp() override {
    JobInspection::SetUp();
    ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  }
  void TearDown() override { EXPECT_EQ(nvmlShutdown(), NVML_SUCCESS); }
};

TEST_F(Nvml, DevicesMatchTheDriver) {
  unsigned count = 0;
  ASSERT_EQ(nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  ASSERT_EQ(count, holder_->devices().size());
  for (unsigned i = 0; i < count; ++i) {
    const DriverDevice& d = holder_->devices()[i];
    nvmlDevice_t dev;
    ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(i, &dev), NVML_SUCCESS);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    ASSERT_EQ(nvmlDeviceGetUUID(dev, uuid, sizeof uuid), NVML_SUCCESS);
    EXPECT_EQ(uuid, d.uuid);
    ASSERT_EQ(nvmlDeviceGetName(dev, name, sizeof name), NVML_SUCCESS);
    EXPECT_STREQ(name, "NVIDIA H100 80GB HBM3");
    nvmlPciInfo_t pci;
    ASSERT_EQ(nvmlDeviceGetPciInfo_v3(dev, &pci), NVML_SUCCESS);
    EXPECT_EQ(pci_tuple(pci.busId), pci_tuple(d.pci));
    EXPECT_EQ(pci_tuple(pci.busIdLegacy), pci_tuple(d.pci));
    EXPECT_EQ(pci.pciDeviceId, 0x233010DEu);
    nvmlPciInfo_v1_t pci1;
    ASSERT_EQ(nvmlDeviceGetPciInfo(dev, &pci1), NVML_SUCCESS);
    EXPECT_EQ(pci_tuple(pci1.busId), pci_tuple(d.pci));
    nvmlDevice_t again;
    ASSERT_EQ(nvmlDeviceGetHandleByUUID(d.uuid.c_str(), &again), NVML_SUCCESS);
    EXPECT_EQ(again, dev);
    ASSERT_EQ(nvmlDeviceGetHandleByPciBusId_v2(d.pci.c_str(), &again), NVML_SUCCESS);
    EXPECT_EQ(again, dev);
    unsigned index = 99;
    ASSERT_EQ(nvmlDeviceGetIndex(dev, &index), NVML_SUCCESS);
    EXPECT_EQ(index, i);
  }
}

TEST_F(Nvml, MemoryAndProcessesAreTheDriversNumbers) {
  for (unsigned i = 0; i < holder_->devices().size(); ++i) {
    const DriverDevice& d = holder_->devices()[i];
    nvmlDevice_t dev;
    ASSERT_EQ(nvmlDeviceGetHandleByIndex(i, &dev), NVML_SUCCESS);
    // NVML's memory, not CUDA's: the board's total, the driver's reservation, the processes'.
    constexpr unsigned long long kTotal = kNvmlTotalMiB << 20, kReserved = kNvmlReservedMiB << 20;
    nvmlMemory_t m;
    ASSERT_EQ(nvmlDeviceGetMemoryInfo(dev, &m), NVML_SUCCESS);
    EXPECT_EQ(m.total, kTotal);
    EXPECT_EQ(m.used, d.used + kReserved) << "device " << i;  // v1: reserved counts as used
    EXPECT_EQ(m.free, kTotal - kReserved - d.used);
    nvmlMemory_v2_t m2{};
    m2.version = nvmlMemory_v2;
    ASSERT_EQ(nvmlDeviceGetMemoryInfo_v2(dev, &m2), NVML_SUCCESS);
    EXPECT_EQ(m2.total, kTotal);
    EXPECT_EQ(m2.reserved, kReserved);
    EXPECT_EQ(m2.used, d.used);
    EXPECT_EQ(m2.free + m2.used + m2.reserved, kTotal);
    m2.version = 1;
    EXPECT_EQ(nvmlDeviceGetMemoryInfo_v2(dev, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

    nvmlProcessInfo_t procs[8];
    unsigned n = 8;
    ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, procs), NVML_SUCCESS);
    if (d.used == 0) {
      EXPECT_EQ(n, 0u);
      continue;
    }
    ASSERT_EQ(n, 1u) << "device " << i;
    EXPECT_EQ(procs[0].pid, static_cast<unsigned>(holder_->pid()));
    EXPECT_EQ(procs[0].usedGpuMemory, d.used);
    EXPECT_EQ(procs[0].gpuInstanceId, 0xFFFFFFFFu);
    nvmlProcessInfo_v1_t v1[2];
    n = 2;
    ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses(dev, &n, v1), NVML_SUCCESS);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(v1[0].usedGpuMemory, d.used);
    n = 0;
    EXPECT_EQ(nvmlDeviceGetComputeRunningProcesses_v2(dev, &n, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_EQ(n, 1u);
    n = 8;
    ASSERT_EQ(nvmlDeviceGetGraphicsRunningProcesses_v3(dev, &n, procs), NVML_SUCCESS);
    EXPECT_EQ(n, 0u);
  }
}

TEST_F(Nvml, UtilizationFollowsTheSimulatedWork) {
  for (unsigned i : {0u, 1u}) {
    nvmlDevice_t dev;
    ASSERT_EQ(nvmlDeviceGetHandleByIndex(i, &dev), NVML_SUCCESS);
    nvmlUtilization_t u{};
    ASSERT_EQ(nvmlDeviceGetUtilizationRates(dev, &u), NVML_SUCCESS);
    EXPECT_EQ(u.gpu, i == 1 ? 100u : 0u) << "device " << i;
  }
}

TEST_F(Nvml, SensorsFollowTheSimulatedLoad) {
  // Device 1 ran kernels for the whole last second of its virtual time; device 0 never ran any.
  nvmlDevice_t busy, idle;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex(1, &busy), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetHandleByIndex(0, &idle), NVML_SUCCESS);
  unsigned c_busy = 0, c_idle = 0, max_sm = 0, app = 0, mem = 0;
  ASSERT_EQ(nvmlDeviceGetClockInfo(busy, NVML_CLOCK_SM, &c_busy), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetClockInfo(idle, NVML_CLOCK_SM, &c_idle), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetMaxClockInfo(idle, NVML_CLOCK_SM, &max_sm), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetApplicationsClock(idle, NVML_CLOCK_GRAPHICS, &app), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetClockInfo(idle, NVML_CLOCK_MEM, &mem), NVML_SUCCESS);
  EXPECT_EQ(max_sm, 1980u);  // the catalog's clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
  EXPECT_EQ(c_busy, max_sm);
  EXPECT_LT(c_idle, c_busy);
  EXPECT_EQ(app, 1980u);
  EXPECT_EQ(mem, 2619u);

  unsigned p_busy = 0, p_idle = 0, limit = 0, lo = 0, hi = 0, t_busy = 0, t_idle = 0, slowdown = 0;
  ASSERT_EQ(nvmlDeviceGetPowerUsage(busy, &p_busy), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetPowerUsage(idle, &p_idle), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetPowerManagementLimit(idle, &limit), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetPowerManagementLimitConstraints(idle, &lo, &hi), NVML_SUCCESS);
  EXPECT_EQ(limit, 700000u);  // mW: the H100 SXM's 700 W
  EXPECT_EQ(hi, limit);
  EXPECT_LT(lo, hi);
  EXPECT_LT(p_idle, p_busy);
  EXPECT_LE(p_busy, limit);
  ASSERT_EQ(nvmlDeviceGetTemperature(busy, NVML_TEMPERATURE_GPU, &t_busy), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetTemperature(idle, NVML_TEMPERATURE_GPU, &t_idle), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetTemperatureThreshold(idle, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &slowdown), NVML_SUCCESS);
  EXPECT_LT(t_idle, t_busy);
  EXPECT_LT(t_busy, slowdown);
  unsigned long long e_busy = 0, e_idle = 1;
  ASSERT_EQ(nvmlDeviceGetTotalEnergyConsumption(busy, &e_busy), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetTotalEnergyConsumption(idle, &e_idle), NVML_SUCCESS);
  EXPECT_GT(e_busy, 0u);
  EXPECT_EQ(e_idle, 0u);  // its virtual clock never moved

  nvmlPstates_t ps = NVML_PSTATE_UNKNOWN;
  ASSERT_EQ(nvmlDeviceGetPowerState(busy, &ps), NVML_SUCCESS);
  EXPECT_EQ(ps, NVML_PSTATE_0);
  unsigned long long reasons = 0;
  ASSERT_EQ(nvmlDeviceGetCurrentClocksEventReasons(idle, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, 1u);  // GPU idle
  ASSERT_EQ(nvmlDeviceGetCurrentClocksEventReasons(busy, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, 0u);

  nvmlEnableState_t cur = NVML_FEATURE_DISABLED, pend = NVML_FEATURE_DISABLED;
  ASSERT_EQ(nvmlDeviceGetEccMode(busy, &cur, &pend), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_FEATURE_ENABLED);
  unsigned long long errors = 99;
  ASSERT_EQ(nvmlDeviceGetTotalEccErrors(busy, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &errors),
            NVML_SUCCESS);
  EXPECT_EQ(errors, 0u);

  nvmlBAR1Memory_t bar1{};
  ASSERT_EQ(nvmlDeviceGetBAR1MemoryInfo(busy, &bar1), NVML_SUCCESS);
  EXPECT_EQ(bar1.bar1Total, 131072ull << 20);
  EXPECT_EQ(bar1.bar1Free + bar1.bar1Used, bar1.bar1Total);
  char serial[32], other[32], vbios[32];
  ASSERT_EQ(nvmlDeviceGetSerial(busy, serial, sizeof serial), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetSerial(idle, other, sizeof other), NVML_SUCCESS);
  EXPECT_EQ(std::strlen(serial), 13u);
  EXPECT_STRNE(serial, other);
  EXPECT_EQ(nvmlDeviceGetSerial(busy, serial, 4), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(nvmlDeviceGetVbiosVersion(busy, vbios, sizeof vbios), NVML_SUCCESS);
  EXPECT_GT(std::strlen(vbios), 8u);
  unsigned fan = 0;
  EXPECT_EQ(nvmlDeviceGetFanSpeed(busy, &fan), NVML_ERROR_NOT_SUPPORTED);  // SXM: no fan

  nvmlValueType_t type;
  nvmlSample_t sample[4];
  unsigned n = 4;
  ASSERT_EQ(nvmlDeviceGetSamples(busy, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, sample), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(type, NVML_VALUE_TYPE_UNSIGNED_INT);
  EXPECT_EQ(sample[0].sampleValue.uiVal, 100u);
  nvmlProcessUtilizationSample_t pu[4];
  n = 4;
  ASSERT_EQ(nvmlDeviceGetProcessUtilization(busy, pu, &n, 0), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(pu[0].pid, static_cast<unsigned>(holder_->pid()));
  EXPECT_EQ(pu[0].smUtil, 100u);
}

TEST_F(Nvml, TopologyOfOneNvSwitchNode) {
  nvmlDevice_t a, b;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex(0, &a), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetHandleByIndex(5, &b), NVML_SUCCESS);
  nvmlGpuTopologyLevel_t level;
  ASSERT_EQ(nvmlDeviceGetTopologyCommonAncestor(a, b, &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_NODE);
  nvmlGpuP2PStatus_t p2p;
  ASSERT_EQ(nvmlDeviceGetP2PStatus(a, b, NVML_P2P_CAPS_INDEX_NVLINK, &p2p), NVML_SUCCESS);
  EXPECT_EQ(p2p, NVML_P2P_STATUS_OK);
  nvmlFieldValue_t fv[3] = {};
  fv[0].fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT;
  fv[1].fieldId = NVML_FI_DEV_NVLINK_GET_STATE;
  fv[1].scopeId = 17;
  fv[2].fieldId = 12345;
  ASSERT_EQ(nvmlDeviceGetFieldValues(a, 3, fv), NVML_SUCCESS);
  EXPECT_EQ(fv[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(fv[0].value.uiVal, 18u);  // H100: 18 NVLink 4 links
  EXPECT_EQ(fv[1].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(fv[1].value.uiVal, 1u);
  EXPECT_EQ(fv[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  nvmlEnableState_t active;
  ASSERT_EQ(nvmlDeviceGetNvLinkState(a, 0, &active), NVML_SUCCESS);
  EXPECT_EQ(active, NVML_FEATURE_ENABLED);
  EXPECT_EQ(nvmlDeviceGetNvLinkState(a, 18, &active), NVML_ERROR_INVALID_ARGUMENT);
  unsigned cap = 0;
  ASSERT_EQ(nvmlDeviceGetNvLinkCapability(a, 3, NVML_NVLINK_CAP_P2P_SUPPORTED, &cap), NVML_SUCCESS);
  EXPECT_EQ(cap, 1u);
  nvmlPciInfo_t remote;
  ASSERT_EQ(nvmlDeviceGetNvLinkRemotePciInfo_v2(a, 0, &remote), NVML_SUCCESS);
  nvmlPciInfo_t own;
  ASSERT_EQ(nvmlDeviceGetPciInfo_v3(a, &own), NVML_SUCCESS);
  EXPECT_EQ(remote.domain, own.domain);  // the node's switch
  EXPECT_NE(remote.bus, own.bus);
  int major = 0, minor = 0;
  ASSERT_EQ(nvmlDeviceGetCudaComputeCapability(a, &major, &minor), NVML_SUCCESS);
  EXPECT_EQ(major * 10 + minor, 90);
  unsigned long cpus[4] = {};
  ASSERT_EQ(nvmlDeviceGetCpuAffinity(a, 4, cpus), NVML_SUCCESS);
  EXPECT_NE(cpus[0] & 1ul, 0u);
}

TEST_F(Nvml, BadHandlesAndArgumentsAreErrorsNotCrashes) {
  nvmlDevice_t dev;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex(0, &dev), NVML_SUCCESS);
  nvmlMemory_t m;
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(nullptr, &m), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(reinterpret_cast<nvmlDevice_t>(0x1234), &m), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(reinterpret_cast<nvmlDevice_t>(reinterpret_cast<char*>(dev) + 1), &m),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(dev, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlDeviceGetHandleByIndex(1000, &dev), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlDeviceGetHandleByUUID("GPU-nope", &dev), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(nvmlDeviceGetHandleByPciBusId_v2("garbage", &dev), NVML_ERROR_INVALID_ARGUMENT);
  char small[4];
  ASSERT_EQ(nvmlDeviceGetHandleByIndex(0, &dev), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceGetUUID(dev, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_STREQ(nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
}

TEST_F(Nvml, VersionsAndInitCounting) {
  char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  ASSERT_EQ(nvmlSystemGetDriverVersion(version, sizeof version), NVML_SUCCESS);
  EXPECT_STREQ(version, "580.159.04");
  int cuda = 0;
  ASSERT_EQ(nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 13000);
  // Init is reference counted: one more init needs one more shutdown.
  ASSERT_EQ(nvmlInit(), NVML_SUCCESS);
  ASSERT_EQ(nvmlShutdown(), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(nvmlDeviceGetCount(&count), NVML_SUCCESS);
}

TEST_F(Nvml, ManyThreadsQueryAtOnce) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) {
        nvmlDevice_t dev;
        const unsigned i = static_cast<unsigned>((t + k) % 8);
        nvmlMemory_t m;
        if (nvmlDeviceGetHandleByIndex(i, &dev) != NVML_SUCCESS || nvmlDeviceGetMemoryInfo(dev, &m) != NVML_SUCCESS ||
            m.used != holder_->devices()[i].used + (kNvmlReservedMiB << 20))
          ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(NvmlLifecycle, CallsOutsideInitAreUninitialized) {
  // Every init of the other tests was paired with a shutdown.
  unsigned count = 0;
  EXPECT_EQ(nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  nvmlDevice_t dev;
  EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &dev), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

// ---- cleanup and permissions, each with a job of its own ----

TEST(JobCleanup, KilledProcessLeavesNoProcessAndNoMemory) {
  Holder holder(unique_job("killed"));
  ASSERT_TRUE(holder.ready());
  RunResult before = smi({"--job", holder.job(), "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "1"});
  ASSERT_EQ(before.status, 0) << before.err;
  EXPECT_EQ(before.out, std::to_string(holder.devices()[1].used >> 20) + "\n");
  holder.kill_hard();  // reaped: no zombie keeps the pid alive

  RunResult after = smi({"--job", holder.job()});
  // Any other process of this user that starts meanwhile (another test running in parallel)
  // removes a region only the dead hold, whatever its job: then it is gone already.
  if (after.status == 6 && after.err.find("no status region") != std::string::npos) return;
  ASSERT_EQ(after.status, 0) << after.err;
  EXPECT_NE(after.out.find("No running processes found"), std::string::npos) << after.out;
  EXPECT_EQ(after.out.find(std::to_string(holder.pid())), std::string::npos) << after.out;
  const std::string held = std::to_string(holder.devices()[1].used >> 20) + "MiB";
  EXPECT_EQ(after.out.find(held), std::string::npos) << after.out;
  size_t empty_devices = 0;  // every device shows "0MiB / <total>MiB"
  for (size_t at = 0; (at = after.out.find("       0MiB /  ", at)) != std::string::npos; ++at) ++empty_devices;
  EXPECT_EQ(empty_devices, holder.devices().size()) << after.out;
  // The reader found only the dead in the region and removed it: the job is gone now.
  const std::string region = "/dev/shm/vgpu-" + std::to_string(getuid()) + "-" + holder.job();
  EXPECT_NE(access(region.c_str(), F_OK), 0) << region;
  EXPECT_EQ(smi({"--job", holder.job()}).status, 6);
}

TEST(JobPermissions, AnotherUserCannotReadTheRegion) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch to a second user";
  Holder holder(unique_job("private"));
  ASSERT_TRUE(holder.ready());
  const std::string region = "/dev/shm/vgpu-" + std::to_string(getuid()) + "-" + holder.job();
  struct stat st{};
  ASSERT_EQ(stat(region.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  RunResult r = run({env_path("VGPU_SMI"), "--job", holder.job(), "--uid", std::to_string(getuid())}, {}, 65534);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.status, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find(holder.devices()[1].uuid), std::string::npos);
  // The owner still reads it.
  EXPECT_EQ(smi({"--job", holder.job(), "-L"}).status, 0);
}

}  // namespace
