// The Recorder end to end over a fake libcupti (fake_cupti.cpp): tags pushed around driver calls
// come back with the ops' times, in any record order, from several threads at once; CUPTI's
// process-wide callbacks survive recorders coming and going; failures give nullptr.
#include "cupti_profiler/recorder.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#ifndef FAKE_CUPTI_PATH
#error "FAKE_CUPTI_PATH must name the fake libcupti built beside this test"
#endif

namespace vgpu::cupti {
namespace {

struct Hooks {
  uint32_t (*op)(int kind, uint64_t start, uint64_t end, int order);
  void (*release)();
  void (*deliver)();
  void (*fail_enable)(int kind);
  void (*set_dropped)(size_t n);
  int (*enabled_count)();
  uint32_t (*flush_period)();
};
enum { kNow = 0, kOpLater = 1, kTagLater = 2 };

const Hooks& hooks() {
  static Hooks h = [] {
    void* lib = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error(dlerror());
    Hooks x{};
    x.op = reinterpret_cast<decltype(x.op)>(dlsym(lib, "fake_cupti_op"));
    x.release = reinterpret_cast<decltype(x.release)>(dlsym(lib, "fake_cupti_release"));
    x.deliver = reinterpret_cast<decltype(x.deliver)>(dlsym(lib, "fake_cupti_deliver"));
    x.fail_enable = reinterpret_cast<decltype(x.fail_enable)>(dlsym(lib, "fake_cupti_fail_enable"));
    x.set_dropped = reinterpret_cast<decltype(x.set_dropped)>(dlsym(lib, "fake_cupti_set_dropped"));
    x.enabled_count = reinterpret_cast<decltype(x.enabled_count)>(dlsym(lib, "fake_cupti_enabled_count"));
    x.flush_period = reinterpret_cast<decltype(x.flush_period)>(dlsym(lib, "fake_cupti_flush_period"));
    return x;
  }();
  return h;
}

// Collects what the sink receives.
struct Collected {
  std::mutex mutex;
  std::vector<Completed> all;
  void add(const Completed& c) {
    std::lock_guard lock(mutex);
    all.push_back(c);
  }
  std::vector<Completed> get() {
    std::lock_guard lock(mutex);
    return all;
  }
};

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("VGPU_CUPTI_LIBRARY", FAKE_CUPTI_PATH, 1);
    ASSERT_NE(hooks().op, nullptr);
    hooks().fail_enable(-1);
  }
  std::unique_ptr<Recorder> start_collecting(Collected& into, RecorderOptions o = {}) {
    auto r = Recorder::start(o);
    if (r) r->set_sink([&into](const Completed& c) { into.add(c); });
    return r;
  }
};

TEST_F(RecorderTest, TaggedOpsComeBackWithTheirTimesAndUntaggedOnesDoNot) {
  Collected got;
  auto rec = start_collecting(got);
  ASSERT_NE(rec, nullptr);
  EXPECT_NE(rec->library_path().find("fake"), std::string::npos) << rec->library_path();

  rec->begin_op(101);
  hooks().op(0, 1000, 5000, kNow);
  rec->end_op();
  hooks().op(0, 6000, 7000, kNow);  // a call outside begin_op/end_op
  rec->begin_op(102);
  hooks().op(1, 8000, 9500, kNow);
  rec->end_op();
  rec->begin_op(103);
  hooks().op(2, 10000, 10400, kNow);
  rec->end_op();
  rec->flush();

  auto all = got.get();
  ASSERT_EQ(all.size(), 3u);
  std::map<uint64_t, Completed> by_tag;
  for (const Completed& c : all) by_tag[c.tag] = c;
  EXPECT_EQ(by_tag[101].kind, OpKind::kernel);
  EXPECT_EQ(by_tag[101].end_ns - by_tag[101].start_ns, 4000u);
  EXPECT_EQ(by_tag[102].kind, OpKind::memcpy);
  EXPECT_EQ(by_tag[102].end_ns - by_tag[102].start_ns, 1500u);
  EXPECT_EQ(by_tag[103].kind, OpKind::memset);
  EXPECT_EQ(by_tag[103].start_ns, 10000u);
  RecorderStats s = rec->stats();
  EXPECT_EQ(s.delivered, 3u);
  EXPECT_GE(s.buffers, 1u);
}

TEST_F(RecorderTest, RecordsInEitherOrderAcrossBuffers) {
  Collected got;
  auto rec = start_collecting(got);
  ASSERT_NE(rec, nullptr);
  rec->begin_op(201);
  hooks().op(0, 1, 11, kOpLater);  // tag now, op in a later buffer
  rec->end_op();
  rec->begin_op(202);
  hooks().op(1, 2, 22, kTagLater);  // op now, tag in a later buffer
  rec->end_op();
  rec->flush();
  EXPECT_EQ(got.get().size(), 0u);
  hooks().release();
  rec->flush();
  auto all = got.get();
  ASSERT_EQ(all.size(), 2u);
  std::map<uint64_t, uint64_t> duration;
  for (const Completed& c : all) duration[c.tag] = c.end_ns - c.start_ns;
  EXPECT_EQ(duration[201], 10u);
  EXPECT_EQ(duration[202], 20u);
}

TEST_F(RecorderTest, NestedBracketsTagWithTheInnermost) {
  Collected got;
  auto rec = start_collecting(got);
  ASSERT_NE(rec, nullptr);
  rec->begin_op(1);
  rec->begin_op(2);
  hooks().op(0, 1, 2, kNow);
  rec->end_op();
  hooks().op(0, 3, 4, kNow);
  rec->end_op();
  rec->end_op();  // one too many: logged, not fatal
  rec->flush();
  auto all = got.get();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].tag, 2u);
  EXPECT_EQ(all[1].tag, 1u);
}

TEST_F(RecorderTest, OneRecorderAtATimeAndAnotherAfterIt) {
  Collected got;
  {
    auto first = start_collecting(got);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(Recorder::start(), nullptr);  // CUPTI's callbacks are taken
  }
  EXPECT_EQ(hooks().enabled_count(), 0);  // the destructor disabled its kinds
  auto second = start_collecting(got);
  ASSERT_NE(second, nullptr);
  second->begin_op(7);
  hooks().op(0, 5, 9, kNow);
  second->end_op();
  second->flush();
  ASSERT_EQ(got.get().size(), 1u);
  EXPECT_EQ(got.get()[0].tag, 7u);
}

TEST_F(RecorderTest, AFailedEnableGivesNullptrAndLeavesNothingEnabled) {
  hooks().fail_enable(2);  // CUPTI_ACTIVITY_KIND_MEMSET
  EXPECT_EQ(Recorder::start(), nullptr);
  EXPECT_EQ(hooks().enabled_count(), 0);
  hooks().fail_enable(-1);
  Collected got;
  EXPECT_NE(start_collecting(got), nullptr);  // the slot was released
}

TEST_F(RecorderTest, ConcurrentKernelFallsBackToKernel) {
  hooks().fail_enable(10);  // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  Collected got;
  auto rec = start_collecting(got);
  ASSERT_NE(rec, nullptr);
  rec->begin_op(5);
  hooks().op(0, 100, 300, kNow);
  rec->end_op();
  rec->flush();
  ASSERT_EQ(got.get().size(), 1u);
  EXPECT_EQ(got.get()[0].kind, OpKind::kernel);
}

TEST_F(RecorderTest, OptionsReachCupti) {
  RecorderOptions o;
  o.flush_period_ms = 25;
  Collected got;
  auto rec = start_collecting(got, o);
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(hooks().flush_period(), 25u);
  // kernel, memcpy, memset, external correlation, memcpy2, driver
  EXPECT_EQ(hooks().enabled_count(), 6);
}

TEST_F(RecorderTest, WithoutDriverApiRecordsOpsWaitForTagsThatNeverCome) {
  // What the H100 showed (tests/gpu/cupti_check): the default must keep driver API records on.
  RecorderOptions o;
  o.driver_api_records = false;
  Collected got;
  auto rec = start_collecting(got, o);
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(hooks().enabled_count(), 5);
  rec->begin_op(1);
  hooks().op(0, 1, 2, kNow);
  rec->end_op();
  rec->flush();
  EXPECT_TRUE(got.get().empty());
  EXPECT_EQ(rec->stats().pending, 1u);
}

TEST_F(RecorderTest, AThrowingSinkDoesNotStopDelivery) {
  auto rec = Recorder::start();
  ASSERT_NE(rec, nullptr);
  std::atomic<int> calls{0};
  rec->set_sink([&](const Completed&) {
    ++calls;
    throw std::runtime_error("consumer bug");
  });
  for (uint64_t t = 1; t <= 3; ++t) {
    rec->begin_op(t);
    hooks().op(0, t, t + 1, kNow);
    rec->end_op();
  }
  rec->flush();
  EXPECT_EQ(calls.load(), 3);
  rec.reset();
}

TEST_F(RecorderTest, DroppedRecordsAreCounted) {
  auto rec = Recorder::start();
  ASSERT_NE(rec, nullptr);
  hooks().set_dropped(17);
  rec->begin_op(1);
  hooks().op(0, 1, 2, kNow);
  rec->end_op();
  rec->flush();
  EXPECT_EQ(rec->stats().cupti_dropped, 17u);
}

TEST_F(RecorderTest, ManyThreadsAndConcurrentDeliveriesLoseNothing) {
  // Driver calls on 4 threads, CUPTI's "worker" delivering on 2 more while the main thread
  // flushes: every tag arrives exactly once, and the sink is never entered twice at a time.
  RecorderOptions o;
  o.buffer_bytes = 4096;  // many small buffers
  auto rec = Recorder::start(o);
  ASSERT_NE(rec, nullptr);
  std::mutex m;
  std::map<uint64_t, int> seen;
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  rec->set_sink([&](const Completed& c) {
    if (inside.fetch_add(1) != 0) overlap = true;
    {
      std::lock_guard lock(m);
      ++seen[c.tag];
    }
    inside.fetch_sub(1);
  });

  constexpr int kThreads = 4, kOps = 400;
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int d = 0; d < 2; ++d)
    workers.emplace_back([&] {
      while (!done) hooks().deliver();
    });
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        uint64_t tag = (uint64_t(t) << 32) | uint64_t(i);
        rec->begin_op(tag);
        hooks().op(i % 3, 10, 20 + i, i % 3 == 0 ? kOpLater : kNow);
        rec->end_op();
        if (i % 50 == 0) hooks().release();
      }
    });
  for (int i = 0; i < 20; ++i) rec->flush();
  for (auto& c : callers) c.join();
  hooks().release();
  done = true;
  for (auto& w : workers) w.join();
  rec->flush();
  rec.reset();  // before the sink's captures go

  EXPECT_FALSE(overlap.load());
  std::lock_guard lock(m);
  ASSERT_EQ(seen.size(), size_t(kThreads * kOps));
  for (auto& [tag, n] : seen) ASSERT_EQ(n, 1) << tag;
}

TEST_F(RecorderTest, DestroyingWhileCuptiDeliversIsSafe) {
  std::atomic<bool> done{false};
  std::thread worker([&] {
    while (!done) {
      hooks().op(0, 1, 2, kNow);
      hooks().deliver();
    }
  });
  for (int i = 0; i < 50; ++i) {
    Collected got;
    auto rec = start_collecting(got);
    ASSERT_NE(rec, nullptr);
    rec->begin_op(i);
    hooks().op(1, 1, 2, kNow);
    rec->end_op();
  }
  done = true;
  worker.join();
}

}  // namespace
}  // namespace vgpu::cupti
