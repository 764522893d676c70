// The generated list of every entry point the driver exports (entries.inc, made from the
// toolkit's headers by vgpu/front/gen/gen_driver_surface.py) and what vgpu does for the ones it does
// not implement.
#pragma once

#include "front/driver/cuda_api.h"

namespace vgpu {

// The answer of every entry point vgpu does not implement (yet): CUDA_ERROR_NOT_SUPPORTED, and
// a log line naming the symbol the first time it is called.
CUresult unimplemented(const char* symbol);

// "CUDA_ERROR_INVALID_VALUE" for CUDA_ERROR_INVALID_VALUE; "unknown error" for a code cuda.h
// does not define.
const char* error_name(CUresult r);

// One row of cuGetProcAddress's table: `api` at ABI `version` is `fn`; per_thread marks the
// _ptds/_ptsz variants.
struct ProcEntry {
  const char* api;
  int version;
  int per_thread;
  void* fn;
};
// Sorted by api, then version.
const ProcEntry* proc_table_begin();
const ProcEntry* proc_table_end();

}  // namespace vgpu
