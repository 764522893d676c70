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

namespace vgpu::pt {

struct FunctionFacts {
  bool ok = false;
  std::string name;
  bool nccl = false;  // an NCCL kernel (nccl_timing::is_nccl_kernel: a name search, once per function)
  std::vector<ParamSlot> slots;
  uint32_t block_bytes = 0;  // packed parameter block size
};

// The facts of `f` (a CUfunction, or a CUkernel as cudart passes them); cached per handle in
// the backend root's FunctionFactsCache. The reference stays valid for the life of the process.
const FunctionFacts& function_facts(CUfunction f);

// The facts of every function described so far (held by the root, passthrough.h).
class FunctionFactsCache {
 public:
  const FunctionFacts& of(CUfunction f);

 private:
  std::shared_mutex mu_;
  std::unordered_map<CUfunction, FunctionFacts> facts_;
};

// The launch signature of one launch of `f`, whose facts are `facts` (function_facts(f));
// false when the launch cannot be described (no facts, or parameters that neither kernelParams
// nor `extra` describe).
bool launch_signature(CUfunction f, const FunctionFacts& facts, const LaunchShape& shape, void** params,
                      void** extra, LaunchSignature* out);

}  // namespace vgpu::pt
