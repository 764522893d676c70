// VGPU_CLOCK_TRACE (vgpu/timing/clock_trace.h): a thread's clock moves are recorded in order, each
// with what it charged and where the clock stood after it, and a buffer keeps the most recent.
// The setting is set by meson for this program (tests/timing/meson.build).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "timing/clock_trace.h"
#include "timing/thread_clock.h"

namespace {

namespace trace = vgpu::timing::clock_trace;
using vgpu::timing::this_thread_clock;

TEST(ClockTrace, RecordsEachMoveOfAThreadInOrder) {
  std::thread([] {
    vgpu::timing::ThreadClock& c = this_thread_clock();
    c.start_keeping_time();
    c.enter();  // a call
    c.leave();
    const double t0 = c.now();
    c.advance_to(t0 + 0.010);  // a synchronization: 10,000 us
    c.enter_query();
    c.leave();
    c.polled_not_ready(&c);
    c.polled_ready(&c, c.now() + 0.004);  // polled work finished 4,000 us later
  }).join();
  const std::string text = trace::lines();
  const size_t call = text.find("\"call\"");
  const size_t sync = text.find("\"sync\", ");
  const size_t query = text.find("\"query\"", sync);
  const size_t ready = text.find("\"ready\", 4000.000");
  ASSERT_NE(call, std::string::npos) << text;
  ASSERT_NE(sync, std::string::npos) << text;
  ASSERT_NE(query, std::string::npos) << text;
  ASSERT_NE(ready, std::string::npos) << text;
  EXPECT_LT(call, sync);
  // The jump, less the few microseconds of CPU time charged just before it.
  EXPECT_NEAR(std::strtod(text.c_str() + sync + 8, nullptr), 10000.0, 100.0) << text.substr(sync, 40);
  // A jump carries the thread's context switches so far (a count, not -1); a call does not.
  const size_t switches = text.find("\"\", \"\", ", sync);
  ASSERT_NE(switches, std::string::npos) << text.substr(sync, 80);
  EXPECT_GE(std::strtol(text.c_str() + switches + 8, nullptr, 10), 0) << text.substr(sync, 80);
  // ... and its CPU time so far (microseconds, not -1); every move the core it ran on.
  const char* after_switches = std::strchr(text.c_str() + switches + 8, ',');  // past slept
  after_switches = std::strchr(after_switches + 1, ',');                       // past preempted
  EXPECT_GE(std::strtod(after_switches + 1, nullptr), 0.0) << text.substr(sync, 100);
  const size_t call_tail = text.find(", -1, -1, -1, ", call);
  ASSERT_NE(call_tail, std::string::npos) << text.substr(call, 120);
  EXPECT_GE(std::strtol(text.c_str() + call_tail + 14, nullptr, 10), 0) << text.substr(call, 120);
  EXPECT_LT(query, ready);
}

TEST(ClockTrace, ABufferKeepsTheMostRecentMoves) {
  auto b = std::make_unique<trace::Buffer>();
  const std::uint32_t extra = 5;
  for (std::uint32_t i = 0; i < trace::Buffer::kCapacity + extra; ++i)
    b->add(trace::Move::call, static_cast<double>(i) * 1e-6, 0, nullptr);
  std::string out;
  b->append_json("{\"tid\": 1", out);
  EXPECT_NE(out.find("\"dropped\": 5,"), std::string::npos);
  // The oldest kept is the sixth added: 5 us charged.
  EXPECT_NE(out.find("\"moves\": [[") , std::string::npos);
  const size_t first = out.find("\"call\", ");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(out.compare(first, 14, "\"call\", 5.000,"), 0) << out.substr(first, 40);
}

}  // namespace
