// The small slots: the tools tables (callback buffers, the thread's context), the context
// checks and the context id. Each answers what the real driver answered when measured
// (tests/darkapi/data/real_driver_probe_h200_580.txt).
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/log.h"
#include "front/driver/query_lines.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/darkapi/slots.h"

namespace vgpu::darkapi::slots {
namespace {

// A profiler switches runtime callbacks on by writing here; without one they stay zero. The
// sizes are the ones the real driver reports; the storage is four times that, in case the
// runtime counts 32-bit words rather than bytes.
alignas(64) uint32_t g_callback_buffer1[1024];
alignas(64) uint32_t g_callback_buffer2[14];

// The zeroed block slot [51] hands out, one per context: the library may keep the address and
// read (or write) it for the context's lifetime, so blocks are never freed (a few KiB each).
class ContextBlocks {
 public:
  static ContextBlocks& get() {
    static ContextBlocks* b = new ContextBlocks;  // asked until exit
    return *b;
  }
  void* block(CUcontext ctx) {
    std::lock_guard l(mu_);
    auto& b = blocks_[ctx];
    if (!b) b = std::make_unique<Block>();
    return b->words;
  }

 private:
  struct Block {
    alignas(64) uint64_t words[512] = {};
  };
  std::mutex mu_;
  std::unordered_map<CUcontext, std::unique_ptr<Block>> blocks_;
};

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

CUresult context_check(CUcontext ctx, uint32_t* flags, const void**) {
  // A handle that is no context of this driver is refused, as every public entry point taking
  // one refuses it (the passthrough's tests rely on it: it must never hand a stub on).
  // A primary context not yet active is known (cudart checks it before it retains it).
  if (ctx != nullptr) {
    const DriverState* d = DriverState::get();
    if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    if (d->contexts().find(ctx) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (flags) *flags = 0;
  return CUDA_SUCCESS;
}

uint32_t context_check_global() { return 0; }

CUresult context_id(CUcontext ctx, unsigned long long* id) { return cuCtxGetId(ctx, id); }

namespace {

// The guessed slots' calls in VGPU_QUERY_TRACE, in the words the passthrough uses for the real
// driver's (passthrough/traced_slots.cpp), so that the answers compare.
template <class... A> CUresult traced(size_t slot, CUresult r, A... a) {
  if (query_trace::enabled()) {
    const uintptr_t regs[6] = {(uintptr_t)a...};
    query_trace::private_slot("21318c60", slot, regs, static_cast<uint64_t>(r));
  }
  return r;
}

}  // namespace

CUresult context_object(CUcontext ctx, uint64_t arg1, void** out, uint64_t arg3, uint64_t kind, const void* arg5) {
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (out != nullptr) {
    *out = ContextBlocks::get().block(ctx);
    r = CUDA_SUCCESS;
  }
  return traced(51, r, ctx, arg1, out, arg3, kind, arg5);
}

CUresult context_lookup(CUcontext ctx, const void* arg1, void** out, uint64_t arg3, uint64_t kind, const void* arg5) {
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (out != nullptr) {
    *out = nullptr;
    r = CUDA_SUCCESS;
  }
  return traced(39, r, ctx, arg1, out, arg3, kind, arg5);
}

}  // namespace vgpu::darkapi::slots
