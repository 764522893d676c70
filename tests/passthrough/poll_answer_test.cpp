// How a query's answer is taken (passthrough/poll_answer.h): the polling rule, and the awaited
// work's finish (a lookup under the virtual timeline's lock) asked only when "ready" ends polling,
// never for a "not ready" answer (a poller that waited on that lock woke on a cold core).
#include <cuda.h>
#include <gtest/gtest.h>

#include <vector>

#include "passthrough/poll_answer.h"

namespace {

// A thread's polling state as thread_clock.h keeps it, reduced to what take_answer() asks.
struct FakePolls {
  bool is_polling = false;
  std::vector<const void*> awaited;
  double moved_to = -1;
  bool polling() const { return is_polling; }
  void polled_not_ready(const void* a) {
    is_polling = true;
    for (const void* w : awaited)
      if (w == a) return;
    awaited.push_back(a);
  }
  bool polled_ready(const void* a, double finish) {
    for (auto it = awaited.begin(); it != awaited.end(); ++it) {
      if (*it != a) continue;
      awaited.erase(it);
      is_polling = !awaited.empty();
      moved_to = finish;
      return finish >= 0;
    }
    return false;
  }
};

int stream_a, stream_b;  // what was asked about: only the addresses matter

TEST(PollAnswer, NotReadyAnswersLookNothingUp) {
  FakePolls polls;
  int lookups = 0;
  auto finish = [&lookups] {
    ++lookups;
    return 2.5;
  };
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(vgpu::pt::take_answer(CUDA_ERROR_NOT_READY, &stream_a, polls, finish));
  EXPECT_EQ(lookups, 0) << "a \"not ready\" answer looked the awaited work up";
  EXPECT_TRUE(polls.polling());
  // "Ready" ends the polling: the one lookup, and the clock moves to the work's finish.
  EXPECT_TRUE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_a, polls, finish));
  EXPECT_EQ(lookups, 1);
  EXPECT_DOUBLE_EQ(polls.moved_to, 2.5);
  EXPECT_FALSE(polls.polling());
}

TEST(PollAnswer, ReadyWithoutPollingIsNoSynchronization) {
  FakePolls polls;
  int lookups = 0;
  auto finish = [&lookups] {
    ++lookups;
    return 1.0;
  };
  EXPECT_FALSE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_a, polls, finish));
  EXPECT_EQ(lookups, 0);
  // An error is no answer about the work either.
  polls.polled_not_ready(&stream_a);
  EXPECT_FALSE(vgpu::pt::take_answer(CUDA_ERROR_INVALID_HANDLE, &stream_a, polls, finish));
  EXPECT_EQ(lookups, 0);
}

TEST(PollAnswer, ReadyAboutOtherWorkMovesNothing) {
  FakePolls polls;
  auto finish = [] { return 3.0; };
  vgpu::pt::take_answer(CUDA_ERROR_NOT_READY, &stream_a, polls, finish);
  EXPECT_FALSE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_b, polls, finish));
  EXPECT_LT(polls.moved_to, 0);
  EXPECT_TRUE(vgpu::pt::take_answer(CUDA_SUCCESS, &stream_a, polls, finish));
  EXPECT_DOUBLE_EQ(polls.moved_to, 3.0);
}

}  // namespace
