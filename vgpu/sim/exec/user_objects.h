// CUDA user objects (cuUserObjectCreate, cuGraphRetainUserObject, ...): a pointer, its
// destructor and a count of references, owned by the program's threads or by graphs and the
// executable graphs made from them. When the last reference goes, the destructor runs on one
// internal thread of the driver, as the real driver runs it (never on the caller's thread: a
// program may release its reference holding a lock its destructor takes). NCCL ties the plan of
// a collective captured into a CUDA graph to that graph this way; without user objects its
// ncclGroupEnd fails under capture.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "front/driver/cuda_api.h"
#include "sim/core/handle_table.h"

namespace vgpu {

class UserObjects {
 public:
  // References an owner (a graph, an executable graph) holds, by object.
  using References = std::unordered_map<CUuserObject, unsigned>;

  UserObjects() = default;
  ~UserObjects();  // runs the destructors still queued, then stops the thread
  UserObjects(const UserObjects&) = delete;
  UserObjects& operator=(const UserObjects&) = delete;

  // cuUserObjectCreate: `count` references owned by the caller; flags must be
  // CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, the only one CUDA defines.
  CUresult create(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned count, unsigned flags);
  // cuUserObjectRetain / cuUserObjectRelease: `count` references more / fewer. Releasing more
  // than the object holds is refused (CUDA leaves it undefined) and changes nothing.
  CUresult retain(CUuserObject object, unsigned count);
  CUresult release(CUuserObject object, unsigned count);

  // An owner's references: `owned` gains `count` of `object` (new ones, or with `move` the
  // caller's, which the object already counts) / gives `count` back.
  CUresult own(References& owned, CUuserObject object, unsigned count, bool move);
  CUresult disown(References& owned, CUuserObject object, unsigned count);
  // A copy of an owner's references (an executable graph made from a graph, a clone): each one
  // retained again. Releases every reference of an owner that goes.
  References retain_all(const References& owned);
  void release_all(References& owned);

  // Live objects (tests).
  size_t live() const { return table_.size(); }

 private:
  struct Object {
    void* ptr = nullptr;
    CUhostFn destroy = nullptr;
    uint64_t references = 0;  // under mu_
  };
  static bool valid_count(unsigned count) { return count >= 1 && count <= 0x7fffffffu; }
  void destroy_later(const Object& o);  // queues o's destructor for the thread

  std::mutex mu_;  // every object's count
  HandleTable<Object> table_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::pair<CUhostFn, void*>> queue_;
  std::thread thread_;  // started with the first destructor
  bool stop_ = false;
};

}  // namespace vgpu
