// How a query's answer is taken (passthrough/poll_answer.h): the polling rule, and the awaited
// work's finish (a lookup under the virtual timeline's lock) asked only when "ready" ends polling,
// never for a "not ready" answer (a poller that waited on that lock woke on a cold core).
#include <cuda.h>
#include <gtest/gtest.h>

#include <functional>

#include "passthrough/poll_answer.h"
#include "timing/thread_clock.h"

namespace {

using vgpu::timing::ThreadClock;

// A thread's clock that keeps virtual time, at 0.
ThreadClock& keeping_time(ThreadClock& c) {
  c.start_keeping_time();
  return c;
}

// The awaited work's finish, counting how often it is asked for (the lookup under the lock).
struct CountedFinish {
  double finish;
  int lookups = 0;
  double operator()() {
    ++lookups;
    return finish;
  }
};

int stream_a, stream_b;  // what was asked about: only the addresses matter

TEST(PollAnswer, NotReadyAnswersLookNothingUp) {
  ThreadClock c;
  keeping_time(c);
  CountedFinish finish{2.5};
  for (int i = 0; i < 100; ++i)
    EXPECT_FALSE(vgpu::pt::take_answer(CUDA_ERROR_NOT_READY, &stream_a, c, std::ref(finish)));
  EXPECT_EQ(finish.lookups, 0) << "a \"not ready\" answer looked the awaited work up";
  EXPECT_TRUE(c.polling());
  // "Ready" ends the polling: the one lookup, and the clock moves to the work's finish.
  EXPECT_TRUE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_a, c, std::ref(finish)));
  EXPECT_EQ(finish.lookups, 1);
  EXPECT_DOUBLE_EQ(c.reading(), 2.5);
  EXPECT_FALSE(c.polling());
}

TEST(PollAnswer, ReadyWithoutPollingIsNoSynchronization) {
  ThreadClock c;
  keeping_time(c);
  CountedFinish finish{1.0};
  EXPECT_FALSE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_a, c, std::ref(finish)));
  EXPECT_EQ(finish.lookups, 0);
  // An error is no answer about the work either.
  c.polled_not_ready(&stream_a);
  EXPECT_FALSE(vgpu::pt::take_answer(CUDA_ERROR_INVALID_HANDLE, &stream_a, c, std::ref(finish)));
  EXPECT_EQ(finish.lookups, 0);
  EXPECT_DOUBLE_EQ(c.reading(), 0.0);
}

TEST(PollAnswer, ReadyAboutOtherWorkMovesNothing) {
  ThreadClock c;
  keeping_time(c);
  CountedFinish finish{3.0};
  vgpu::pt::take_answer(CUDA_ERROR_NOT_READY, &stream_a, c, std::ref(finish));
  EXPECT_FALSE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_b, c, std::ref(finish)));
  EXPECT_DOUBLE_EQ(c.reading(), 0.0);
  EXPECT_TRUE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_a, c, std::ref(finish)));
  EXPECT_DOUBLE_EQ(c.reading(), 3.0);
}

}  // namespace
