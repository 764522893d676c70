// The cache of CUPTI stream ids, with a scripted resolver in CUPTI's place: special handles,
// per-thread default streams, forgetting, failures and its bound.
#include "stream_id_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

namespace vgpu::cupti {
namespace {

void* h(uintptr_t v) { return reinterpret_cast<void*>(v); }

// Plays CUPTI: numbers each distinct (context, stream, per-thread, thread when per-thread) in the
// order asked, and records the questions.
struct FakeCupti {
  std::mutex mutex;
  std::map<std::tuple<void*, void*, bool, std::thread::id>, uint32_t> ids;
  std::vector<std::tuple<void*, void*, bool>> asked;
  bool fail = false;
  uint32_t numbered = 0;

  StreamIdCache::Resolve resolver() {
    return [this](void* ctx, void* stream, bool per_thread, StreamKey* out) {
      std::lock_guard lock(mutex);
      asked.emplace_back(ctx, stream, per_thread);
      if (fail) return false;
      auto key = std::make_tuple(ctx, stream, per_thread,
                                 per_thread ? std::this_thread::get_id() : std::thread::id());
      auto [it, inserted] = ids.try_emplace(key, numbered + 1);
      if (inserted) ++numbered;
      *out = {uint32_t(reinterpret_cast<uintptr_t>(ctx)), it->second};
      return true;
    };
  }
  void forget(void* ctx, void* stream) {  // the driver destroyed it; the handle may come back
    std::lock_guard lock(mutex);
    std::erase_if(ids, [&](const auto& kv) {
      return std::get<0>(kv.first) == ctx && std::get<1>(kv.first) == stream;
    });
  }
};

StreamKey look(StreamIdCache& c, void* ctx, void* stream, bool ptd = false) {
  StreamKey k{0, 0};
  EXPECT_TRUE(c.lookup(ctx, stream, ptd, &k));
  return k;
}

TEST(StreamIdCache, SpecialHandlesAreAskedAsTheStreamsTheyName) {
  FakeCupti cupti;
  StreamIdCache cache(cupti.resolver());
  void* ctx = h(0x10);
  StreamKey legacy = look(cache, ctx, nullptr);
  EXPECT_EQ(look(cache, ctx, h(1)).stream_id, legacy.stream_id);  // CU_STREAM_LEGACY
  StreamKey per_thread = look(cache, ctx, h(2));                  // CU_STREAM_PER_THREAD
  EXPECT_EQ(look(cache, ctx, nullptr, true).stream_id, per_thread.stream_id);  // 0 under _ptsz
  EXPECT_NE(per_thread.stream_id, legacy.stream_id);
  // _ptsz with a real handle is just that stream.
  StreamKey real = look(cache, ctx, h(0x500), true);
  EXPECT_EQ(look(cache, ctx, h(0x500)).stream_id, real.stream_id);
  EXPECT_EQ(real.context_id, 0x10u);

  // CUPTI was asked with NULL and the per-thread flag, never with the special handles, and
  // once per stream.
  ASSERT_EQ(cupti.asked.size(), 3u);
  EXPECT_EQ(cupti.asked[0], std::make_tuple(ctx, static_cast<void*>(nullptr), false));
  EXPECT_EQ(cupti.asked[1], std::make_tuple(ctx, static_cast<void*>(nullptr), true));
  EXPECT_EQ(cupti.asked[2], std::make_tuple(ctx, h(0x500), false));
  EXPECT_EQ(cache.resolutions(), 3u);
}

TEST(StreamIdCache, NullStreamsArePerContext) {
  FakeCupti cupti;
  StreamIdCache cache(cupti.resolver());
  StreamKey a = look(cache, h(0x10), nullptr);
  StreamKey b = look(cache, h(0x20), nullptr);
  EXPECT_NE(a.packed(), b.packed());
  StreamKey pa = look(cache, h(0x10), nullptr, true);
  StreamKey pb = look(cache, h(0x20), nullptr, true);
  EXPECT_NE(pa.packed(), pb.packed());
  EXPECT_EQ(cache.resolutions(), 4u);
}

TEST(StreamIdCache, PerThreadDefaultStreamsAreAskedOnEachThread) {
  FakeCupti cupti;
  StreamIdCache cache(cupti.resolver());
  void* ctx = h(0x10);
  StreamKey mine = look(cache, ctx, nullptr, true);
  StreamKey other, other_again;
  std::thread t([&] {
    other = look(cache, ctx, h(2));
    other_again = look(cache, ctx, nullptr, true);
  });
  t.join();
  EXPECT_NE(mine.stream_id, other.stream_id);
  EXPECT_EQ(other.stream_id, other_again.stream_id);
  EXPECT_EQ(look(cache, ctx, nullptr, true).stream_id, mine.stream_id);
  EXPECT_EQ(cache.resolutions(), 2u);
  // A second cache does not see the first one's per-thread answers.
  StreamIdCache second(cupti.resolver());
  look(second, ctx, nullptr, true);
  EXPECT_EQ(second.resolutions(), 1u);
}

TEST(StreamIdCache, ForgetStreamAndForgetContextAskAgain) {
  FakeCupti cupti;
  StreamIdCache cache(cupti.resolver());
  void* ctx = h(0x10);
  StreamKey s = look(cache, ctx, h(0x500));
  cupti.forget(ctx, h(0x500));  // cuStreamDestroy; cuStreamCreate returns the same handle
  EXPECT_EQ(look(cache, ctx, h(0x500)).stream_id, s.stream_id) << "remembered until forgotten";
  cache.forget_stream(nullptr, h(0x500));  // whatever context is named
  StreamKey again = look(cache, ctx, h(0x500));
  EXPECT_NE(again.stream_id, s.stream_id);
  cache.forget_stream(ctx, nullptr);  // special handles: nothing to forget
  cache.forget_stream(ctx, h(1));

  StreamKey null_stream = look(cache, ctx, nullptr);
  StreamKey per_thread = look(cache, ctx, nullptr, true);
  const uint64_t asked = cache.resolutions();
  cupti.forget(ctx, nullptr);
  cache.forget_context(ctx);
  EXPECT_NE(look(cache, ctx, nullptr).stream_id, null_stream.stream_id);
  look(cache, ctx, nullptr, true);
  EXPECT_EQ(cache.resolutions(), asked + 2);
  (void)per_thread;
}

TEST(StreamIdCache, FailuresAreNotRemembered) {
  FakeCupti cupti;
  StreamIdCache cache(cupti.resolver());
  cupti.fail = true;
  StreamKey k;
  EXPECT_FALSE(cache.lookup(h(0x10), h(0x500), false, &k));
  EXPECT_FALSE(cache.lookup(h(0x10), nullptr, true, &k));
  cupti.fail = false;
  EXPECT_TRUE(cache.lookup(h(0x10), h(0x500), false, &k));
  EXPECT_TRUE(cache.lookup(h(0x10), nullptr, true, &k));
  EXPECT_EQ(cache.resolutions(), 4u);

  StreamIdCache throwing([](void*, void*, bool, StreamKey*) -> bool { throw 1; });
  EXPECT_FALSE(throwing.lookup(h(0x10), h(0x500), false, &k));
}

TEST(StreamIdCache, StaysWithinItsCapacity) {
  FakeCupti cupti;
  StreamIdCache cache(cupti.resolver(), 8);
  for (uintptr_t s = 1; s <= 100; ++s) {
    look(cache, h(0x10), h(0x1000 + s));
    ASSERT_LE(cache.size(), 8u);
  }
  // Still answers correctly after a reset.
  StreamKey a = look(cache, h(0x10), h(0x1001));
  EXPECT_EQ(a.stream_id, 1u);
}

TEST(StreamIdCache, ConcurrentLookupsAgree) {
  FakeCupti cupti;
  StreamIdCache cache(cupti.resolver(), 64);
  std::vector<std::thread> threads;
  std::mutex m;
  std::map<uintptr_t, std::set<uint32_t>> seen;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        uintptr_t s = 0x1000 + (i * 7 + t) % 40;
        StreamKey k = look(cache, h(0x10), h(s));
        if (i % 100 == 0) cache.forget_context(h(0x20));
        std::lock_guard lock(m);
        seen[s].insert(k.stream_id);
      }
    });
  for (auto& t : threads) t.join();
  for (auto& [s, ids] : seen) EXPECT_EQ(ids.size(), 1u) << s;
}

}  // namespace
}  // namespace vgpu::cupti
