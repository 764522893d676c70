// The driver threads that run queued stream work: host functions (never run on the caller's
// thread) and any op that could not run inline because something before it was not done. The
// pool grows when every worker is busy (a host function may block for as long as it likes, and
// work queued behind another stream must still make progress), up to kMaxWorkers.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vgpu {

class WorkerPool {
 public:
  static constexpr int kMaxWorkers = 64;
  WorkerPool() = default;
  ~WorkerPool();
  void post(std::function<void()> job);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stop_ = false;
};

}  // namespace vgpu
