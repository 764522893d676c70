// A long run stays bounded in memory: 200,000 kernel launches on one stream, synchronized every
// 1,000, must not make the process grow without bound. The driver's own objects (stream ops,
// launch preparation, kernel-time cache) are released as work completes; what remains per
// launch is what the simcore engine keeps for every event it ever simulated (see the bound
// below). The test prints the measured growth per launch so that a regression is visible.
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kLaunches = 50'000;  // the same check, shorter: sanitizers slow every call down
#else
constexpr int kLaunches = 200'000;
#endif
constexpr int kSyncEvery = 1'000;

// The current bound, per launch. Today the in-process simcore engine keeps, for every event
// ever submitted, its full simulation record (no rank is registered by the driver, so nothing
// is ever reclaimed: simcore/src/simulator.h, Simulator::records_/slot_of_/results_, about
// 250 bytes each) and, with EngineOptions::record_timeline on (the default the driver uses),
// its timeline entry once reclaimed. 2 KiB per launch leaves room for allocator slack and
// sanitizer redzones; a leak of a stream op, a std::function or a launch's parameter block per
// launch would exceed it.
constexpr double kBoundBytesPerLaunch = 2048;
constexpr double kBoundBytes = kBoundBytesPerLaunch * kLaunches;  // 400 MB / 100 MB

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

  auto run = [&](int launches) {
    for (int i = 0; i < launches; ++i) {
      OK(cuLaunchKernel(axpy, 64, 1, 1, 256, 1, 1, 0, s, params, nullptr));
      if ((i + 1) % kSyncEvery == 0) {
        OK(cuStreamSynchronize(s));
      }
    }
    OK(cuStreamSynchronize(s));
  };
  run(2 * kSyncEvery);  // warm up: caches, worker threads, first allocations
  const double before = rss_bytes();
  run(kLaunches);
  const double grown = rss_bytes() - before;
  std::printf("%d launches: RSS grew by %.1f MB (%.0f bytes per launch; bound %.0f)\n", kLaunches,
              grown / 1e6, grown / kLaunches, kBoundBytesPerLaunch);
  EXPECT_LT(grown, kBoundBytes);

  OK(cuStreamDestroy_v2(s));
  OK(cuMemFree_v2(x));
  OK(cuMemFree_v2(y));
  OK(cuModuleUnload(module));
  OK(cuDevicePrimaryCtxRelease(0));
}

}  // namespace
