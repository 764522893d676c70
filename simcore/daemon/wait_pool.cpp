#include "wait_pool.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <exception>

#include "common/log.h"

namespace simcore::daemon {

WaitPool::WaitPool(Engine& engine, size_t max_threads)
    : engine_(engine), max_threads_(max_threads),
      notify_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

WaitPool::~WaitPool() { join_all(); }

bool WaitPool::submit(const Job& job) {
  std::lock_guard lk(mu_);
  if (stopping_) return false;
  // Every queued job needs an idle worker of its own.
  if (jobs_.size() >= idle_) {
    if (threads_.size() >= max_threads_) return false;
    try {
      threads_.emplace_back([this] { worker(); });
    } catch (const std::exception& e) {  // out of threads
      vgpu::log::error("vgpud: cannot start a wait thread: {}", e.what());
      return false;
    }
  }
  jobs_.push_back(job);
  cv_.notify_one();
  return true;
}

std::vector<WaitPool::Done> WaitPool::take() {
  uint64_t n;
  [[maybe_unused]] ssize_t r = ::read(notify_.get(), &n, sizeof(n));
  std::lock_guard lk(mu_);
  std::vector<Done> out;
  out.swap(done_);
  return out;
}

void WaitPool::join_all() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void WaitPool::worker() {
  std::unique_lock lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping, nothing left
    const Job job = jobs_.front();
    jobs_.pop_front();
    lk.unlock();
    Done d{job.client, job.request, std::nullopt, {}};
    try {
      d.interval = job.for_rank ? engine_.wait_final_for_rank(job.id, job.rank)
                                : engine_.wait_final(job.id);
    } catch (const std::exception& e) {
      d.error = e.what();
    } catch (...) {
      d.error = "unknown exception";
    }
    lk.lock();
    done_.push_back(std::move(d));
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(notify_.get(), &one, sizeof(one));
  }
}

}  // namespace simcore::daemon
