// The daemon's blocking waits, kept off its event loop: each parked wait_final runs the engine's
// own blocking wait (so its semantics, e.g. wait_final_for_rank's promise while blocked, are
// exactly the engine's) on a worker thread; workers are reused, and their answers go back to the
// loop through a queue and an eventfd that the loop polls with the sockets.
//
// A worker stays blocked until its event is final or the engine is shut down; a wait whose
// client has gone runs out the same way and its answer is discarded. Threads are capped: a
// wait beyond the cap is refused (the client gets kOverloaded) rather than queued, since a
// queued wait_final_for_rank could be the very one the running ones need to make progress.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "simcore/engine.h"
#include "socket_io.h"

namespace simcore::daemon {

class WaitPool {
 public:
  struct Job {
    uint64_t client = 0;
    uint64_t request = 0;
    EventId id = kNoEvent;
    int rank = -1;
    bool for_rank = false;   // wait_final_for_rank(id, rank), else wait_final(id)
  };
  struct Done {
    uint64_t client = 0;
    uint64_t request = 0;
    std::optional<Interval> interval;
    std::string error;       // the engine threw
  };

  WaitPool(Engine& engine, size_t max_threads);
  ~WaitPool();  // joins; the engine must be shut down first if waits may still be blocked
  WaitPool(const WaitPool&) = delete;
  WaitPool& operator=(const WaitPool&) = delete;

  bool ok() const { return static_cast<bool>(notify_); }
  int notify_fd() const { return notify_.get(); }

  // Runs `job` on a worker; false when every allowed worker is busy.
  bool submit(const Job& job);
  // The answers ready now (and clears the eventfd).
  std::vector<Done> take();
  // Stops the workers once their current waits return (call after Engine::shutdown()).
  void join_all();

 private:
  void worker();

  Engine& engine_;
  const size_t max_threads_;
  UniqueFd notify_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<Done> done_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace simcore::daemon
