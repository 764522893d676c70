// Kernels beside an NCCL kernel slow down on the sim backend (sim/exec/compute_beside_collectives.h),
// through the driver API: a kernel named as NCCL names its device kernels (no profiler: it keeps
// the fallback duration, ~5 ms at this grid) is the collective; axpy launches are the compute.
// Every stream is kept behind a long filler kernel, so that each op starts where the test's
// events say (the host's own time never shows). The expected rate is the setting's
// (VGPU_COMPUTE_BESIDE_COLLECTIVE, 0.5 unset; meson runs this test with it unset and with 1).
#include <cuda.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

// Runs this binary again with `env` (assignments for the shell) and only the test `filter`:
// what a child writes at exit (a timeline, a list of misses) is then the parent's to read.
int run_child(const std::string& env, const char* filter) {
  const std::string command = env + " /proc/" + std::to_string(::getpid()) + "/exe --gtest_filter=" + filter +
                              " > /dev/null 2>&1";
  return std::system(command.c_str());
}

std::vector<char> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

double moving_rate() {
  const char* v = std::getenv("VGPU_COMPUTE_BESIDE_COLLECTIVE");
  return v != nullptr && *v != '\0' ? std::atof(v) : 0.5;
}

class ComputeBesideCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    kernels_ = read_file(KERNELS_FATBIN);
    nccl_ = read_file(NCCL_KERNEL_FATBIN);
    ASSERT_FALSE(kernels_.empty());
    ASSERT_FALSE(nccl_.empty());
    ASSERT_EQ(cuModuleLoadData(&compute_module_, kernels_.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleLoadData(&nccl_module_, nccl_.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&axpy_, compute_module_, "axpy"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&collective_, nccl_module_, "ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE"),
              CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&buf_, 1 << 20), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&a_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&b_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    for (CUevent* e : {&e0_, &e1_, &e2_, &w0_, &w1_}) ASSERT_EQ(cuEventCreate(e, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  }
  void TearDown() override {
    for (CUevent e : {e0_, e1_, e2_, w0_, w1_}) cuEventDestroy(e);
    cuStreamDestroy(a_);
    cuStreamDestroy(b_);
    cuMemFree(buf_);
    cuModuleUnload(compute_module_);
    cuModuleUnload(nccl_module_);
    cuDevicePrimaryCtxRelease(0);
  }

  // axpy over `blocks` blocks of 256 threads (the fallback model times it by its threads).
  void axpy(CUstream s, unsigned blocks) {
    float a = 2;
    int n = 256;
    void* params[] = {&a, &buf_, &buf_, &n};
    ASSERT_EQ(cuLaunchKernel(axpy_, blocks, 1, 1, 256, 1, 1, 0, s, params, nullptr), CUDA_SUCCESS);
  }
  void collective(CUstream s) {
    CUdeviceptr flag = 0;
    void* params[] = {&flag};
    ASSERT_EQ(cuLaunchKernel(collective_, 1u << 20, 1, 1, 1024, 1, 1, 0, s, params, nullptr), CUDA_SUCCESS);
  }
  // Stream `s` starts its next op after `x`, recorded on `from`.
  void wait(CUstream s, CUevent x, CUstream from) {
    ASSERT_EQ(cuEventRecord(x, from), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamWaitEvent(s, x, 0), CUDA_SUCCESS);
  }
  float ms(CUevent from, CUevent to) {
    float v = -1;
    EXPECT_EQ(cuEventElapsedTime(&v, from, to), CUDA_SUCCESS);
    return v;
  }

  static constexpr unsigned kFiller = 1u << 21;  // ~2.6 ms on an H100 by the fallback model
  static constexpr unsigned kLong = 1u << 17;    // ~160 us
  static constexpr unsigned kShort = 1u << 15;   // ~40 us

  // The two axpys back to back with no collective anywhere: their durations alone.
  void alone(float* long_ms, float* short_ms) {
    axpy(b_, kFiller);
    ASSERT_EQ(cuEventRecord(e0_, b_), CUDA_SUCCESS);
    axpy(b_, kLong);
    ASSERT_EQ(cuEventRecord(e1_, b_), CUDA_SUCCESS);
    axpy(b_, kShort);
    ASSERT_EQ(cuEventRecord(e2_, b_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    *long_ms = ms(e0_, e1_);
    *short_ms = ms(e1_, e2_);
  }

  CUcontext ctx_ = nullptr;
  CUmodule compute_module_ = nullptr, nccl_module_ = nullptr;
  CUfunction axpy_ = nullptr, collective_ = nullptr;
  CUdeviceptr buf_ = 0;
  CUstream a_ = nullptr, b_ = nullptr;
  CUevent e0_{}, e1_{}, e2_{}, w0_{}, w1_{};
  std::vector<char> kernels_, nccl_;
};

}  // namespace

// A kernel placed after the collective's window is known runs inside it at the rate.
TEST_F(ComputeBesideCollectives, AKernelInsideAKnownWindowRunsAtTheRate) {
  float long_ms = 0, short_ms = 0;
  alone(&long_ms, &short_ms);
  ASSERT_GT(long_ms, 0.1f);
  ASSERT_GT(short_ms, 0.02f);
  axpy(a_, kFiller);  // the collective alone, behind the filler
  ASSERT_EQ(cuEventRecord(w0_, a_), CUDA_SUCCESS);
  collective(a_);
  ASSERT_EQ(cuEventRecord(w1_, a_), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const float collective_alone = ms(w0_, w1_);

  axpy(a_, kFiller);
  wait(b_, w0_, a_);  // b starts with the collective
  collective(a_);
  ASSERT_EQ(cuEventRecord(w1_, a_), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(e0_, b_), CUDA_SUCCESS);
  axpy(b_, kLong);
  ASSERT_EQ(cuEventRecord(e1_, b_), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const float window = ms(w0_, w1_);
  ASSERT_GT(window, 4 * long_ms);  // the axpy ends inside it
  EXPECT_NEAR(ms(w0_, e0_), 0.0f, 1e-4f);
  EXPECT_NEAR(ms(e0_, e1_), long_ms / moving_rate(), 1e-3f);
  EXPECT_NEAR(window, collective_alone, 1e-4f);  // the collective itself keeps its time
}

// A kernel placed before the collective but running inside its window leaves the work it lost
// there as a debt that the GPU's next kernel carries: after the long axpy (all of it inside the
// window) the short one does its own work plus (1 - rate) x the long one's, at the rate.
TEST_F(ComputeBesideCollectives, AKernelPlacedBeforeTheWindowLeavesADebt) {
  float long_ms = 0, short_ms = 0;
  alone(&long_ms, &short_ms);

  axpy(a_, kFiller);
  wait(b_, w0_, a_);
  ASSERT_EQ(cuEventRecord(e0_, b_), CUDA_SUCCESS);
  axpy(b_, kLong);  // placed while no window is known: untouched
  ASSERT_EQ(cuEventRecord(e1_, b_), CUDA_SUCCESS);
  collective(a_);
  ASSERT_EQ(cuEventRecord(w1_, a_), CUDA_SUCCESS);
  axpy(b_, kShort);
  ASSERT_EQ(cuEventRecord(e2_, b_), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const double rate = moving_rate();
  EXPECT_NEAR(ms(e0_, e1_), long_ms, 1e-4f);
  ASSERT_GT(ms(w0_, w1_), 4 * (long_ms + short_ms));
  EXPECT_NEAR(ms(e1_, e2_), (short_ms + (1 - rate) * long_ms) / rate, 1e-3f);
}

// The timeline says why the short kernel above lasts longer than its work: its entry carries the
// debt it paid, "carried_us" = (1 - rate) x the long kernel's time alone, and no other kernel's
// entry has one (none with the rule off). The scenario runs in a child process (the trace is
// written at exit), this binary again.
TEST(ComputeBesideCollectivesTimeline, TheKernelThatPaysTheDebtSaysHowMuch) {
  if (std::getenv("VGPU_TIMELINE") != nullptr) GTEST_SKIP() << "the child of this test";
  const std::string trace = ::testing::TempDir() + "/beside_timeline_" + std::to_string(::getpid()) + ".json";
  std::remove(trace.c_str());
  ASSERT_EQ(run_child("VGPU_TIMELINE=" + trace, "ComputeBesideCollectives.AKernelPlacedBeforeTheWindowLeavesADebt"), 0);
  std::ifstream in(trace);
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::remove(trace.c_str());
  ASSERT_TRUE(json.is_object()) << "no trace at " << trace;
  std::vector<nlohmann::json> axpys;
  for (const auto& e : json.at("traceEvents"))
    if (e.value("ph", "") == "X" && e.value("name", "") == "axpy") axpys.push_back(e);
  std::sort(axpys.begin(), axpys.end(),
            [](const auto& a, const auto& b) { return a.at("ts").template get<double>() < b.at("ts").template get<double>(); });
  // alone(): filler, long, short; then the filler on a, the long one beside the window, the short.
  ASSERT_EQ(axpys.size(), 6u) << json.dump().substr(0, 2000);
  auto carried = [](const nlohmann::json& e) {
    return e.contains("args") && e.at("args").contains("carried_us") ? e.at("args").at("carried_us").get<double>() : 0.0;
  };
  const double long_alone_us = axpys[1].at("dur").get<double>(), rate = moving_rate();
  for (size_t i = 0; i + 1 < axpys.size(); ++i) EXPECT_EQ(carried(axpys[i]), 0.0) << i;
  if (rate >= 1) {
    EXPECT_EQ(carried(axpys[5]), 0.0);
  } else {
    EXPECT_NEAR(carried(axpys[5]), (1 - rate) * long_alone_us, 1e-3);
    EXPECT_GT(axpys[5].at("dur").get<double>(), carried(axpys[5]));  // its own work besides
  }
}

// Once the collective is over, kernels take their own time again.
TEST_F(ComputeBesideCollectives, KernelsAfterTheWindowAreUntouched) {
  float long_ms = 0, short_ms = 0;
  alone(&long_ms, &short_ms);

  axpy(a_, kFiller);
  collective(a_);
  ASSERT_EQ(cuEventRecord(w1_, a_), CUDA_SUCCESS);
  axpy(b_, kFiller);
  wait(b_, w0_, a_);  // b goes on after the collective's end
  ASSERT_EQ(cuEventRecord(e0_, b_), CUDA_SUCCESS);
  axpy(b_, kLong);
  ASSERT_EQ(cuEventRecord(e1_, b_), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_NEAR(ms(e0_, e1_), long_ms, 1e-4f);
}

// The job `vgpu-run --kernel-db` lists what the database missed (front/launch/kernel_db_misses.h):
// an NCCL kernel's time is the collective model's whatever the database holds, so it is counted
// apart ("collective=N") and never listed as a miss, while a compute kernel the database lacks is.
// The launches run in a child process (the file is written at exit), this binary again.
TEST_F(ComputeBesideCollectives, MissesChildLaunches) {
  if (std::getenv("VGPU_MISSES_CHILD") == nullptr) GTEST_SKIP() << "run by NcclKernelsAreNotListedAsMisses";
  collective(a_);
  axpy(a_, 4);
  axpy(a_, 4);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST(KernelDbMissesReport, NcclKernelsAreCountedApartNotListedAsMisses) {
  if (std::getenv("VGPU_MISSES_CHILD") != nullptr) GTEST_SKIP();
  const std::string dir = ::testing::TempDir(), pid = std::to_string(::getpid());
  const std::string db = dir + "/beside_misses_" + pid + ".db", misses = dir + "/beside_misses_" + pid + ".tsv";
  std::remove(misses.c_str());
  ASSERT_EQ(run_child("VGPU_MISSES_CHILD=1 VGPU_KERNEL_DB=" + db + " VGPU_KERNEL_DB_MISSES=" + misses,
                      "ComputeBesideCollectives.MissesChildLaunches"),
            0);
  std::ifstream in(misses);
  const std::string listed{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(listed.find("ncclDevKernel"), std::string::npos) << listed;
  EXPECT_NE(listed.find("\taxpy\t"), std::string::npos) << listed;
  EXPECT_NE(listed.find("\tfallback=2\tcollective=1\n"), std::string::npos) << listed;
  for (const std::string& f : {misses, db, db + "-wal", db + "-shm"}) std::remove(f.c_str());
}
