// The address of a thread-local, kept for the rest of a function.
//
// In a shared library (dynamic TLS) GCC treats a thread-local's address as cheap to recompute
// and calls __tls_get_addr again at each use rather than keep it in a register or on the stack:
// `T& x = t_x;` and three uses of x made three calls (~15 instructions each; a settled
// cuLaunchKernel made 14, a tenth of an event record's own work was 7). An address the optimizer
// cannot see through is computed once and kept.
#pragma once

namespace vgpu::pt {

template <class T>
T& kept_address(T& thread_local_object) {
  T* p = &thread_local_object;
  asm("" : "+r"(p));
  return *p;
}

}  // namespace vgpu::pt
