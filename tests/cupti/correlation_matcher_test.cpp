// The join of CUPTI's external-correlation records with its op records, fed synthetic records in
// every order the real CUPTI may produce.
#include "cupti_profiler/correlation_matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

namespace vgpu::cupti {

// For EXPECT_EQ (found by ADL, so beside Completed).
static bool operator==(const Completed& a, const Completed& b) {
  return std::tie(a.tag, a.kind, a.start_ns, a.end_ns) == std::tie(b.tag, b.kind, b.start_ns, b.end_ns);
}

namespace {

TEST(CorrelationMatcher, TagBeforeOpMatchesWhenTheOpArrives) {
  CorrelationMatcher m;
  std::vector<Completed> out;
  m.on_tag(7, 1001, out);
  EXPECT_TRUE(out.empty());
  m.on_op(7, OpKind::kernel, 100, 250, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], (Completed{1001, OpKind::kernel, 100, 250}));
  EXPECT_EQ(m.pending_ops(), 0u);
}

TEST(CorrelationMatcher, OpBeforeTagWaitsForTheTag) {
  CorrelationMatcher m;
  std::vector<Completed> out;
  m.on_op(9, OpKind::memcpy, 10, 20, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.pending_ops(), 1u);
  m.on_op(10, OpKind::memset, 30, 40, out);  // another call, tag still unknown
  m.on_tag(9, 55, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], (Completed{55, OpKind::memcpy, 10, 20}));
  EXPECT_EQ(m.pending_ops(), 1u);
  m.on_tag(10, 56, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1], (Completed{56, OpKind::memset, 30, 40}));
  EXPECT_EQ(m.pending_ops(), 0u);
}

TEST(CorrelationMatcher, OneCallWithSeveralOpsReportsEachUnderTheTag) {
  // A graph launch or a copy the driver split: several op records share one correlation id, some
  // before the tag and some after.
  CorrelationMatcher m;
  std::vector<Completed> out;
  m.on_op(3, OpKind::kernel, 1, 2, out);
  m.on_op(3, OpKind::kernel, 3, 4, out);
  m.on_tag(3, 77, out);
  m.on_op(3, OpKind::memset, 5, 6, out);
  ASSERT_EQ(out.size(), 3u);
  for (const Completed& c : out) EXPECT_EQ(c.tag, 77u);
  EXPECT_EQ(out[2], (Completed{77, OpKind::memset, 5, 6}));
}

TEST(CorrelationMatcher, OpsThatNeverMeetATagAgeOutOfTheWindow) {
  CorrelationMatcher m(4);
  std::vector<Completed> out;
  for (uint32_t c = 1; c <= 10; ++c) m.on_op(c, OpKind::kernel, c, c + 1, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.pending_ops(), 4u);  // bounded
  EXPECT_EQ(m.untagged_dropped(), 6u);
  // The newest four are still waiting; the oldest are gone.
  m.on_tag(1, 500, out);
  EXPECT_TRUE(out.empty());
  m.on_tag(10, 510, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 510u);
}

TEST(CorrelationMatcher, TagsAreBoundedToo) {
  CorrelationMatcher m(3);
  std::vector<Completed> out;
  for (uint32_t c = 1; c <= 5; ++c) m.on_tag(c, 100 + c, out);
  EXPECT_EQ(m.known_tags(), 3u);
  m.on_op(1, OpKind::kernel, 1, 2, out);  // its tag was forgotten: waits
  EXPECT_TRUE(out.empty());
  m.on_op(5, OpKind::kernel, 1, 2, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tag, 105u);
}

TEST(CorrelationMatcher, MatchedIdsDoNotGrowTheWaitingList) {
  // Ops that wait briefly and then match leave their id in the eviction order; that order must
  // stay bounded and must not evict a later, still-waiting op early.
  CorrelationMatcher m(8);
  std::vector<Completed> out;
  for (uint32_t c = 1; c <= 1000; ++c) {
    m.on_op(c, OpKind::kernel, c, c + 1, out);
    m.on_tag(c, c, out);
  }
  EXPECT_EQ(out.size(), 1000u);
  EXPECT_EQ(m.pending_ops(), 0u);
  EXPECT_EQ(m.untagged_dropped(), 0u);
  m.on_op(2000, OpKind::memcpy, 1, 2, out);
  m.on_tag(2000, 9, out);
  EXPECT_EQ(out.size(), 1001u);
}

TEST(CorrelationMatcher, TheOpsStreamIsPassedOn) {
  CorrelationMatcher m;
  std::vector<Completed> out;
  m.on_op(1, OpKind::memcpy, 1, 2, out, 21);
  m.on_tag(1, 5, out);
  m.on_tag(2, 6, out);
  m.on_op(2, OpKind::kernel, 3, 4, out, 22);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].stream_id, 21u);
  EXPECT_EQ(out[1].stream_id, 22u);
}

TEST(CorrelationMatcher, ClaimedOpsCountTheirTagAsADuplicate) {
  // A kernel delivered by stream order whose driver call was also tagged: the tag record may
  // come before or after; either way nothing more is delivered and it is counted once.
  CorrelationMatcher m(4);
  std::vector<Completed> out;
  m.on_tag(1, 10, out);
  m.claim(1);
  m.claim(1);  // a second op of the same call: still one duplicate
  EXPECT_EQ(m.duplicates(), 1u);
  m.claim(2);
  EXPECT_EQ(m.duplicates(), 1u);
  m.on_tag(2, 20, out);
  m.on_tag(2, 20, out);
  EXPECT_EQ(m.duplicates(), 2u);
  m.claim(3);  // never tagged (a runtime launch): no duplicate
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.pending_ops(), 0u);
  EXPECT_EQ(m.duplicates(), 2u);
  // Claims are bounded by the window too.
  for (uint32_t c = 100; c < 200; ++c) m.claim(c);
  m.on_tag(100, 1, out);
  EXPECT_EQ(m.duplicates(), 2u);
  m.on_tag(199, 1, out);
  EXPECT_EQ(m.duplicates(), 3u);
}

TEST(CorrelationMatcher, EveryInterleavingOfManyCallsMatchesEachOpOnce) {
  // Calls c = 1..N, each with one tag record and 1..3 op records, shuffled (as if spread over
  // buffers in any order), plus untagged ops. Each tagged op comes out exactly once, with its tag.
  struct Event {
    bool is_tag;
    uint32_t correlation;
    uint64_t tag;
    uint64_t start;
  };
  std::mt19937 rng(12345);
  for (int round = 0; round < 50; ++round) {
    std::vector<Event> events;
    std::multiset<std::pair<uint64_t, uint64_t>> expected;  // (tag, start)
    const uint32_t calls = 200;
    uint64_t start = 1;
    size_t untagged_ops = 0;
    for (uint32_t c = 1; c <= calls; ++c) {
      bool tagged = (c % 5) != 0;
      uint64_t tag = 1000000 + c * 3;
      if (tagged) events.push_back({true, c, tag, 0});
      int ops = 1 + static_cast<int>(c % 3);
      for (int k = 0; k < ops; ++k) {
        events.push_back({false, c, 0, start});
        if (tagged) {
          expected.insert({tag, start});
        } else {
          ++untagged_ops;
        }
        ++start;
      }
    }
    std::shuffle(events.begin(), events.end(), rng);

    CorrelationMatcher m(1024);
    std::vector<Completed> out;
    for (const Event& e : events) {
      if (e.is_tag) {
        m.on_tag(e.correlation, e.tag, out);
      } else {
        m.on_op(e.correlation, OpKind::kernel, e.start, e.start + 10, out);
      }
    }
    std::multiset<std::pair<uint64_t, uint64_t>> got;
    for (const Completed& c : out) {
      EXPECT_EQ(c.end_ns, c.start_ns + 10);
      got.insert({c.tag, c.start_ns});
    }
    ASSERT_EQ(got, expected) << "round " << round;
    // The untagged calls' ops are still waiting (the window is larger than the run).
    EXPECT_EQ(m.pending_ops(), untagged_ops);
  }
}

}  // namespace
}  // namespace vgpu::cupti
