#include "passthrough/passthrough.h"

#include "front/launch/kernel_time_db.h"
#include "passthrough/kernel_recording.h"
#include "passthrough/real_driver.h"
#include "passthrough/virtual_time.h"

namespace vgpu::pt {

std::atomic<PassState*> published_state{nullptr};

Passthrough& Passthrough::get() {
  static Passthrough* root = new Passthrough;  // never destroyed: exit handlers call the driver
  return *root;
}

CUresult Passthrough::initialize(unsigned int flags) {
  const RealDriver* real = RealDriver::get();
  if (real == nullptr) return CUDA_ERROR_NO_DEVICE;
  auto real_init = real->fn<CUresult (*)(unsigned int)>("cuInit");
  if (CUresult r = real_init ? real_init(flags) : CUDA_ERROR_NOT_INITIALIZED; r != CUDA_SUCCESS)
    return r;
  std::call_once(init_once_, [this, real] {
    PassState* s = nullptr;
    init_result_ = PassState::create(*real, &s);
    if (init_result_ == CUDA_SUCCESS) {
      state_.store(s, std::memory_order_release);
      published_state.store(s, std::memory_order_release);
    }
  });
  return init_result_;
}

VirtualTime* Passthrough::virtual_time() {
  if (state() == nullptr) return nullptr;
  return &virtual_time_.get([] { return VirtualTime::make(); });
}

KernelDurations& Passthrough::durations() {
  return durations_.get([] { return new KernelDurations; });
}

KernelRecording* Passthrough::kernel_recording() {
  // Asked on every launch: once made, one acquire load (std::call_once's check is a call into
  // pthread_once each time).
  if (recording_made_.load(std::memory_order_acquire)) return recording_;
  std::call_once(recording_once_, [this] {
    recording_ = KernelRecording::start();
    recording_made_.store(true, std::memory_order_release);
  });
  return recording_;
}

}  // namespace vgpu::pt
