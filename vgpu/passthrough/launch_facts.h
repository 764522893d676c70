// What vgpu needs to know about a forwarded kernel launch: the function's name and parameter
// layout (asked of the real driver once per function and cached), the launch's packed
// parameter block, and from these its launch signature (exec/launch_signature.h, the same bytes
// the sim backend computes). Shared by virtual timing (launch_api.cpp) and the kernel-time
// recording (kernel_recording.cpp).
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "front/driver/cuda_api.h"
#include "front/launch/launch_signature.h"
#include "passthrough/known_addresses.h"
#include "passthrough/recent_signatures.h"

namespace vgpu::pt {

struct FunctionFacts {
  bool ok = false;
  std::string name;
  bool nccl = false;  // an NCCL kernel (nccl_timing::is_nccl_kernel: a name search, once per function)
  std::vector<ParamSlot> slots;
  uint32_t block_bytes = 0;  // packed parameter block size
};

class FunctionFactsCache;
class PassState;

// A launching thread's recently launched functions, direct-mapped by handle: a training step
// launches a few dozen kernels over and over, so most launches find their facts here without
// the cache's shared lock (a reader-writer lock's two atomic updates were 5% of a settled
// launch). Entries point into the cache's map, whose elements never move or go.
struct RecentFacts {
  static constexpr size_t kSlots = 64;
  struct Slot {
    const FunctionFactsCache* owner = nullptr;
    CUfunction f = nullptr;
    const FunctionFacts* facts = nullptr;
  };
  Slot slots[kSlots];
  static size_t slot_of(CUfunction f) { return (reinterpret_cast<uintptr_t>(f) >> 4) % kSlots; }
};

// What one launching thread keeps from launch to launch for the two functions below. Held by
// the caller, launch_api.cpp's per-thread state, and passed down: each thread-local of a shared
// library is a call to __tls_get_addr at each use (~11 instructions, twice for one with a
// destructor), and these three, each in its own thread-local, were six of a settled launch's ten
// (issue 21). Not thread-safe: one per thread.
struct LaunchScratch {
  RecentFacts recent;
  KnownAddresses known;        // known_addresses.h
  RecentSignatures signatures;  // recent_signatures.h
  std::vector<uint8_t> block;  // the packed parameter block, its buffer reused (no allocation per launch)
  // The root's FunctionFactsCache once known (it is never destroyed): function_facts() looked it
  // up through the backend's root on every launch, a static's guard on a cache line of its own
  // (issue 21). Beside `block`, which every launch with parameters reads.
  FunctionFactsCache* facts_cache = nullptr;
};

// The facts of `f` (a CUfunction, or a CUkernel as cudart passes them); cached per handle in
// the backend root's FunctionFactsCache, and in the calling thread's `scratch`. The reference
// stays valid for the life of the process.
const FunctionFacts& function_facts(CUfunction f, LaunchScratch& scratch);

// The facts of every function described so far (held by the root, passthrough.h).
class FunctionFactsCache {
 public:
  // `recent`: the calling thread's (RecentFacts).
  const FunctionFacts& of(CUfunction f, RecentFacts& recent);

 private:
  std::shared_mutex mu_;
  std::unordered_map<CUfunction, FunctionFacts> facts_;
};

// The launch signature of one launch of `f`, whose facts are `facts` (function_facts(f));
// false when the launch cannot be described (no facts, or parameters that neither kernelParams
// nor `extra` describe). `scratch`: the calling thread's. `derived`, when given and the signature
// was made: what the caller derives from it, remembered with it (RecentSignatures::Derived; valid
// until the thread's next call). `state`: the backend's (PassState::get(), which the caller
// holds already: a lookup through the backend's root).
bool launch_signature(PassState* state, CUfunction f, const FunctionFacts& facts, const LaunchShape& shape,
                      void** params, void** extra, LaunchScratch& scratch, LaunchSignature* out,
                      RecentSignatures::Derived** derived = nullptr);

}  // namespace vgpu::pt
