// Finding and opening libcupti, and Recorder::start() where it cannot be used: no crash, no throw,
// a clean nullptr.
#include "cupti_library.h"
#include "cupti_profiler/recorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace vgpu::cupti {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(CuptiCandidates, AnExplicitPathIsTheOnlyCandidate) {
  auto c = cupti_candidates("/opt/x/libcupti.so.13", "/usr/local/cuda", {});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], "/opt/x/libcupti.so.13");
}

TEST(CuptiCandidates, LoaderPathThenToolkitThenWheels) {
  auto c = cupti_candidates("", "/opt/cuda-13",
                            {"/usr/lib/x86_64-linux-gnu/libc.so.6",
                             "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
                             "/usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so"});
  ASSERT_GE(c.size(), 4u);
  EXPECT_EQ(c[0], "libcupti.so.13");
  EXPECT_EQ(c[1], "libcupti.so");
  EXPECT_TRUE(contains(c, "/opt/cuda-13/extras/CUPTI/lib64/libcupti.so.13"));
  EXPECT_TRUE(contains(c, "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"));
  EXPECT_TRUE(contains(c, "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13"));
  EXPECT_TRUE(contains(c, "/venv/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.13"));
  EXPECT_TRUE(contains(c, "/usr/lib/python3/dist-packages/nvidia/cu13/lib/libcupti.so.13"));
  // The toolkit comes before the wheels, and nothing is listed twice.
  auto pos = [&](const std::string& s) { return std::find(c.begin(), c.end(), s) - c.begin(); };
  EXPECT_LT(pos("/opt/cuda-13/extras/CUPTI/lib64/libcupti.so.13"),
            pos("/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13"));
  std::vector<std::string> sorted = c;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
}

TEST(CuptiCandidates, NoCudaHomeStillSearchesTheDefaultToolkit) {
  auto c = cupti_candidates("", "", {});
  EXPECT_TRUE(contains(c, "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"));
  EXPECT_TRUE(contains(c, "/usr/local/cuda/lib64/libcupti.so"));
}

TEST(RecorderStart, MissingLibraryGivesNullptr) {
  ASSERT_EQ(setenv("VGPU_CUPTI_LIBRARY", "/nonexistent/vgpu-test/libcupti.so.13", 1), 0);
  std::string error;
  EXPECT_EQ(load_cupti(&error), nullptr);
  EXPECT_NE(error.find("/nonexistent/vgpu-test/libcupti.so.13"), std::string::npos) << error;
  EXPECT_EQ(Recorder::start(), nullptr);
  // Twice: a failed load leaves nothing half-initialized behind.
  EXPECT_EQ(Recorder::start(), nullptr);
  unsetenv("VGPU_CUPTI_LIBRARY");
}

TEST(RecorderStart, ALibraryThatIsNotCuptiGivesNullptr) {
  // libm loads fine but exports none of CUPTI's entry points.
  ASSERT_EQ(setenv("VGPU_CUPTI_LIBRARY", "libm.so.6", 1), 0);
  std::string error;
  EXPECT_EQ(load_cupti(&error), nullptr);
  EXPECT_NE(error.find("no cupti"), std::string::npos) << error;
  EXPECT_EQ(Recorder::start(), nullptr);
  unsetenv("VGPU_CUPTI_LIBRARY");
}

}  // namespace
}  // namespace vgpu::cupti
