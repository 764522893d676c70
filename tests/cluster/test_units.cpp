// Quantities with units: capacities, bandwidths (bits vs bytes), latencies.
#include <gtest/gtest.h>

#include "simcore/cluster_config.h"

namespace simcore {
namespace {

TEST(Units, Capacities) {
  EXPECT_EQ(parse_bytes("80GiB"), 80ull << 30);
  EXPECT_EQ(parse_bytes("80 GiB"), 80ull << 30);
  EXPECT_EQ(parse_bytes("80GB"), 80'000'000'000ull);
  EXPECT_EQ(parse_bytes("141 GB"), 141'000'000'000ull);
  EXPECT_EQ(parse_bytes("512mib"), 512ull << 20);
  EXPECT_EQ(parse_bytes("1.5 TiB"), 3ull << 39);
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("4096 B"), 4096u);
  for (const char* bad : {"", "GiB", "80 G", "80 gigs", "-1GiB", "80GiB/s", "eighty"})
    EXPECT_FALSE(parse_bytes(bad)) << bad;
}

TEST(Units, BandwidthsTellBitsFromBytes) {
  EXPECT_DOUBLE_EQ(*parse_bandwidth("400Gb/s"), 50e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("400 Gbps"), 50e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("450GB/s"), 450e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("25 GiB/s"), 25.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(*parse_bandwidth("1.6Tb/s"), 200e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("100 MB/s"), 100e6);
  for (const char* bad : {"", "fast", "450GB", "450", "450 G/s", "450GB/h"})
    EXPECT_FALSE(parse_bandwidth(bad)) << bad;
}

TEST(Units, Durations) {
  EXPECT_DOUBLE_EQ(*parse_duration("1.5us"), 1.5e-6);
  EXPECT_DOUBLE_EQ(*parse_duration("1 us"), 1e-6);
  EXPECT_DOUBLE_EQ(*parse_duration("1\xC2\xB5s"), 1e-6);
  EXPECT_DOUBLE_EQ(*parse_duration("500ns"), 500e-9);
  EXPECT_DOUBLE_EQ(*parse_duration("2ms"), 2e-3);
  EXPECT_DOUBLE_EQ(*parse_duration("0s"), 0);
  for (const char* bad : {"", "1", "1 minute", "us", "-1us", "1 US"})
    EXPECT_FALSE(parse_duration(bad)) << bad;
}

}  // namespace
}  // namespace simcore
