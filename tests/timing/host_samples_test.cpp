// VGPU_HOST_SAMPLES (vgpu/timing/host_samples.h): the sampler names the function a thread burns its
// CPU in, under the thread's name, and keeps only what ran inside the program's profiling ranges.
#include <gtest/gtest.h>
#include <pthread.h>
#include <time.h>

#include <string>
#include <thread>

#include "timing/host_samples.h"

// Exported (the test is linked with export_dynamic) so that the sampler's dladdr names them.
extern "C" __attribute__((noinline, visibility("default"))) double vgpu_test_burn_before_the_range(double seconds);
extern "C" __attribute__((noinline, visibility("default"))) double vgpu_test_burn_inside_the_range(double seconds);

namespace {
double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
volatile double sink = 0;
double spin(double seconds) {
  const double end = thread_cpu() + seconds;
  double x = 1;
  while (thread_cpu() < end)
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  sink = x;
  return x;
}
}  // namespace

extern "C" double vgpu_test_burn_before_the_range(double seconds) { return spin(seconds) + 1; }
extern "C" double vgpu_test_burn_inside_the_range(double seconds) { return spin(seconds) + 2; }

namespace {

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

TEST(HostSamples, NameWhereEachThreadBurnsItsCpuInsideTheRangesOnly) {
  vgpu::timing::host_samples::arm();
  std::thread burner([] {
    pthread_setname_np(pthread_self(), "vgpu-burner");
    vgpu_test_burn_before_the_range(0.2);  // start-up: dropped when the first range opens
    vgpu::timing::host_samples::range_start();
    vgpu_test_burn_inside_the_range(0.4);
    vgpu::timing::host_samples::range_stop();
    vgpu_test_burn_before_the_range(0.2);  // after the range: not kept
  });
  burner.join();
  const std::string r = vgpu::timing::host_samples::report();
  SCOPED_TRACE(r);
  EXPECT_NE(r.find("\"ranged\": true"), std::string::npos);
  EXPECT_NE(r.find("\"name\": \"vgpu-burner\""), std::string::npos);
  EXPECT_GE(count(r, "vgpu_test_burn_inside_the_range"), 1u);
  EXPECT_EQ(count(r, "vgpu_test_burn_before_the_range"), 0u);
  // The burner's own line holds most of what was sampled (0.4 s of CPU at 1 kHz: ~400 samples).
  const size_t at = r.find("\"name\": \"vgpu-burner\", \"samples\": ");
  ASSERT_NE(at, std::string::npos);
  const int samples = std::stoi(r.substr(at + std::string("\"name\": \"vgpu-burner\", \"samples\": ").size()));
  EXPECT_GE(samples, 20);  // the timer fires at the kernel's tick: 100-400 samples
}

}  // namespace
