// Utilization over a sliding window of virtual time: the union of work intervals (overlapping
// work counts once), what falls out of the window forgotten; and the status region's writer
// publishing it with the SM clock that follows it.
#include "status/activity_window.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "status/status_region.h"

namespace vgpu::status {
namespace {

TEST(ActivityWindow, OverlappingWorkCountsOnce) {
  ActivityWindow w(1.0);
  w.add(0.0, 0.4);
  w.add(0.2, 0.5);  // another stream, overlapping
  w.add(0.1, 0.3);  // inside what is covered
  EXPECT_DOUBLE_EQ(w.utilization(1.0), 0.5);
  EXPECT_EQ(w.pieces(), 1u);
}

TEST(ActivityWindow, AnyArrivalOrderGivesTheUnion) {
  ActivityWindow a(1.0), b(1.0);
  const double iv[][2] = {{0.1, 0.2}, {0.3, 0.35}, {0.15, 0.32}, {0.6, 0.7}, {0.05, 0.1}};
  for (auto& i : iv) a.add(i[0], i[1]);
  for (int k = 4; k >= 0; --k) b.add(iv[k][0], iv[k][1]);
  EXPECT_NEAR(a.utilization(1.0), 0.4, 1e-12);  // [0.05, 0.35] + [0.6, 0.7]
  EXPECT_NEAR(b.utilization(1.0), 0.4, 1e-12);
}

TEST(ActivityWindow, AYoungJobIsMeasuredOverItsLife) {
  ActivityWindow w(1.0);
  w.add(0.0, 0.001);
  EXPECT_DOUBLE_EQ(w.utilization(0.002), 0.5);
}

TEST(ActivityWindow, WorkSlidesOutOfTheWindow) {
  ActivityWindow w(1.0);
  w.add(0.0, 2.0);           // busy for two seconds
  EXPECT_DOUBLE_EQ(w.utilization(2.0), 1.0);
  EXPECT_DOUBLE_EQ(w.utilization(2.5), 0.5);  // half of [1.5, 2.5]
  EXPECT_DOUBLE_EQ(w.utilization(3.5), 0.0);  // idle for the whole last second
  EXPECT_EQ(w.pieces(), 0u);
}

TEST(ActivityWindow, WorkPastNowIsNotCounted) {
  ActivityWindow w(1.0);
  w.add(0.5, 1.5);
  EXPECT_DOUBLE_EQ(w.utilization(1.0), 0.5);
}

TEST(ActivityWindow, ManySmallGapsStayBounded) {
  ActivityWindow w(1.0);
  const int n = 3 * static_cast<int>(ActivityWindow::kMaxPieces);
  for (int i = 0; i < n; ++i) w.add(i * 1e-4, i * 1e-4 + 5e-5);  // 50% busy, in 100 us steps
  EXPECT_LE(w.pieces(), ActivityWindow::kMaxPieces);
  EXPECT_NEAR(w.utilization(n * 1e-4), 0.5, 0.01);
}

TEST(StatusRegionActivity, WriterPublishesUtilizationAndClock) {
  const std::string job = "test-activity-" + std::to_string(getpid());
  std::vector<DeviceInfo> devices(2);
  for (int i = 0; i < 2; ++i) {
    devices[i].model = "NVIDIA H100 80GB HBM3";
    devices[i].uuid = "GPU-activity-" + std::to_string(i);
    devices[i].pci_bus_id = "00000000:18:00.0";
    devices[i].capacity = 1 << 30;
    devices[i].max_sm_clock_mhz = 1980;
    devices[i].idle_sm_clock_mhz = 345;
  }
  auto w = Writer::attach(job, "sim", devices);
  ASSERT_NE(w, nullptr);
  Snapshot s;
  std::string error;
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  EXPECT_EQ(s.devices[0].sm_clock_mhz, 345u);  // idle before any work

  w->add_interval(0, 0.0, 0.25, true);
  w->add_interval(0, 0.5, 1.0, true);
  w->add_interval(0, 0.5, 0.75, false);  // a copy beside the kernel
  w->publish();
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  EXPECT_EQ(s.devices[0].kernels, 2u);
  EXPECT_DOUBLE_EQ(s.devices[0].busy_s, 1.0);  // 0.25 + 0.5 of kernels + 0.25 of copy
  EXPECT_DOUBLE_EQ(s.devices[0].clock_s, 1.0);
  EXPECT_NEAR(s.devices[0].util_gpu, 0.75, 1e-3);
  EXPECT_NEAR(s.devices[0].util_memory, 0.25, 1e-3);
  EXPECT_EQ(s.devices[0].sm_clock_mhz, 1980u);
  EXPECT_EQ(s.devices[1].util_gpu, 0.0);
  EXPECT_EQ(s.devices[1].sm_clock_mhz, 345u);

  // Later work on the device moves the window on: the early work no longer counts.
  w->add_interval(0, 2.9, 3.0, true);
  w->publish();
  ASSERT_TRUE(read_snapshot(getuid(), job, &s, &error)) << error;
  EXPECT_NEAR(s.devices[0].util_gpu, 0.1, 1e-3);
  EXPECT_EQ(s.devices[0].util_memory, 0.0);
  EXPECT_NEAR(s.devices[0].utilization(), 1.1 / 3.0, 1e-9);  // the whole run's
}

}  // namespace
}  // namespace vgpu::status
