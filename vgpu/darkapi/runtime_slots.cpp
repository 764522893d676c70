// The small slots: the tools tables (callback buffers, the thread's context), the context
// checks and the context id. Each answers what the real driver answered when measured
// (tests/darkapi/data/real_driver_probe_h200_580.txt).
#include <cstdint>

#include "common/log.h"
#include "darkapi/slots.h"

namespace vgpu::darkapi::slots {
namespace {

// A profiler switches runtime callbacks on by writing here; without one they stay zero. The
// sizes are the ones the real driver reports; the storage is four times that, in case the
// runtime counts 32-bit words rather than bytes.
alignas(64) uint32_t g_callback_buffer1[1024];
alignas(64) uint32_t g_callback_buffer2[14];

}  // namespace

void callback_buffer1(void** ptr, size_t* size) {
  if (ptr) *ptr = g_callback_buffer1;
  if (size) *size = std::size(g_callback_buffer1);
}

void callback_buffer2(void** ptr, size_t* size) {
  if (ptr) *ptr = g_callback_buffer2;
  if (size) *size = std::size(g_callback_buffer2);
}

CUresult current_context(CUcontext* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuCtxGetCurrent(out);
}

CUresult context_check(CUcontext, uint32_t* flags, const void**) {
  if (flags) *flags = 0;
  return CUDA_SUCCESS;
}

uint32_t context_check_global() { return 0; }

CUresult context_id(CUcontext ctx, unsigned long long* id) { return cuCtxGetId(ctx, id); }

}  // namespace vgpu::darkapi::slots
