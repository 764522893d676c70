// The answer of an entry point vgpu does not implement, shared by both backends: one log line
// naming it (the first time) and CUDA_ERROR_NOT_SUPPORTED.
#include "common/log.h"
#include "front/driver/entry_points.h"

namespace vgpu {

CUresult unimplemented(const char* symbol) {
  log::once(log::Level::warn, symbol,
            fmt::format("{} is not implemented by vgpu: returning CUDA_ERROR_NOT_SUPPORTED", symbol));
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace vgpu
