// CUDA_VISIBLE_DEVICES as the real driver reads it (vgpu/common/visible_devices.h).
#include "common/visible_devices.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>

namespace vgpu {
namespace {

std::vector<std::string> uuids(int n) {
  std::vector<std::string> u;
  for (int i = 0; i < n; ++i) u.push_back(fmt::format("GPU-76677075-0000-0000-0000-0000000{:05x}", i * 0x100 + 7));
  return u;
}

std::vector<int> parse(const char* text, int n = 16) { return parse_visible_devices(text, uuids(n)).gpus; }

TEST(VisibleDevices, OrdinalsInTheOrderListed) {
  EXPECT_EQ(parse("8,9,10,11"), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(parse("3,1"), (std::vector<int>{3, 1}));
  EXPECT_EQ(parse(" 2 , 5 "), (std::vector<int>{2, 5}));
  EXPECT_TRUE(parse_visible_devices("0,1", uuids(2)).stopped.empty());
}

TEST(VisibleDevices, EmptyShowsNone) {
  const VisibleDevices v = parse_visible_devices("", uuids(8));
  EXPECT_TRUE(v.gpus.empty());
  EXPECT_FALSE(v.stopped.empty());
}

TEST(VisibleDevices, AnInvalidEntryEndsTheList) {
  EXPECT_EQ(parse("1,16,2"), (std::vector<int>{1}));  // out of range
  EXPECT_EQ(parse("1,-1,2"), (std::vector<int>{1}));  // negative
  EXPECT_EQ(parse("4,x,2"), (std::vector<int>{4}));   // garbage
  EXPECT_EQ(parse("4,,2"), (std::vector<int>{4}));    // empty entry
  EXPECT_EQ(parse("-1"), (std::vector<int>{}));
  EXPECT_EQ(parse("99999999999999999999,1"), (std::vector<int>{}));  // huge, no overflow
  const VisibleDevices v = parse_visible_devices("1,16", uuids(16));
  EXPECT_NE(v.stopped.find("out of range"), std::string::npos) << v.stopped;
}

TEST(VisibleDevices, LeadingDigitsCountAsStrtoulReadsThem) {
  EXPECT_EQ(parse("1gpu2,3"), (std::vector<int>{1, 3}));
}

TEST(VisibleDevices, ARepeatedGpuLeavesNone) {
  const VisibleDevices v = parse_visible_devices("0,1,0", uuids(4));
  EXPECT_TRUE(v.gpus.empty());
  EXPECT_NE(v.stopped.find("twice"), std::string::npos) << v.stopped;
  // Also when named once by ordinal and once by UUID.
  EXPECT_TRUE(parse_visible_devices("2," + uuids(4)[2], uuids(4)).gpus.empty());
}

TEST(VisibleDevices, UuidsAndTheirUniquePrefixes) {
  const auto u = uuids(16);
  EXPECT_EQ(parse_visible_devices(u[9] + "," + u[3], u).gpus, (std::vector<int>{9, 3}));
  // A prefix naming one GPU is enough; one naming several ends the list, as an unknown one.
  EXPECT_EQ(parse_visible_devices(u[12].substr(0, u[12].size() - 1) + ",0", u).gpus, (std::vector<int>{12, 0}));
  EXPECT_EQ(parse_visible_devices("1,GPU-76677075", u).gpus, (std::vector<int>{1}));
  EXPECT_EQ(parse_visible_devices("1,GPU-ffff,2", u).gpus, (std::vector<int>{1}));
  // Ordinals and UUIDs mix.
  EXPECT_EQ(parse_visible_devices("5," + u[6], u).gpus, (std::vector<int>{5, 6}));
}

TEST(VisibleDevices, FromTheEnvironment) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_FALSE(visible_devices_from_env(uuids(4), "test").has_value());
  setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
  auto v = visible_devices_from_env(uuids(4), "test");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->gpus, (std::vector<int>{2, 0}));
  unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace vgpu
