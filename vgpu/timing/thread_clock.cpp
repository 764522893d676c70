#include "timing/thread_clock.h"

#include "timing/clock_report.h"

namespace vgpu::timing {

namespace {
constinit thread_local ThreadClock t_clock;  // constant-initialized: no guard on the hot path
}  // namespace

ThreadClock& this_thread_clock() { return t_clock; }

void ThreadClock::started_keeping_time() {
  keeps_time_ = true;
  clock_report::register_thread(*this);
  trace_ = clock_trace::buffer_for_this_thread();
}

void ThreadClock::charge() {
  if (depth_ != 0 || polling_) return;
  const double cpu = outside_.take();
  now_ += cpu;
  tally_.add(ClockTally::cpu, cpu);
  if (trace_ != nullptr) trace_->add(clock_trace::Move::read, cpu, now_, __builtin_return_address(0));
}

void ThreadClock::enter_query() {
  if (depth_++ > 0) return;
  const double outside = outside_.enter();
  // While polling, the time since the last question was waiting.
  if (!polling_) now_ += outside;
  tally_.add(polling_ ? ClockTally::dropped : ClockTally::cpu, outside);
  tally_.calls.store(tally_.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  blocking_ = false;
  if (trace_ != nullptr && !polling_) trace_->add(clock_trace::Move::query, outside, now_, __builtin_return_address(0));
}

bool ThreadClock::advance_to(double t, ClockTally::Source why) {
  charge();
  if (!(t > now_)) return false;
  tally_.add(why, t - now_);
  if (trace_ != nullptr)
    trace_->add(why == ClockTally::horizon ? clock_trace::Move::horizon : clock_trace::Move::sync, t - now_, t, nullptr);
  now_ = t;
  return true;
}

void ThreadClock::polled_not_ready(const void* awaited) {
  if (!keeps_time_) return;
  if (!polling_) awaiting_ = 0;  // a new polling
  polling_ = true;
  for (int i = 0; i < awaiting_; ++i)
    if (awaited_[i] == awaited) return;
  if (awaiting_ < static_cast<int>(awaited_.size())) awaited_[awaiting_++] = awaited;
}

bool ThreadClock::polled_ready(const void* awaited, double finish) {
  if (!polling_) return false;
  for (int i = 0; i < awaiting_; ++i) {
    if (awaited_[i] != awaited) continue;
    awaited_[i] = awaited_[--awaiting_];
    if (awaiting_ == 0) polling_ = false;
    if (finish > now_) {
      tally_.add(ClockTally::poll, finish - now_);
      if (trace_ != nullptr) trace_->add(clock_trace::Move::ready, finish - now_, finish, nullptr);
      now_ = finish;
    }
    return true;
  }
  return false;
}

}  // namespace vgpu::timing
