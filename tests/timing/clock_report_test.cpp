// VGPU_CLOCK_REPORT (vgpu/timing/clock_report.h): each source of a thread's virtual time is
// counted where the thread clock's rule moves it, and every registered thread is listed, ended
// threads included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "timing/clock_report.h"
#include "timing/thread_clock.h"

namespace {

using vgpu::timing::ClockTally;
using vgpu::timing::this_thread_clock;

double tally(ClockTally::Source s) { return this_thread_clock().tally().seconds[s].load(); }

TEST(ClockReport, EachJumpIsCountedAsItsSource) {
  vgpu::timing::ThreadClock& c = this_thread_clock();
  c.start_keeping_time();
  const double t0 = c.now();
  c.advance_to(t0 + 0.010);                      // a synchronization
  c.advance_to(t0 + 0.005);                      // never back: counts nothing
  c.advance_to(t0 + 0.030, ClockTally::horizon);  // raised to a device's horizon
  c.enter();
  c.charge_driver(0.002);  // the real driver's own work
  c.leave();
  c.enter_query();
  c.leave();
  c.polled_not_ready(&c);
  c.polled_ready(&c, c.now() + 0.004);  // the work it polled for finished later
  EXPECT_NEAR(tally(ClockTally::sync), 0.010, 1e-3);
  EXPECT_NEAR(tally(ClockTally::horizon), 0.020, 1e-3);
  EXPECT_DOUBLE_EQ(tally(ClockTally::driver), 0.002);
  EXPECT_NEAR(tally(ClockTally::poll), 0.004, 1e-3);
  EXPECT_EQ(c.tally().calls.load(), 2u);
  // Every source summed is the clock's whole advance since it started.
  double sum = 0;
  for (int s = 0; s < ClockTally::kSources; ++s)
    if (s != ClockTally::dropped && s != ClockTally::raised) sum += tally(static_cast<ClockTally::Source>(s));
  EXPECT_NEAR(sum, c.now() - t0, 1e-3);
}

TEST(ClockReport, ListsLiveAndEndedThreads) {
  this_thread_clock().start_keeping_time();
  std::thread([] {
    this_thread_clock().start_keeping_time();
    this_thread_clock().advance_to(this_thread_clock().now() + 1.5);
  }).join();
  const std::string text = vgpu::timing::clock_report::lines();
  // The ended thread, kept: its 1.5 s synchronization (less the CPU time charged just before).
  bool ended_thread = false;
  for (size_t at = text.find("\"sync_s\": "); at != std::string::npos; at = text.find("\"sync_s\": ", at + 1))
    ended_thread = ended_thread || std::abs(std::strtod(text.c_str() + at + 10, nullptr) - 1.5) < 1e-3;
  EXPECT_TRUE(ended_thread) << text;
  size_t lines = 0;
  for (char ch : text) lines += ch == '\n';
  EXPECT_GE(lines, 2u) << text;
}

// Last: once a range was opened, every line counts ranges only (for the rest of the process).
TEST(ClockReport, RangesCountOnlyWhatHappensInsideThem) {
  namespace report = vgpu::timing::clock_report;
  std::thread([] {
    vgpu::timing::ThreadClock& c = this_thread_clock();
    c.start_keeping_time();
    const double t0 = c.now();
    c.advance_to(t0 + 100.0);  // before any range: start-up
    report::range_start();
    c.advance_to(t0 + 100.25);  // inside the first range
    report::range_stop();
    report::range_stop();       // a stop outside a range: ignored
    c.advance_to(t0 + 200.0);   // between the ranges
    report::range_start();
    report::range_start();      // a start inside a range: ignored
    c.advance_to(t0 + 200.5);   // inside the range still open when the report is written
  }).join();
  const std::string text = report::lines();
  bool found = false;
  for (size_t at = text.find("\"sync_s\": "); at != std::string::npos; at = text.find("\"sync_s\": ", at + 1)) {
    const double sync = std::strtod(text.c_str() + at + 10, nullptr);
    EXPECT_LT(sync, 1.0) << "time outside the ranges counted: " << text;
    found = found || std::abs(sync - 0.75) < 1e-3;
  }
  EXPECT_TRUE(found) << text;
  EXPECT_NE(text.find("\"range\": true"), std::string::npos) << text;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("VGPU_CLOCK_REPORT", "/dev/null", 1);  // before any thread registers
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
