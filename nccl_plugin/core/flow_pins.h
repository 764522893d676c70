// Which of this process's flows in the job's vgpud may still be named, so that the rest are
// released there (Engine::release: once also final and reclaimed, vgpud forgets them, and its id
// map stays bounded over a long job). Only the receiving process places a transfer's flow, and a
// later flow names it only through that receiving connection's buffers (SlotFlows, both the
// receiver's buffers and the sender's, keyed by the address the sender publishes), so every
// holder is in this process: the flow's placement until its transfer completes, each SlotFlows
// entry, each launch record that asks for it again (VirtualTime). A flow is released when its
// last holder lets go. vgpud refuses a flow whose `after` names an id it forgot, hence the count:
// never released while a buffer still names it. Queries of a released id (another process's
// launch record, the driver's flow_interval) may answer nothing once vgpud forgot it, which it
// does only once the flow is final below the job's floor.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vgpu::nccl {

class FlowPins {
 public:
  // A flow this process placed: held once, by its placement.
  void own(uint64_t id) {
    if (id == 0) return;
    std::lock_guard l(mu_);
    held_[id] = 1;
  }
  // Another holder; ids not this process's (or released) are ignored.
  void pin(uint64_t id) {
    if (id == 0) return;
    std::lock_guard l(mu_);
    if (auto it = held_.find(id); it != held_.end()) ++it->second;
  }
  // A holder let go; the last one queues the id for release.
  void unpin(uint64_t id) {
    if (id == 0) return;
    std::lock_guard l(mu_);
    auto it = held_.find(id);
    if (it == held_.end() || --it->second > 0) return;
    held_.erase(it);
    free_.push_back(id);
  }
  // The queued ids (at most kMaxTake), once at least `at_least` wait; else none.
  std::vector<uint64_t> take(size_t at_least) {
    std::lock_guard l(mu_);
    if (free_.empty() || free_.size() < at_least) return {};
    if (free_.size() <= kMaxTake) return std::exchange(free_, {});
    std::vector<uint64_t> out(free_.begin(), free_.begin() + kMaxTake);
    free_.erase(free_.begin(), free_.begin() + kMaxTake);
    return out;
  }
  size_t held() const {
    std::lock_guard l(mu_);
    return held_.size();
  }

  static constexpr size_t kMaxTake = 4096;  // ids one request releases (vgpud's cap is 65536)

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, uint32_t> held_;  // id -> holders
  std::vector<uint64_t> free_;                   // to release
};

}  // namespace vgpu::nccl
