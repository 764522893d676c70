#include "comms.h"

#include "common/log.h"
#include "common/proc_info.h"

namespace vgpu::nccl {

void* Registry::add(std::shared_ptr<Object> obj) {
  void* key = obj.get();
  std::unique_lock lock(mu_);
  live_.emplace(key, std::move(obj));
  return key;
}

std::shared_ptr<Object> Registry::remove(const void* p) {
  std::unique_lock lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return nullptr;
  auto obj = std::move(it->second);
  live_.erase(it);
  return obj;
}

bool PeerWatch::alive(int pid) {
  auto now = std::chrono::steady_clock::now();
  if (alive_ && now - last_ >= std::chrono::milliseconds(50)) {
    last_ = now;
    alive_ = process_alive(pid);
    const char state = alive_ ? process_state(pid) : '\0';
    if (state == 'T' || state == 't') {
      if (!stopped_) stopped_since_ = now;
      stopped_ = true;
      if (!told_ && now - stopped_since_ >= std::chrono::seconds(1)) {
        told_ = true;
        vgpu::log::always(fmt::format("vgpu nccl plugin: peer process {} is stopped (SIGSTOP or "
                                      "a debugger); this rank waits for it", pid));
      }
    } else {
      stopped_ = told_ = false;
    }
  }
  return alive_;
}

}  // namespace vgpu::nccl
