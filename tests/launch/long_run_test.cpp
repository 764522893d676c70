// A long run stays bounded in memory: 1,000,000 kernel launches on one stream, synchronized every
// 1,000, then as many never synchronized until the end, must not make the process grow. The
// driver's own objects (stream ops, launch preparation, kernel-time cache) are released as work
// completes, and so is the simcore engine's history: each submitting thread is a rank of the
// engine whose floor follows its virtual clock, so what finished before it is reclaimed; the
// stream's ops release their engine events (Engine::release) so that the engine's per-event
// results go too; and a stream holds at most 1,024 ops in flight (a real driver's launch queue),
// so a program that never synchronizes still lets the floor follow. The test prints the
// measured growth per launch so that a regression is visible. A third phase launches a kernel
// whose by-value struct carries different bytes every time (as PyTorch's stack garbage does)
// with a kernel-time database configured: each launch is a signature the database lacks, and
// the database's cache of misses must stay bounded too (it grew 188 bytes per launch).
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

// Before the engine forgot released events: 25 bytes per launch synchronized every 4096 (the
// event's final interval and its slot, 16 + 4 bytes, plus vector slack), 305 never synchronized
// (every op's history: the stream ran ahead of the thread's clock without bound).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kLaunches = 50'000;  // the same check, shorter: sanitizers slow every call down
// Sanitizers inflate the RSS whatever the driver keeps: ASan holds freed blocks in its
// quarantine (up to 256 MB, i.e. up to 5 KB per launch of this run, reached over time by the
// per-launch allocations the driver frees), TSan shadows the heap. Before ranks: 1,492 bytes
// per launch under ASan (395 with ASAN_OPTIONS=quarantine_size_mb=0), 1,860 under TSan.
constexpr double kBoundBytesPerLaunch = 4096;
#else
constexpr int kLaunches = 1'000'000;
constexpr double kBoundBytesPerLaunch = 4;  // 4 MB over each phase
#endif
constexpr int kSyncEvery = 1'000;

// The kernel-time database (read once, when the driver starts: set before main() runs). No
// file is created: every lookup is a miss.
std::string db_path() {
  return "/tmp/vgpu_long_run_db_" + std::to_string(::getpid()) + ".sqlite";
}
const bool kDbSet = [] {
  ::setenv("VGPU_KERNEL_DB", db_path().c_str(), 1);
  return true;
}();

struct Params {  // kernels.cu's by_struct
  int a;
  float b;
  double c;
  char tag[12];
};
constexpr double kBoundBytes = kBoundBytesPerLaunch * kLaunches;

std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// Resident set size of this process, bytes (/proc/self/statm: size resident shared ...).
double rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

TEST(LongRun, ManyLaunchesStayBoundedInMemory) {
  // The engine keeps the timeline only when one is asked for.
  ASSERT_EQ(std::getenv("VGPU_TIMELINE"), nullptr);
  OK(cuInit(0));
  CUcontext ctx = nullptr;
  OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  OK(cuCtxSetCurrent(ctx));
  const auto image = read_file(KERNELS_FATBIN);
  ASSERT_GT(image.size(), 1000u);
  CUmodule module = nullptr;
  CUfunction axpy = nullptr;
  OK(cuModuleLoadData(&module, image.data()));
  OK(cuModuleGetFunction(&axpy, module, "axpy"));
  CUdeviceptr x = 0, y = 0;
  OK(cuMemAlloc_v2(&x, 4096));
  OK(cuMemAlloc_v2(&y, 4096));
  float a = 2.0f;
  int n = 1000;
  void* params[] = {&a, &x, &y, &n};
  CUstream s = nullptr;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

  auto run = [&](int launches, int sync_every) {
    for (int i = 0; i < launches; ++i) {
      OK(cuLaunchKernel(axpy, 64, 1, 1, 256, 1, 1, 0, s, params, nullptr));
      if (sync_every > 0 && (i + 1) % sync_every == 0) {
        OK(cuStreamSynchronize(s));
      }
    }
    OK(cuStreamSynchronize(s));
  };
  run(2 * kSyncEvery, kSyncEvery);  // warm up: caches, worker threads, first allocations
  // A thread that submitted work and exited no longer holds the engine's floor back: were it
  // still a rank, its floor would stay where it left it and nothing below would be reclaimed.
  std::thread([&] {
    ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    ASSERT_EQ(cuLaunchKernel(axpy, 64, 1, 1, 256, 1, 1, 0, s, params, nullptr), CUDA_SUCCESS);
  }).join();
  for (const int sync_every : {kSyncEvery, 0}) {
    const double before = rss_bytes();
    run(kLaunches, sync_every);
    const double grown = rss_bytes() - before;
    std::printf("%d launches, synchronized every %d: RSS grew by %.2f MB (%.2f bytes per launch; bound %.0f)\n",
                kLaunches, sync_every, grown / 1e6, grown / kLaunches, kBoundBytesPerLaunch);
    EXPECT_LT(grown, kBoundBytes) << "synchronized every " << sync_every << " (0: never)";
  }

  // Every launch a new signature: the struct's tag holds different bytes each time.
  CUfunction by_struct = nullptr;
  OK(cuModuleGetFunction(&by_struct, module, "by_struct"));
  Params p{1, 2.0f, 3.0, {}};
  void* struct_params[] = {&p, &y};
  uint64_t counter = 0;
  auto run_garbage = [&](int launches) {
    for (int i = 0; i < launches; ++i) {
      ++counter;
      std::memcpy(p.tag, &counter, sizeof counter);
      OK(cuLaunchKernel(by_struct, 64, 1, 1, 256, 1, 1, 0, s, struct_params, nullptr));
      if ((i + 1) % kSyncEvery == 0) {
        OK(cuStreamSynchronize(s));
      }
    }
    OK(cuStreamSynchronize(s));
  };
  run_garbage(2 * kSyncEvery);
  {
    const double before = rss_bytes();
    run_garbage(kLaunches);
    const double grown = rss_bytes() - before;
    std::printf("%d launches, each a new signature, with a kernel-time database: RSS grew by %.2f MB "
                "(%.2f bytes per launch; bound %.0f)\n",
                kLaunches, grown / 1e6, grown / kLaunches, kBoundBytesPerLaunch);
    EXPECT_LT(grown, kBoundBytes) << "new signatures";
  }
  EXPECT_FALSE(std::filesystem::exists(db_path()));

  OK(cuStreamDestroy_v2(s));
  OK(cuMemFree_v2(x));
  OK(cuMemFree_v2(y));
  OK(cuModuleUnload(module));
  OK(cuDevicePrimaryCtxRelease(0));
}

}  // namespace
