// One engine for every copy and set of the sim backend. Each entry point describes its copy as
// a 3D region pair (a 1D copy is width x 1 x 1), the engine resolves both ends (bounds-checked
// against their allocation or array, CUDA_ERROR_INVALID_VALUE when out of range), prices it and
// hands a Work to the stream.
//
// Virtual cost: front/launch/copy_cost.h; between two devices a simcore transfer {src, dst, bytes} over
// the simulated NVLink/network.
#pragma once

#include <cstddef>
#include <cstdint>

#include "front/driver/cuda_api.h"

namespace vgpu::sim {

// How the entry point wants the work run.
struct Submit {
  CUstream stream = nullptr;
  bool async = false;
  bool per_thread = false;
};

// cuMemcpy3D-style copy: the common form every other copy is turned into.
CUresult copy3d(const char* call, const CUDA_MEMCPY3D& copy, Submit how);
// A 1D copy between two unified addresses (cuMemcpy, HtoD, DtoH, DtoD, ...).
// `dst_type`/`src_type` say what the entry point expects each side to be: CU_MEMORYTYPE_HOST
// (any host pointer), CU_MEMORYTYPE_DEVICE (must be device-accessible memory vgpu knows) or
// CU_MEMORYTYPE_UNIFIED (inferred).
CUresult copy1d(const char* call, CUmemorytype dst_type, uintptr_t dst, CUmemorytype src_type,
                uintptr_t src, size_t bytes, Submit how);
// cuMemsetD{8,16,32} and D2D: `element` bytes of `value` repeated width x height rows of
// `pitch` bytes.
CUresult memset2d(const char* call, CUdeviceptr dst, size_t pitch, uint32_t value, unsigned element,
                  size_t width, size_t height, Submit how);

}  // namespace vgpu::sim
