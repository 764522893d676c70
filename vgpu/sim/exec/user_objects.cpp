#include "sim/exec/user_objects.h"

#include "common/log.h"

namespace vgpu {

UserObjects::~UserObjects() {
  {
    std::lock_guard l(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

CUresult UserObjects::create(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned count, unsigned flags) {
  if (out == nullptr || destroy == nullptr || !valid_count(count) || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) {
    log::warn("cuUserObjectCreate: needs an output, a destructor, 1 to INT_MAX references and "
              "CU_USER_OBJECT_NO_DESTRUCTOR_SYNC (got {} references, flags {:#x})", count, flags);
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto o = std::make_shared<Object>();
  o->ptr = ptr;
  o->destroy = destroy;
  o->references = count;
  const auto handle = mint_handle<CUuserObject>(HandleKind::user_object);
  table_.add(handle, std::move(o));
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult UserObjects::retain(CUuserObject object, unsigned count) {
  const std::shared_ptr<Object> o = table_.find(object);
  if (o == nullptr || !valid_count(count)) {
    log::warn("cuUserObjectRetain: {} is not a live user object, or {} references is out of range",
              static_cast<const void*>(object), count);
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard l(mu_);
  o->references += count;
  return CUDA_SUCCESS;
}

CUresult UserObjects::release(CUuserObject object, unsigned count) {
  const std::shared_ptr<Object> o = table_.find(object);
  if (o == nullptr || !valid_count(count)) {
    log::warn("cuUserObjectRelease: {} is not a live user object, or {} references is out of range",
              static_cast<const void*>(object), count);
    return CUDA_ERROR_INVALID_VALUE;
  }
  {
    std::lock_guard l(mu_);
    if (count > o->references) {
      log::warn("cuUserObjectRelease: {} references released of {} holding {}; nothing released", count,
                static_cast<const void*>(object), o->references);
      return CUDA_ERROR_INVALID_VALUE;
    }
    o->references -= count;
    if (o->references > 0) return CUDA_SUCCESS;
    table_.remove(object);
  }
  destroy_later(*o);
  return CUDA_SUCCESS;
}

CUresult UserObjects::own(References& owned, CUuserObject object, unsigned count, bool move) {
  if (!valid_count(count) || table_.find(object) == nullptr) {
    log::warn("cuGraphRetainUserObject: {} is not a live user object, or {} references is out of range",
              static_cast<const void*>(object), count);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!move)
    if (CUresult r = retain(object, count); r != CUDA_SUCCESS) return r;
  owned[object] += count;
  return CUDA_SUCCESS;
}

CUresult UserObjects::disown(References& owned, CUuserObject object, unsigned count) {
  auto it = owned.find(object);
  if (!valid_count(count) || it == owned.end() || it->second < count) {
    log::warn("cuGraphReleaseUserObject: the graph holds {} references of {}, {} asked back",
              it == owned.end() ? 0u : it->second, static_cast<const void*>(object), count);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((it->second -= count) == 0) owned.erase(it);
  return release(object, count);
}

UserObjects::References UserObjects::retain_all(const References& owned) {
  References copy;
  for (const auto& [object, count] : owned)
    if (retain(object, count) == CUDA_SUCCESS) copy[object] = count;
  return copy;
}

void UserObjects::release_all(References& owned) {
  for (const auto& [object, count] : owned) (void)release(object, count);
  owned.clear();
}

void UserObjects::destroy_later(const Object& o) {
  std::lock_guard l(queue_mu_);
  if (stop_) return;  // the driver is going: the process is ending
  queue_.emplace_back(o.destroy, o.ptr);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      std::unique_lock lock(queue_mu_);
      for (;;) {
        queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        while (!queue_.empty()) {
          const auto [destroy, ptr] = queue_.front();
          queue_.pop_front();
          lock.unlock();
          destroy(ptr);
          lock.lock();
        }
        if (stop_) return;
      }
    });
  }
  queue_cv_.notify_one();
}

}  // namespace vgpu
