#include "sim/exec/worker_pool.h"

#include "common/log.h"

namespace vgpu {

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void WorkerPool::post(std::function<void()> job) {
  std::unique_lock lock(mu_);
  jobs_.push_back(std::move(job));
  if (idle_ < static_cast<int>(jobs_.size()) && static_cast<int>(threads_.size()) < kMaxWorkers) {
    try {
      threads_.emplace_back([this] { run(); });
      ++idle_;  // counted as idle from now on, so that a burst of posts starts one thread each
    } catch (...) {
      log::warn("stream worker: cannot start a thread; queued work waits for a busy worker");
    }
  }
  lock.unlock();
  cv_.notify_one();
}

void WorkerPool::run() {
  std::unique_lock lock(mu_);
  for (bool first = true;; first = false) {
    if (!first) ++idle_;
    cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace vgpu
