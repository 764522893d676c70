// The NCCL net plugin's data path, driven through its ABI as NCCL 2.28's proxy drives it (see
// net_driver.h), against the upper bound of host staging measured in the same run: a plain
// memcpy of the same size into a shared-memory buffer and out of it again, by one thread ("vs
// memcpy": what one rank's proxy thread copies per byte it sends and receives) and by two
// threads at once ("vs 2x": both ranks copying at the same time, sharing memory bandwidth).
//
// Each row: 2 ranks (threads of one process, or two processes) each send one message to the
// other per iteration; GB/s is message bytes per second in each direction. Ranks as threads
// copy once (the receiver reads the sender's buffer); processes go through the shared-memory
// ring (two copies). NCCL's staging buffers are reused chunk after chunk, so the plugin's
// copies can stay in cache where the baseline's message-sized buffers do not: above 100% at
// large sizes is that, not an error. Engines:
//   off     VGPU_SIMCORE=off: the bytes move, no virtual time
//   inproc  VGPU_SIMCORE unset: a simcore engine inside each process times every transfer
//   daemon  VGPU_SIMCORE=daemon: the job's vgpud times them (one socket round trip per call)
// With a "/k" suffix (inproc/k, daemon/k) the ranks install a clock hook as the passthrough
// backend does: every transfer of an exchange (one NCCL kernel) has the kernel's start as its
// earliest start; without it the plugin's own clock applies (the latest completion per GPU).
//
//   nccl_plugin_bench [--quick] [--modes threads,processes] [--engines off,inproc,daemon,...]
//                     [--abi 11,12] [--sizes 65536,1048576,...] [--target SECONDS]
//                     [--channels N]
//                     [--plugin PATH] [--vgpud PATH]
// VGPU_NCCL_RING_BYTES and the VGPU_* cluster variables pass through to the plugin.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net_driver.h"
#include "simcore/remote_engine.h"

#ifndef VGPU_NCCL_PLUGIN_PATH
#define VGPU_NCCL_PLUGIN_PATH "libnccl-net-vgpu.so"
#endif
#ifndef VGPU_VGPUD_PATH
#define VGPU_VGPUD_PATH ""
#endif

namespace {

using nccl_bench::NetOps;
using nccl_bench::RunConfig;
using nccl_bench::Shared;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> modes{"threads", "processes"};
  std::vector<std::string> engines{"off", "inproc", "daemon", "inproc/k", "daemon/k"};
  std::vector<int> abis{11, 12};
  std::vector<size_t> sizes{size_t{64} << 10, size_t{256} << 10, size_t{1} << 20,
                            size_t{4} << 20,  size_t{16} << 20,  size_t{64} << 20};
  double target = 0.3;
  int channels = 1;
  std::string plugin = VGPU_NCCL_PLUGIN_PATH;
  std::string vgpud = VGPU_VGPUD_PATH;
};

std::vector<std::string> split(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = s; *c != '\0'; ++c) {
    if (*c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(*c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string human(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// One copier of the baseline: src -> shared memory -> dst, its own buffers. The three start at
// different offsets within a page: with the same page offset, some CPUs' memcpy (AMD Zen 3's
// rep movsb) slows down several-fold, and an upper bound should not measure that.
class StagingCopy {
 public:
  explicit StagingCopy(size_t bytes)
      : bytes_(bytes), src_(bytes + 4096, 0x3c), dst_(bytes + 4096, 0) {
    std::string name = "/nccl-bench-baseline." + std::to_string(getpid()) + "." +
                       std::to_string(counter_++);
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes + 4096)) != 0) {
      std::perror("shm_open/ftruncate");
      std::exit(1);
    }
    void* p = mmap(nullptr, bytes + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    shm_unlink(name.c_str());
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    map_ = p;
    shm_ = static_cast<unsigned char*>(p) + 1088;
    once();  // fault every page in
  }
  ~StagingCopy() { munmap(map_, bytes_ + 4096); }
  StagingCopy(const StagingCopy&) = delete;
  StagingCopy& operator=(const StagingCopy&) = delete;

  void once() {
    std::memcpy(shm_, src_.data(), bytes_);
    std::memcpy(dst_.data() + 2176, shm_, bytes_);
  }

 private:
  static inline int counter_ = 0;
  size_t bytes_;
  std::vector<unsigned char> src_, dst_;
  void* map_ = nullptr;
  unsigned char* shm_ = nullptr;
};

// Seconds per message of the host-staging bound: memcpy src -> shared memory -> dst, by one
// thread (what one rank's proxy does per byte it sends and receives), or by `threads` threads at
// once (both ranks of the exchange copying at the same time, sharing the memory bandwidth).
double memcpy_baseline(size_t bytes, double target, int threads) {
  std::vector<std::unique_ptr<StagingCopy>> copies;
  for (int t = 0; t < threads; ++t) copies.push_back(std::make_unique<StagingCopy>(bytes));
  auto t0 = Clock::now();
  copies[0]->once();
  double one = std::max(1e-7, std::chrono::duration<double>(Clock::now() - t0).count());
  long iters = std::clamp(static_cast<long>(target / 5 / one), 1L, 100000L);
  // The best of 5 batches: this machine's other work only ever makes a batch slower.
  double best = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    std::vector<double> took(static_cast<size_t>(threads));
    auto body = [&](int t) {
      auto start = Clock::now();
      for (long i = 0; i < iters; ++i) copies[t]->once();
      took[t] = std::chrono::duration<double>(Clock::now() - start).count();
    };
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t) others.emplace_back(body, t);
    body(0);
    for (auto& th : others) th.join();
    best = std::min(best, *std::max_element(took.begin(), took.end()) / iters);
  }
  return best;
}

void run_threads(const NetOps& ops, Shared* shared, const RunConfig& cfg) {
  std::thread t1([&] { nccl_bench::run_rank(ops, shared, 1, cfg); });
  nccl_bench::run_rank(ops, shared, 0, cfg);
  t1.join();
}

// The environment of one configuration, set in its own process before the plugin is loaded.
std::string engine_of(const std::string& label) { return label.substr(0, label.find('/')); }
bool kernel_clock_of(const std::string& label) { return label.find("/k") != std::string::npos; }

void set_engine_env(const std::string& label, const Options& o, const std::string& job) {
  const std::string engine = engine_of(label);
  setenv("VGPU_JOB_ID", job.c_str(), 1);
  if (engine == "off") {
    setenv("VGPU_SIMCORE", "off", 1);
  } else if (engine == "inproc") {
    unsetenv("VGPU_SIMCORE");
  } else {
    setenv("VGPU_SIMCORE", "daemon", 1);
    setenv("VGPU_VGPUD", o.vgpud.c_str(), 1);
    setenv("VGPU_DAEMON_IDLE_S", "5", 1);
  }
}

// Loads the plugin in this process; on failure records why and ends the process.
NetOps load_or_exit(const Options& o, int abi, Shared* shared) {
  NetOps ops;
  std::string err = nccl_bench::load_plugin(o.plugin.c_str(), abi, &ops);
  if (!err.empty()) {
    std::snprintf(shared->error, sizeof shared->error, "%s", err.c_str());
    shared->failed = 1;
    _exit(1);
  }
  return ops;
}

[[noreturn]] void rank_process(const Options& o, int abi, Shared* shared, int rank,
                               const RunConfig& cfg) {
  NetOps ops = load_or_exit(o, abi, shared);
  _exit(nccl_bench::run_rank(ops, shared, rank, cfg) ? 0 : 1);
}

// Runs one configuration in a child process (the plugin and its engine are per process).
bool run_config(const Options& o, const std::string& mode, const std::string& engine, int abi,
                Shared* shared, const RunConfig& cfg) {
  std::string job = "nccl-bench-" + std::to_string(getpid()) + "-" + mode + "-" +
                    engine_of(engine) + (kernel_clock_of(engine) ? "-k" : "");
  pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    set_engine_env(engine, o, job);
    if (mode == "threads") {
      NetOps ops = load_or_exit(o, abi, shared);
      run_threads(ops, shared, cfg);
      _exit(shared->failed.load() == 0 ? 0 : 1);
    }
    pid_t ranks[2];
    for (int r = 0; r < 2; ++r) {
      ranks[r] = fork();
      if (ranks[r] == 0) rank_process(o, abi, shared, r, cfg);
    }
    int bad = 0;
    for (pid_t p : ranks) {
      int status = 0;
      if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status) ||
          WEXITSTATUS(status) != 0) {
        ++bad;
      }
    }
    _exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (engine_of(engine) == "daemon") {
    simcore::RemoteOptions ro;
    ro.job_id = job;
    simcore::shutdown_daemon(ro);
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 && shared->failed.load() == 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      o.target = 0.02;
      o.sizes = {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20};
    } else if (a == "--modes") {
      o.modes = split(next());
    } else if (a == "--engines") {
      o.engines = split(next());
    } else if (a == "--abi") {
      o.abis.clear();
      for (const auto& s : split(next())) o.abis.push_back(std::atoi(s.c_str()));
    } else if (a == "--sizes") {
      o.sizes.clear();
      for (const auto& s : split(next())) o.sizes.push_back(std::strtoull(s.c_str(), nullptr, 10));
    } else if (a == "--channels") {
      o.channels = std::atoi(next());
    } else if (a == "--target") {
      o.target = std::atof(next());
    } else if (a == "--plugin") {
      o.plugin = next();
    } else if (a == "--vgpud") {
      o.vgpud = next();
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--modes threads,processes] [--engines "
                   "off,inproc,daemon] [--abi 11,12] [--sizes B,...] [--target S] [--channels N] "
                   "[--plugin P] [--vgpud P]\n", argv[0]);
      return 2;
    }
  }
  if (o.sizes.empty() || o.sizes.size() > static_cast<size_t>(nccl_bench::kMaxSizes)) {
    std::fprintf(stderr, "between 1 and %d sizes\n", nccl_bench::kMaxSizes);
    return 2;
  }
  RunConfig cfg;
  cfg.nsizes = static_cast<int>(o.sizes.size());
  for (int i = 0; i < cfg.nsizes; ++i) cfg.sizes[i] = o.sizes[i];
  cfg.target_seconds = o.target;
  cfg.channels = o.channels;
  if (cfg.channels < 1 || cfg.channels > nccl_bench::kMaxChannels || o.target <= 0) {
    std::fprintf(stderr, "--channels 1..%d, --target > 0\n", nccl_bench::kMaxChannels);
    return 2;
  }

  const char* ring = std::getenv("VGPU_NCCL_RING_BYTES");
  std::printf("NCCL net plugin %s\n2 ranks, one message each way per exchange over %d "
              "channel(s); chunks of %s, %d outstanding per direction and channel; "
              "VGPU_NCCL_RING_BYTES=%s\n\n",
              o.plugin.c_str(), cfg.channels, human(cfg.chunk).c_str(), cfg.depth,
              ring != nullptr ? ring : "(default)");
  std::vector<double> base(o.sizes.size()), base2(o.sizes.size());
  std::printf("%-10s %14s %16s\n", "size", "memcpy GB/s", "2x memcpy GB/s");
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    base[i] = memcpy_baseline(o.sizes[i], o.target, 1);
    base2[i] = memcpy_baseline(o.sizes[i], o.target, 2);
    std::printf("%-10s %14.2f %16.2f\n", human(o.sizes[i]).c_str(), o.sizes[i] / base[i] / 1e9,
                o.sizes[i] / base2[i] / 1e9);
  }
  std::printf("(memcpy: src -> shared memory -> dst in one thread, the bound of host staging per "
              "rank;\n 2x: two threads doing it at once, as both ranks of an exchange do)\n\n");
  std::printf("%-10s %-8s %-4s %-8s %12s %10s %10s %10s\n", "ranks", "engine", "abi", "size",
              "us/exchange", "GB/s/dir", "vs memcpy", "vs 2x");
  std::fflush(stdout);

  bool daemon_ok = !o.vgpud.empty() && access(o.vgpud.c_str(), X_OK) == 0;
  int failures = 0;
  for (const auto& mode : o.modes) {
    for (const auto& engine : o.engines) {
      for (int abi : o.abis) {
        // v12 only where it adds a row worth having: the tables share the core.
        if (abi == 12 && !(mode == "threads" && engine == "inproc") && o.abis.size() > 1) continue;
        if (engine != "off" && engine != "inproc" && engine != "daemon" && engine != "inproc/k" &&
            engine != "daemon/k") {
          std::fprintf(stderr, "unknown engine '%s'\n", engine.c_str());
          return 2;
        }
        if (engine_of(engine) == "daemon" && !daemon_ok) {
          std::printf("%-10s %-8s v%-3d (skipped: no vgpud at '%s')\n", mode.c_str(),
                      engine.c_str(), abi, o.vgpud.c_str());
          continue;
        }
        Shared* shared = nccl_bench::map_shared();
        RunConfig row_cfg = cfg;
        row_cfg.kernel_clock = kernel_clock_of(engine);
        bool ok = run_config(o, mode, engine, abi, shared, row_cfg);
        if (!ok) {
          ++failures;
          std::printf("%-10s %-8s v%-3d FAILED: %s\n", mode.c_str(), engine.c_str(), abi,
                      shared->error[0] ? shared->error : "a rank exited abnormally");
          std::fflush(stdout);
          continue;
        }
        for (size_t i = 0; i < o.sizes.size(); ++i) {
          double t = shared->per_exchange[i];
          double gbs = o.sizes[i] / t / 1e9;
          std::printf("%-10s %-8s v%-3d %-8s %12.1f %10.2f %9.1f%% %9.1f%%\n", mode.c_str(),
                      engine.c_str(), abi, human(o.sizes[i]).c_str(), t * 1e6, gbs,
                      100.0 * base[i] / t, 100.0 * base2[i] / t);
        }
        std::fflush(stdout);
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
