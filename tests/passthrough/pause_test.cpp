// A timed call's scope closed before its end (passthrough/thread_clock.h, Pause::leave_now): an
// event record reads its leaving time before its last stores (timed_api.cpp), and reopens the
// scope when it must wait for the timeline after all (issue 21). The scope is left once, its
// reopening is inside again, and an enclosing scope stays open.
#include <gtest/gtest.h>

#include "passthrough/thread_clock.h"

namespace vgpu::pt::thread_clock {
namespace {

TEST(Pause, LeftEarlyItIsLeftOnce) {
  {
    Pause outer;
    {
      Pause inner;
      inner.leave_now();
      EXPECT_TRUE(paused());  // the outer scope is still open
    }
    EXPECT_TRUE(paused());  // the inner scope's end left nothing more
  }
  EXPECT_FALSE(paused());
}

TEST(Pause, LeftEarlyAndReopenedItIsInsideUntilItsEnd) {
  {
    Pause p;
    EXPECT_TRUE(paused());
    p.leave_now();
    EXPECT_FALSE(paused());
    p.reopen();
    EXPECT_TRUE(paused());
  }
  EXPECT_FALSE(paused());
}

}  // namespace
}  // namespace vgpu::pt::thread_clock
