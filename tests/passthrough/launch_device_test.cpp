// A launching thread's last device's facts (vgpu/passthrough/launch_device.h): through launches
// that switch devices and owners at random, every answer must be the device's own, described
// again only when the device or the owner changed.
#include "passthrough/launch_device.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using vgpu::pt::LastLaunchDevice;
using vgpu::pt::LaunchDevice;

// Device d of owner o: on GPU 10 * o + d / 2, shared when d is even.
LaunchDevice facts_of(int owner, int device) {
  LaunchDevice f;
  f.physical = 10 * owner + device / 2;
  f.shares_physical = device % 2 == 0;
  return f;
}

TEST(LastLaunchDevice, EveryAnswerIsTheDevicesOwn) {
  std::mt19937 rng(21);
  const int owners[2] = {0, 1};
  LastLaunchDevice last;
  int described = 0, wrong = 0, launches = 0, changes = 0;
  int owner = 0, device = 0, previous_owner = -1, previous_device = -1;
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 10 == 0) device = static_cast<int>(rng() % 4);
    if (rng() % 50 == 0) owner = static_cast<int>(rng() % 2);
    const LaunchDevice& got = last.of(&owners[owner], device, [&] {
      ++described;
      return facts_of(owner, device);
    });
    const LaunchDevice want = facts_of(owner, device);
    wrong += got.physical != want.physical || got.shares_physical != want.shares_physical;
    changes += owner != previous_owner || device != previous_device;
    previous_owner = owner;
    previous_device = device;
    ++launches;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(described, changes) << "described again only when the device or the owner changed";
  EXPECT_LT(described, launches / 5);
}

}  // namespace
