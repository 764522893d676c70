// CUmemLocation names a device by its ordinal: the program's is virtual, the real driver's
// physical. Host locations pass unchanged.
#pragma once

#include <vector>

#include "front/driver/cuda_api.h"
#include "passthrough/passthrough_state.h"

namespace vgpu::pt {

inline CUmemLocation to_physical(CUmemLocation loc) {
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) loc.id = physical_device(loc.id);
  return loc;
}

// A translated copy of `n` locations (empty for none); null with n > 0 stays for the real
// driver to refuse.
inline std::vector<CUmemLocation> to_physical(const CUmemLocation* locs, size_t n) {
  std::vector<CUmemLocation> out;
  if (locs == nullptr) return out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(to_physical(locs[i]));
  return out;
}

// The real entry point called with `args`; an entry point newer than the installed driver is
// not supported there, as the generated forwarders answer.
template <class Fn, class... Args>
CUresult call_real(Fn real, Args... args) {
  return real != nullptr ? real(args...) : CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace vgpu::pt
