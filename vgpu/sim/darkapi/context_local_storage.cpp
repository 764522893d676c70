#include "sim/darkapi/context_local_storage.h"

#include <algorithm>

#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/core/thread_state.h"

namespace vgpu::darkapi {

ContextLocalStorage& ContextLocalStorage::instance() {
  // Never destroyed: contexts are torn down from exit handlers after our statics would be.
  static ContextLocalStorage* store = new ContextLocalStorage();
  return *store;
}

CUresult ContextLocalStorage::put(CUcontext ctx, void* key, void* value, Destructor destructor) {
  std::lock_guard lock(mu_);
  std::vector<Entry>& entries = by_context_[ctx];
  for (const Entry& e : entries)
    if (e.key == key) return CUDA_ERROR_INVALID_HANDLE;
  entries.push_back({key, value, destructor});
  return CUDA_SUCCESS;
}

CUresult ContextLocalStorage::get(CUcontext ctx, void* key, void** value) const {
  std::lock_guard lock(mu_);
  auto it = by_context_.find(ctx);
  if (it == by_context_.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (const Entry& e : it->second) {
    if (e.key == key) {
      *value = e.value;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult ContextLocalStorage::remove(CUcontext ctx, void* key) {
  std::lock_guard lock(mu_);
  auto it = by_context_.find(ctx);
  if (it == by_context_.end()) return CUDA_ERROR_INVALID_HANDLE;
  auto& entries = it->second;
  auto e = std::find_if(entries.begin(), entries.end(), [&](const Entry& x) { return x.key == key; });
  if (e == entries.end()) return CUDA_ERROR_INVALID_HANDLE;
  entries.erase(e);
  if (entries.empty()) by_context_.erase(it);
  return CUDA_SUCCESS;
}

size_t ContextLocalStorage::entries(CUcontext ctx) const {
  std::lock_guard lock(mu_);
  auto it = by_context_.find(ctx);
  return it == by_context_.end() ? 0 : it->second.size();
}

void ContextLocalStorage::context_destroyed(CUcontext ctx) {
  std::vector<Entry> gone;
  {
    std::lock_guard lock(mu_);
    auto it = by_context_.find(ctx);
    if (it == by_context_.end()) return;
    gone = std::move(it->second);
    by_context_.erase(it);
  }
  if (std::none_of(gone.begin(), gone.end(), [](const Entry& e) { return e.destructor; })) return;
  // The runtime's destructor expects its context to be current (measured).
  auto& stack = this_thread().context_stack;
  stack.push_back(ctx);
  for (auto e = gone.rbegin(); e != gone.rend(); ++e)
    if (e->destructor) e->destructor(ctx, e->key, e->value);
  // A destructor may have pushed and popped: take off exactly what was put on.
  auto mine = std::find(stack.rbegin(), stack.rend(), ctx);
  if (mine != stack.rend()) stack.erase(std::next(mine).base());
}

void context_local_storage_context_destroyed(CUcontext ctx) {
  ContextLocalStorage::instance().context_destroyed(ctx);
}

namespace {

// The context a CLS call means: `ctx` itself when vgpu knows it (a primary context that is
// not retained included), the current one when null.
CUresult resolve(CUcontext ctx, const char* call, CUcontext* out) {
  DriverState* d = DriverState::get();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) {
    auto current = d->contexts().current();
    if (!current) {
      // cudart asks this way to learn whether a thread has a context yet: not an error worth
      // a warning.
      log::debug("context-local storage {}: no context given and none is current", call);
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    *out = current->handle();
    return CUDA_SUCCESS;
  }
  if (!d->contexts().find(ctx)) {
    log::warn("context-local storage {}: {} is not a context", call, static_cast<void*>(ctx));
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  *out = ctx;
  return CUDA_SUCCESS;
}

}  // namespace

namespace slots {

CUresult cls_put(CUcontext ctx, void* key, void* value, ClsDestructor destructor) {
  CUcontext c;
  if (CUresult r = resolve(ctx, "put", &c); r != CUDA_SUCCESS) return r;
  return ContextLocalStorage::instance().put(c, key, value, destructor);
}

CUresult cls_delete(CUcontext ctx, void* key) {
  CUcontext c;
  if (CUresult r = resolve(ctx, "delete", &c); r != CUDA_SUCCESS) return r;
  return ContextLocalStorage::instance().remove(c, key);
}

CUresult cls_get(void** value, CUcontext ctx, void* key) {
  if (value == nullptr) {
    log::warn("context-local storage get: null value pointer");
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUcontext c;
  if (CUresult r = resolve(ctx, "get", &c); r != CUDA_SUCCESS) return r;
  return ContextLocalStorage::instance().get(c, key, value);
}

}  // namespace slots
}  // namespace vgpu::darkapi
