// Launch signatures that settle under the passthrough (issue 21): launches whose by-value struct
// carries different garbage on every launch stop being measured after a few launches, while a
// launch whose size field inside the struct differs is measured on its own. The stand-in GPU is
// the sim backend's library, which times struct_gemm by the M, N, K in its struct; the counts
// come from VGPU_LAUNCH_STATS.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "launch_stats_file.h"
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>
#include "on_passthrough.h"

namespace {

std::string stats_path() {
  return (std::filesystem::temp_directory_path() / ("vgpu_settling_stats_" + std::to_string(::getpid()))).string();
}
const bool kStatsSet = [] {
  ::setenv("VGPU_LAUNCH_STATS", stats_path().c_str(), 1);
  return true;
}();

std::map<std::string, long> launch_stats() { return read_launch_stats(stats_path()); }

struct GemmArgs {  // struct_kernel.cu
  int m, n, k;
  uint32_t tail[13];
};

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

class Settling : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(running_on_passthrough());
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx_, 0));
    OK(cuCtxSetCurrent(ctx_));
    std::ifstream in(STRUCT_KERNEL_FATBIN, std::ios::binary);
    image_.assign(std::istreambuf_iterator<char>(in), {});
    ASSERT_FALSE(image_.empty());
    OK(cuModuleLoadData(&module_, image_.data()));
    OK(cuModuleGetFunction(&f_, module_, "struct_gemm"));
    // Large enough to hold a 4096 x 4096 output: the fallback takes sizes read from a struct only
    // where the launch's buffers could hold the GEMM's matrices (front/launch/kernel_time_model.h).
    OK(cuMemAlloc(&c_, 16 << 20));
    OK(cuEventCreate(&a_, CU_EVENT_DEFAULT));
    OK(cuEventCreate(&b_, CU_EVENT_DEFAULT));
  }
  void TearDown() override {
    cuEventDestroy(a_);
    cuEventDestroy(b_);
    cuMemFree(c_);
    cuModuleUnload(module_);
    cuDevicePrimaryCtxRelease(0);
  }
  // One launch of struct_gemm with sizes m = n = k = `dim` and fresh garbage in the tail (every
  // word has its high bit set, as most stack garbage does: it reads as no size).
  void launch(int dim) {
    GemmArgs args{dim, dim, dim, {}};
    for (uint32_t& w : args.tail) w = static_cast<uint32_t>(rng_()) | 0x80000000u;
    void* params[] = {&args, &c_};
    OK(cuLaunchKernel(f_, 8, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
    OK(cuCtxSynchronize());
  }
  // The virtual duration of one launch, ms.
  float timed_launch(int dim) {
    float ms = -1;
    EXPECT_EQ(cuEventRecord(a_, nullptr), CUDA_SUCCESS);
    launch(dim);
    EXPECT_EQ(cuEventRecord(b_, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cuEventSynchronize(b_), CUDA_SUCCESS);
    EXPECT_EQ(cuEventElapsedTime(&ms, a_, b_), CUDA_SUCCESS);
    return ms;
  }

  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction f_ = nullptr;
  CUdeviceptr c_ = 0;
  CUevent a_ = nullptr, b_ = nullptr;
  std::vector<char> image_;
  std::mt19937 rng_{21};
};

TEST_F(Settling, StructGarbageSettlesAndASizeFieldStillKeys) {
  // Garbage differs on every launch: measured while the tail's words are learnt, then settled.
  for (int i = 0; i < 8; ++i) launch(4096);
  const auto learnt = launch_stats();
  ASSERT_EQ(learnt.count("measured"), 1u) << "no VGPU_LAUNCH_STATS file";
  EXPECT_LE(learnt.at("measured"), 6);
  for (int i = 0; i < 12; ++i) launch(4096);
  const auto settled = launch_stats();
  EXPECT_EQ(settled.at("launches") - learnt.at("launches"), 12);
  EXPECT_EQ(settled.at("measured"), learnt.at("measured")) << "12 launches with new garbage, none measured";

  // The same kernel, grid, block and garbage, with the size field halved: measured on its own,
  // then settled at its own (8x shorter) duration.
  for (int i = 0; i < 8; ++i) launch(2048);
  const auto other = launch_stats();
  EXPECT_GE(other.at("measured") - settled.at("measured"), 2) << "measured until two agree closely";
  for (int i = 0; i < 4; ++i) launch(2048);
  EXPECT_EQ(launch_stats().at("measured"), other.at("measured"));
  const float big = timed_launch(4096), small = timed_launch(2048);
  EXPECT_GT(big, 4 * small) << big << " ms vs " << small << " ms";
  EXPECT_EQ(launch_stats().at("measured"), other.at("measured"));
  std::printf("measured: %ld of the first 8 launches (new garbage each), %ld of the next 12; "
              "%ld of 8 with the size halved, 0 of the next 6; %.3f ms vs %.3f ms\n",
              learnt.at("measured"), settled.at("measured") - learnt.at("measured"),
              other.at("measured") - settled.at("measured"), big, small);
  std::filesystem::remove(stats_path());
}

}  // namespace
