// The stream-order join of announced launches and kernel records, fed synthetic records: in
// order, streams interleaved, unannounced kernels, overtaken and cancelled announcements, and
// bounded memory.
#include "cupti_profiler/stream_order_matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace vgpu::cupti {
namespace {

KernelShape shape(std::string_view name, uint32_t grid_x = 1, uint32_t block_x = 1) {
  KernelShape s;
  s.name_hash = kernel_name_hash(name);
  s.grid[0] = grid_x;
  s.block[0] = block_x;
  return s;
}

constexpr StreamKey kS1{1, 7}, kS2{1, 8}, kOtherContextS1{2, 7};

TEST(KernelShape, NameGridAndBlockMustAgreeAnUnknownNameMatchesAny) {
  EXPECT_TRUE(shape("_Z1av", 2, 64).matches(shape("_Z1av", 2, 64)));
  EXPECT_FALSE(shape("_Z1av", 2, 64).matches(shape("_Z1bv", 2, 64)));
  EXPECT_FALSE(shape("_Z1av", 2, 64).matches(shape("_Z1av", 3, 64)));
  EXPECT_FALSE(shape("_Z1av", 2, 64).matches(shape("_Z1av", 2, 32)));
  KernelShape z = shape("_Z1av");
  z.grid[2] = 4;
  EXPECT_FALSE(z.matches(shape("_Z1av")));
  EXPECT_TRUE(shape("", 2, 64).matches(shape("_Z1bv", 2, 64)));
  EXPECT_EQ(kernel_name_hash(""), 0u);
  EXPECT_NE(kernel_name_hash("_Z1av"), 0u);
}

TEST(StreamOrderMatcher, RecordsInLaunchOrderMatchTheirAnnouncements) {
  StreamOrderMatcher m;
  std::vector<Completed> out;
  for (uint64_t t = 1; t <= 5; ++t) m.expect(kS1, shape("_Z1kv", uint32_t(t)), 100 + t);
  EXPECT_EQ(m.pending(), 5u);
  for (uint64_t t = 1; t <= 5; ++t)
    EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1kv", uint32_t(t)), 10 * t, 10 * t + 3, out));
  ASSERT_EQ(out.size(), 5u);
  for (uint64_t t = 1; t <= 5; ++t) {
    EXPECT_EQ(out[t - 1].tag, 100 + t);
    EXPECT_EQ(out[t - 1].kind, OpKind::kernel);
    EXPECT_EQ(out[t - 1].start_ns, 10 * t);
    EXPECT_EQ(out[t - 1].end_ns, 10 * t + 3);
    EXPECT_EQ(out[t - 1].stream_id, 7u);
  }
  EXPECT_EQ(m.pending(), 0u);
  EXPECT_EQ(m.streams(), 0u);  // empty streams are not kept
  EXPECT_EQ(m.matched(), 5u);
  EXPECT_EQ(m.dropped(), 0u);
}

TEST(StreamOrderMatcher, IdenticalKernelsOnSeveralStreamsAreToldApartByStream) {
  // Every launch has the same shape; streams (and contexts, whose stream ids repeat) are
  // interleaved at random in the records, each stream's own order kept.
  std::mt19937 rng(7);
  const StreamKey streams[] = {kS1, kS2, kOtherContextS1, {3, 13}};
  for (int round = 0; round < 20; ++round) {
    StreamOrderMatcher m;
    std::map<uint64_t, std::vector<uint64_t>> tags_of;  // stream -> tags in launch order
    uint64_t tag = 0;
    for (int i = 0; i < 200; ++i) {
      const StreamKey s = streams[rng() % 4];
      m.expect(s, shape("_Z1kv", 4, 128), ++tag);
      tags_of[s.packed()].push_back(tag);
    }
    // Records: pick a random stream with launches left, take its next one.
    std::map<uint64_t, size_t> next;
    std::vector<Completed> out;
    std::map<uint64_t, uint64_t> expected;  // start -> tag
    uint64_t start = 0;
    for (size_t left = 200; left > 0; --left) {
      StreamKey s;
      do s = streams[rng() % 4];
      while (next[s.packed()] >= tags_of[s.packed()].size());
      expected[++start] = tags_of[s.packed()][next[s.packed()]++];
      ASSERT_TRUE(m.on_kernel(s, shape("_Z1kv", 4, 128), start, start + 1, out));
    }
    ASSERT_EQ(out.size(), 200u);
    for (const Completed& c : out) EXPECT_EQ(c.tag, expected[c.start_ns]) << "round " << round;
    EXPECT_EQ(m.pending(), 0u);
    EXPECT_EQ(m.dropped(), 0u);
  }
}

TEST(StreamOrderMatcher, UnannouncedRecordsAreSkippedAndNotKept) {
  StreamOrderMatcher m;
  std::vector<Completed> out;
  EXPECT_FALSE(m.on_kernel(kS1, shape("_Z1av"), 1, 2, out));  // nothing announced anywhere
  m.expect(kS1, shape("_Z1av"), 1);
  EXPECT_FALSE(m.on_kernel(kS1, shape("_Z1bv"), 3, 4, out));  // another kernel
  EXPECT_FALSE(m.on_kernel(kS2, shape("_Z1av"), 3, 4, out));  // another stream
  EXPECT_FALSE(m.on_kernel(kOtherContextS1, shape("_Z1av"), 3, 4, out));  // another context
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.unannounced(), 4u);
  EXPECT_EQ(m.pending(), 1u);
  EXPECT_EQ(m.streams(), 1u);
  // A record that matched nothing is not remembered: a later announcement does not take it.
  m.expect(kS2, shape("_Z1av"), 2);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1av"), 5, 6, out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 1u);
  EXPECT_EQ(m.dropped(), 0u);
}

TEST(StreamOrderMatcher, StrictlyOvertakenAnnouncementsAreDropped) {
  StreamOrderMatcher::Limits limits;
  limits.overtake_tolerance = 0;
  StreamOrderMatcher m(limits);
  std::vector<Completed> out;
  m.expect(kS1, shape("_Z1av"), 1);
  m.expect(kS1, shape("_Z1bv"), 2);
  m.expect(kS1, shape("_Z1cv"), 3);
  m.expect(kS1, shape("_Z1dv"), 4);
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1cv"), 1, 2, out));  // a and b never ran
  EXPECT_EQ(m.dropped(), 2u);
  EXPECT_EQ(m.pending(), 1u);
  EXPECT_FALSE(m.on_kernel(kS1, shape("_Z1av"), 3, 4, out));  // too late: gone
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1dv"), 5, 6, out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].tag, 3u);
  EXPECT_EQ(out[1].tag, 4u);
  EXPECT_EQ(m.pending(), 0u);
}

TEST(StreamOrderMatcher, OvertakingWithinTheToleranceStillMatches) {
  StreamOrderMatcher::Limits limits;
  limits.overtake_tolerance = 2;
  StreamOrderMatcher m(limits);
  std::vector<Completed> out;
  m.expect(kS1, shape("_Z1av"), 1);
  m.expect(kS1, shape("_Z1bv"), 2);
  m.expect(kS1, shape("_Z1cv"), 3);
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1bv"), 1, 2, out));  // overtakes a once
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1av"), 3, 4, out));  // late, still known
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].tag, 2u);
  EXPECT_EQ(out[1].tag, 1u);
  // c is overtaken three times: dropped at the third.
  m.expect(kS1, shape("_Z1dv"), 4);
  m.expect(kS1, shape("_Z1dv"), 5);
  m.expect(kS1, shape("_Z1dv"), 6);
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1dv"), 5, 6, out));
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1dv"), 7, 8, out));
  EXPECT_EQ(m.dropped(), 0u);
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1dv"), 9, 10, out));
  EXPECT_EQ(m.dropped(), 1u);
  EXPECT_EQ(m.pending(), 0u);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[4].tag, 6u);
}

TEST(StreamOrderMatcher, CancelForgetsTheNewestAnnouncementOfTheTag) {
  StreamOrderMatcher m;
  std::vector<Completed> out;
  m.expect(kS1, shape("_Z1av"), 1);
  m.expect(kS1, shape("_Z1av"), 2);
  EXPECT_FALSE(m.cancel(kS2, 2));
  EXPECT_FALSE(m.cancel(kS1, 99));
  EXPECT_TRUE(m.cancel(kS1, 1));
  EXPECT_EQ(m.pending(), 1u);
  EXPECT_TRUE(m.on_kernel(kS1, shape("_Z1av"), 1, 2, out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 2u);
  EXPECT_TRUE(m.cancel(kS1, 2) == false);
  EXPECT_EQ(m.streams(), 0u);
}

TEST(StreamOrderMatcher, OnlyTheFirstScanAnnouncementsAreLookedAt) {
  StreamOrderMatcher::Limits limits;
  limits.scan = 4;
  StreamOrderMatcher m(limits);
  std::vector<Completed> out;
  for (uint64_t t = 1; t <= 10; ++t) m.expect(kS1, shape("_Z1av"), t);
  m.expect(kS1, shape("_Z1bv"), 11);
  EXPECT_FALSE(m.on_kernel(kS1, shape("_Z1bv"), 1, 2, out));  // beyond the scan: unannounced
  EXPECT_EQ(m.unannounced(), 1u);
  EXPECT_EQ(m.dropped(), 0u);  // and it overtook nothing
  EXPECT_EQ(m.pending(), 11u);
}

TEST(StreamOrderMatcher, AnnouncementsThatNeverCompleteAgeOut) {
  // Launches on a stream whose kernels never report (lost records, a capture) must not grow
  // memory: each waits through `window` later announcements at most, and streams nobody
  // reports on again are swept.
  StreamOrderMatcher::Limits limits;
  limits.window = 16;
  StreamOrderMatcher m(limits);
  std::vector<Completed> out;
  for (uint64_t t = 1; t <= 1000; ++t) {
    m.expect(StreamKey{1, uint32_t(t % 50)}, shape("_Z1av"), t);  // 50 dead streams
    ASSERT_LE(m.pending(), 2 * limits.window);
  }
  EXPECT_EQ(m.pending() + m.dropped(), 1000u);
  EXPECT_LE(m.streams(), 2 * limits.window);
  // A live stream meanwhile: an announcement older than the window no longer matches.
  m.expect(kS2, shape("_Z1bv"), 2000);
  for (uint64_t t = 1; t <= 16; ++t) m.expect(StreamKey{9, 9}, shape("_Z1av"), 3000 + t);
  EXPECT_FALSE(m.on_kernel(kS2, shape("_Z1bv"), 1, 2, out));
  m.expect(kS2, shape("_Z1bv"), 2001);
  EXPECT_TRUE(m.on_kernel(kS2, shape("_Z1bv"), 3, 4, out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 2001u);
}

}  // namespace
}  // namespace vgpu::cupti
