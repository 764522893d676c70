// The live objects of one kind (contexts, streams, events, modules, ...), found by the handle
// value a program holds. Every handle a program passes is looked up here before anything is
// dereferenced, so a stale, foreign or made-up handle is an error code, never a crash (the real
// driver segfaults on a made-up CUfunction; see shared/reference/driver-behaviour.md).
//
// In the sim backend the handle values are minted by mint_handle(): never reused, so a handle
// of a destroyed object stays invalid forever, and tagged by kind, so a CUstream passed as a
// CUevent is not found. In the passthrough backend the handle is the real driver's, and the
// table is the side table from real handle to vgpu's view of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace vgpu {

enum class HandleKind : uint64_t {
  context = 1, stream, event, module, function, library, kernel, graph, graph_node, graph_exec,
  mem_pool, mem_generic, array, texture, surface, link_state, user_object, green_ctx, other
};

// A fresh handle value: high bits fixed and tagged with the kind, low bits a counter. Never 0,
// never CU_STREAM_LEGACY (0x1) or CU_STREAM_PER_THREAD (0x2), never a valid host address.
template <class Handle> Handle mint_handle(HandleKind kind) {
  static std::atomic<uint64_t> counter{1};
  const uint64_t v = (0x7c5ull << 52) | (static_cast<uint64_t>(kind) << 40) |
                     (counter.fetch_add(1, std::memory_order_relaxed) & ((1ull << 40) - 1));
  return reinterpret_cast<Handle>(v);
}

template <class T> class HandleTable {
 public:
  void add(const void* handle, std::shared_ptr<T> object) {
    std::unique_lock lock(mu_);
    map_[handle] = std::move(object);
  }
  // nullptr when the handle is not (or no longer) one of ours.
  std::shared_ptr<T> find(const void* handle) const {
    if (handle == nullptr) return nullptr;
    std::shared_lock lock(mu_);
    auto it = map_.find(handle);
    return it == map_.end() ? nullptr : it->second;
  }
  std::shared_ptr<T> remove(const void* handle) {
    std::unique_lock lock(mu_);
    auto it = map_.find(handle);
    if (it == map_.end()) return nullptr;
    auto object = std::move(it->second);
    map_.erase(it);
    return object;
  }
  std::vector<std::shared_ptr<T>> snapshot() const {
    std::shared_lock lock(mu_);
    std::vector<std::shared_ptr<T>> out;
    out.reserve(map_.size());
    for (const auto& [h, o] : map_) out.push_back(o);
    return out;
  }
  size_t size() const {
    std::shared_lock lock(mu_);
    return map_.size();
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<T>> map_;
};

}  // namespace vgpu
