// CUDA arrays under the passthrough backend (array_api.cpp): what the rest of the backend needs
// to know about their charges.
#pragma once

#include "front/driver/cuda_api.h"

namespace vgpu::pt {

// A context was destroyed: the real driver destroyed its arrays and mipmapped arrays with it,
// so their charges go back to their virtual devices. Call after the real cuCtxDestroy succeeds.
void arrays_destroyed_with(CUcontext ctx);

}  // namespace vgpu::pt
