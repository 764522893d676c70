// A stand-in for vgpu's driver, for the shim's own tests (fake_driver_test.cpp): it serves only
// the clock table (contracts/vgpu_clock_table.h) and hands it to the shim when loaded, as the real
// driver does, and each thread's answer is whatever the test set for it.
#include <dlfcn.h>

#include <cstdint>

#include "contracts/vgpu_clock_table.h"

namespace {

thread_local int t_answer = vgpu::darkapi::kClockNone;
thread_local double t_seconds = 0;

int thread_virtual_now(double* seconds) {
  if (seconds == nullptr) return vgpu::darkapi::kClockNone;
  if (t_answer == vgpu::darkapi::kClockVirtual) *seconds = t_seconds;
  return t_answer;
}

int version() { return vgpu::darkapi::kVgpuClockTableVersion; }

const void* const kTable[] = {
    reinterpret_cast<const void*>(static_cast<uintptr_t>(3 * sizeof(void*))),
    reinterpret_cast<const void*>(&thread_virtual_now),
    reinterpret_cast<const void*>(&version),
};

__attribute__((constructor)) void announce() {
  using Attach = void (*)(const void*);
  if (auto attach = reinterpret_cast<Attach>(dlsym(RTLD_DEFAULT, "vgpu_vclock_attach")))
    attach(kTable);
}

}  // namespace

// What the calling thread's next clock readings get from the "driver".
extern "C" __attribute__((visibility("default"))) void fake_clock_set(int answer, double seconds) {
  t_answer = answer;
  t_seconds = seconds;
}
