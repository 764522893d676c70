// A small, deterministic stand-in for simcore's engine, so the daemon can be tested on its own.
// A flow lasts bytes / 1e9 s (a 1 GB/s link that no flow shares), a task its duration; work
// starts at max(not_before, finish of everything in `after`). An event is final once it
// finishes at or before the lowest floor of the registered ranks (all final with no rank);
// as in the real engine, a rank blocked in wait_final_for_rank(id, rank) counts as promising
// at least id's finish, and afterwards its floor is at least that finish.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "simcore/engine.h"

namespace simcore::testing {

class FakeEngine final : public Engine {
 public:
  // A timeline of at least `bytes` (to test paging); 0: just the events.
  void set_timeline_padding(size_t bytes);

  EventId add_flow(const FlowSpec& flow) override;
  EventId add_task(const TaskSpec& task) override;
  std::optional<Interval> query(EventId id) const override;
  bool is_final(EventId id) const override;
  void register_rank(int rank) override;
  void set_rank_floor(int rank, Time t) override;
  void unregister_rank(int rank) override;
  std::optional<Interval> wait_final(EventId id) override;
  std::optional<Interval> wait_final_for_rank(EventId id, int rank) override;
  void shutdown() override;
  std::string timeline_json() const override;

  // For tests.
  std::set<int> registered_ranks() const;
  bool was_shut_down() const;

  // The interval the fake gives a flow/task with these inputs, for expected values.
  static Time flow_duration(uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

 private:
  EventId add(Time not_before, const std::vector<EventId>& after, Time duration,
              const std::string& label);
  bool final_locked(EventId id) const;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Interval> events_;  // id - 1
  std::vector<std::string> labels_;
  struct Rank {
    Time floor = 0;
    EventId waiting_on = kNoEvent;
  };
  std::map<int, Rank> ranks_;
  bool shut_down_ = false;
  size_t padding_ = 0;
};

}  // namespace simcore::testing
