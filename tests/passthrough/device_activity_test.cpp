// What the passthrough reports of its devices' work (passthrough/device_activity.h): the same
// counts, busy time, clock and utilization as reporting every interval on its own, with the
// utilization window lagging by less than kMaxSpan of virtual time.
#include "lock_exclusion.h"
#include "passthrough/device_activity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <mutex>

#include <string>
#include <thread>
#include <vector>

#include "passthrough/spin_lock.h"
#include "status/status_region.h"

namespace {

using vgpu::pt::DeviceActivity;
using vgpu::status::Writer;

std::vector<vgpu::status::DeviceInfo> devices(int n) {
  std::vector<vgpu::status::DeviceInfo> out;
  for (int i = 0; i < n; ++i)
    out.push_back({"NVIDIA H100 80GB HBM3", "GPU-test-" + std::to_string(i), "00000000:18:00.0", 85017493504ull});
  return out;
}

vgpu::status::Snapshot snapshot(Writer& w, const std::string& job) {
  w.publish();
  vgpu::status::Snapshot s;
  std::string error;
  EXPECT_TRUE(vgpu::status::read_snapshot(getuid(), job, &s, &error)) << error;
  return s;
}

// Device 0 through DeviceActivity, device 1 interval by interval: the same work reads the same.
TEST(DeviceActivity, MergedStretchesReadAsTheIntervalsThemselves) {
  const std::string job = "test-device-activity-" + std::to_string(getpid());
  auto w = Writer::attach(job, "passthrough", devices(2));
  ASSERT_NE(w, nullptr);
  DeviceActivity activity(w.get(), 2);
  auto both = [&](double start, double finish, bool kernel) {
    activity.report(0, start, finish, kernel);
    w->add_interval(1, start, finish, kernel);
  };
  double t = 0;
  for (int i = 0; i < 3000; ++i, t += 1e-6) both(t, t + 1e-6, true);  // back to back: 3 ms
  t += 0.2;                                                             // idle
  for (int i = 0; i < 400; ++i, t += 1.5e-6) both(t, t + 1e-6, true);  // gaps between them
  both(t - 0.5e-3, t + 0.1e-3, false);                                  // a copy beside them
  for (int i = 0; i < 100; ++i) both(t + i * 1e-6, t + i * 1e-6 + 3e-6, true);  // overlapping
  both(t + 1e-3, t + 3e-3, true);   // one long kernel: what came before is in the window now
  both(t + 4e-3, t + 6e-3, false);  // one long copy: the same for copies
  const vgpu::status::Snapshot s = snapshot(*w, job);
  ASSERT_EQ(s.devices.size(), 2u);
  const auto &merged = s.devices[0], &each = s.devices[1];
  EXPECT_EQ(merged.kernels, each.kernels);
  EXPECT_EQ(merged.kernels, 3000u + 400u + 100u + 1u);
  EXPECT_DOUBLE_EQ(merged.busy_s, each.busy_s);
  EXPECT_DOUBLE_EQ(merged.clock_s, each.clock_s);
  EXPECT_GT(each.util_gpu, 0);
  EXPECT_DOUBLE_EQ(merged.util_gpu, each.util_gpu);
  EXPECT_DOUBLE_EQ(merged.util_memory, each.util_memory);
}

// Counts, busy time and clock go with their stretch: half a span in, only the stretch's first op
// is there, and flush() (a synchronization) gives them all; the window gets a merged stretch once
// it spans kMaxSpan, and work after idling at once.
TEST(DeviceActivity, TheRegionLagsByLessThanTheSpanUntilFlushed) {
  const std::string job = "test-device-activity-lag-" + std::to_string(getpid());
  auto w = Writer::attach(job, "passthrough", devices(1));
  ASSERT_NE(w, nullptr);
  DeviceActivity activity(w.get(), 1);
  constexpr int kHalf = static_cast<int>(DeviceActivity::kMaxSpan / 1e-6) / 2;
  double t = 0;
  for (int i = 0; i < kHalf; ++i, t += 1e-6) activity.report(0, t, t + 1e-6, true);
  vgpu::status::Snapshot s = snapshot(*w, job);
  EXPECT_EQ(s.devices[0].kernels, 1u);
  EXPECT_NEAR(s.devices[0].clock_s, 1e-6, 1e-9);
  activity.flush();
  s = snapshot(*w, job);
  EXPECT_EQ(s.devices[0].kernels, static_cast<uint64_t>(kHalf));
  EXPECT_NEAR(s.devices[0].busy_s, t, kHalf * 1e-9);  // each op's busy time in whole ns
  EXPECT_NEAR(s.devices[0].clock_s, t, 1e-9);
  for (int i = 0; i < kHalf; ++i, t += 1e-6) activity.report(0, t, t + 1e-6, true);
  s = snapshot(*w, job);
  EXPECT_NEAR(s.devices[0].util_gpu, 1.0, 1e-3);  // a whole span: in
  activity.report(0, t + 0.5, t + 0.5 + 1e-6, true);  // after idling
  s = snapshot(*w, job);
  EXPECT_NEAR(s.devices[0].util_gpu, 1e-3 / (t + 0.5), 1e-4);  // over the job's life so far
}

// Threads reporting to one device at once (DeviceActivity's stretches are behind a spin lock,
// spin_lock.h): every report counts, and the utilization is the union of the work, as when each
// interval goes to the window on its own (run under TSan too).
TEST(DeviceActivity, ThreadsReportingAtOnceReadAsTheIntervalsThemselves) {
  const std::string job = "test-device-activity-threads-" + std::to_string(getpid());
  auto w = Writer::attach(job, "passthrough", devices(2));
  ASSERT_NE(w, nullptr);
  DeviceActivity activity(w.get(), 2);
  constexpr int kThreads = 4, kEach = 3000;
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      // Each thread's kernels back to back in a stretch of its own, the threads' stretches
      // apart, and every 7th a copy that overlaps the previous kernel.
      double t = k * 0.1;
      for (int i = 0; i < kEach; ++i, t += 1e-6) {
        const bool kernel = i % 7 != 0;
        activity.report(0, kernel ? t : t - 0.5e-6, t + 1e-6, kernel);
        w->add_interval(1, kernel ? t : t - 0.5e-6, t + 1e-6, kernel);
      }
    });
  for (std::thread& t : threads) t.join();
  // Long work of each kind: every stretch before it is in the window now.
  for (bool kernel : {true, false}) {
    activity.report(0, 0.9, 0.95, kernel);
    w->add_interval(1, 0.9, 0.95, kernel);
  }
  const vgpu::status::Snapshot s = snapshot(*w, job);
  ASSERT_EQ(s.devices.size(), 2u);
  const auto &merged = s.devices[0], &each = s.devices[1];
  EXPECT_EQ(merged.kernels, each.kernels);
  EXPECT_EQ(merged.kernels, static_cast<uint64_t>(kThreads * (kEach - (kEach + 6) / 7) + 1));
  EXPECT_NEAR(merged.busy_s, each.busy_s, 1e-9);
  EXPECT_DOUBLE_EQ(merged.clock_s, each.clock_s);
  EXPECT_GT(each.util_gpu, 0);
  EXPECT_NEAR(merged.util_gpu, each.util_gpu, 1e-9);
  EXPECT_NEAR(merged.util_memory, each.util_memory, 1e-9);
}

// DeviceActivity's lock excludes: read-modify-writes of a plain counter under it lose nothing
// (without it, threads on two cores lose some of 4 x 200,000).
TEST(SpinLock, Excludes) {
  vgpu::pt::SpinLock lock;
  EXPECT_EQ(test_locks::counted_under(lock), static_cast<uint64_t>(test_locks::kThreads) * test_locks::kEach);
}

}  // namespace
