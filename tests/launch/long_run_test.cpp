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
// Sanitizers inflate the RSS: ASan keeps freed blocks in its quarantine (up to 256 MB) and TSan
// shadows every byte. Measured: 1,492 bytes per launch under ASan (395 with
// ASAN_OPTIONS=quarantine_size_mb=0), 1,860 under TSan.
constexpr double kBoundBytesPerLaunch = 4096;
#else
constexpr int kLaunches = 200'000;
constexpr double kBoundBytesPerLaunch = 1024;  // 200 MB over the run
#endif
constexpr int kSyncEvery = 1'000;

// What the bound documents. The driver's own objects (stream ops, their std::function, launch
// parameter blocks) are released as work completes; what grows is the simcore engine, which
// keeps every event it ever simulated: the driver registers no rank
// (simcore::Engine::register_rank), so its floor never rises and Simulator::reclaim never
// retires anything. Per launch that is one Simulator::Record (288 bytes, in records_), its
// slot_of_ and results_ entries (4 + 16 bytes), its label string (labels_, 32 bytes, kept since
// the driver makes the engine with the default EngineOptions::record_timeline = true) and its
// finish_order_ entry, plus vector growth slack: about 400 bytes measured. Linear in the run's
// length, so a long enough run still exhausts memory.
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
