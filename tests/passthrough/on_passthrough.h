// Whether the test runs over vgpu's passthrough libcuda.so.1 (its tests also run over the sim's,
// as the control): the library cuInit comes from, by its folder.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <string>

inline bool running_on_passthrough() {
  Dl_info info{};
  return dladdr(reinterpret_cast<void*>(&cuInit), &info) != 0 && info.dli_fname &&
         std::string(info.dli_fname).find("/passthrough/") != std::string::npos;
}
