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
  // No caller: charge() is reached through now() from the clock shim's or an issue time's reading,
  // and its own return address named ThreadClock::now itself, not the program's code.
  if (trace_ != nullptr) trace_->add(clock_trace::Move::read, cpu, now_, nullptr);
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
  // A synchronization or a hand-over ends an NCCL group; a raise to a device's horizon, which any
  // launch of the group may meet, is no wait.
  if (why != ClockTally::horizon) end_nccl_group_at_wait();
  charge();
  if (!(t > now_)) return false;
  tally_.add(why, t - now_);
  if (trace_ != nullptr)
    trace_->add(why == ClockTally::horizon ? clock_trace::Move::horizon : clock_trace::Move::sync, t - now_, t, nullptr);
  now_ = t;
  return true;
}

void ThreadClock::polled_not_ready(const void* awaited) {
  end_nccl_group_at_wait();
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

double ThreadClock::NcclGroup::cost() const {
  const int others = communicators - all_reduce_communicators;
  return costs.group + costs.communicator * others + costs.all_reduce_communicator * all_reduce_communicators +
         costs.operation * (operations > communicators ? operations - communicators : 0);
}

void ThreadClock::nccl_group_begin(const NcclGroupCosts& costs) {
  if (nccl_.depth == 0) close_nccl_group();
  if (nccl_.depth++ > 0) return;
  nccl_ = NcclGroup{};
  nccl_.depth = 1;
  nccl_.costs = costs;
  if (costs.enabled) enter();  // the CPU time before the group is the program's; inside, nothing is charged
}

void ThreadClock::nccl_group_operation(std::uint64_t communicator, bool all_reduce) {
  if (nccl_.depth == 0 || !nccl_.costs.enabled) return;
  ++nccl_.operations;
  const int known = nccl_.communicators < static_cast<int>(nccl_.seen.size()) ? nccl_.communicators
                                                                                : static_cast<int>(nccl_.seen.size());
  for (int i = 0; i < known; ++i)
    if (nccl_.seen[i] == communicator) return;
  if (known < static_cast<int>(nccl_.seen.size())) nccl_.seen[known] = communicator;
  ++nccl_.communicators;
  if (all_reduce) ++nccl_.all_reduce_communicators;  // its first operation on that communicator
}

void ThreadClock::charge_nccl_group() {
  if (nccl_.charged) return;
  nccl_.charged = true;
  const double t = nccl_.cost();
  now_ += t;
  tally_.add(ClockTally::nccl, t);
}

void ThreadClock::nccl_group_launch() {
  if ((nccl_.depth == 0 && !nccl_.awaiting_launches) || !nccl_.costs.enabled) return;
  charge_nccl_group();
  if (++nccl_.launches >= nccl_.communicators) close_nccl_group();
}

void ThreadClock::nccl_group_end() {
  if (nccl_.depth == 0) return;  // unbalanced: nothing to end
  if (--nccl_.depth > 0 || !nccl_.costs.enabled) return;
  charge_nccl_group();
  nccl_.awaiting_launches = true;
  if (nccl_.launches >= nccl_.communicators) close_nccl_group();
}

void ThreadClock::close_nccl_group() {
  if (!nccl_.awaiting_launches) return;
  nccl_.awaiting_launches = false;
  leave();  // the group's enter() (nccl_group_begin)
}

void ThreadClock::end_nccl_group_at_wait() {
  if (nccl_.depth == 0 && !nccl_.awaiting_launches) return;  // every poll and synchronization: no group
  if (nccl_.depth > 0 && nccl_.costs.enabled) {
    // Still open: a group that waits is not the steady path the model describes (a communicator's
    // set-up inside a group synchronizes), or its end was lost; either way the CPU time from here
    // is the thread's again, and a later end finds nothing to end.
    charge_nccl_group();
    nccl_.depth = 0;
    leave();
    return;
  }
  nccl_.depth = 0;
  close_nccl_group();
}

}  // namespace vgpu::timing
