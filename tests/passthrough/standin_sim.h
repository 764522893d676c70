// The stand-in "real drivers" of the passthrough's tests (recording_driver.cpp and the
// *_overrides.cpp beside it) forward to the sim backend's library, opened by path
// (VGPU_SIM_LIBCUDA) rather than linked: a DT_NEEDED on libcuda.so.1 would bind to the
// passthrough itself, already loaded under that soname.
#pragma once

#include <dlfcn.h>

#include <cstdlib>

namespace vgpu_test {

inline void* sim_library() {
  static void* const h = dlopen(std::getenv("VGPU_SIM_LIBCUDA"), RTLD_NOW | RTLD_LOCAL);
  return h;
}

// The sim's entry point `name`, as `Fn`; nullptr when the library or the symbol is missing.
template <class Fn>
Fn sim_entry(const char* name) {
  void* h = sim_library();
  return h ? reinterpret_cast<Fn>(dlsym(h, name)) : nullptr;
}

}  // namespace vgpu_test
