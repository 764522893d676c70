// What the probe programs (probe_attributes.cpp, probe_clusters.cpp) share: whichever
// libcuda.so.1 the library path finds first (the real driver, or vgpu's), and its entry points
// by name, so that one binary probes either.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace probe {

// The driver, or nullptr after saying why.
inline void* open_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) std::fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
  return lib;
}

template <class F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

// The driver initialised and device argv[1] (default 0) found; `lib` is null after saying why.
struct Device {
  void* lib = nullptr;
  CUdevice dev = 0;
  int ordinal = 0;
  CUresult (*get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
};
inline Device open_device(int argc, char** argv) {
  Device d;
  d.ordinal = argc > 1 ? std::atoi(argv[1]) : 0;
  void* lib = open_driver();
  if (!lib) return d;
  auto init = sym<CUresult (*)(unsigned)>(lib, "cuInit");
  auto get_device = sym<CUresult (*)(CUdevice*, int)>(lib, "cuDeviceGet");
  d.get_attribute = sym<decltype(d.get_attribute)>(lib, "cuDeviceGetAttribute");
  if (!init || !get_device || !d.get_attribute) {
    std::fprintf(stderr, "libcuda.so.1 lacks cuInit, cuDeviceGet or cuDeviceGetAttribute\n");
    return d;
  }
  if (CUresult r = init(0); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuInit: %d\n", r);
    return d;
  }
  if (CUresult r = get_device(&d.dev, d.ordinal); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuDeviceGet(%d): %d\n", d.ordinal, r);
    return d;
  }
  d.lib = lib;
  return d;
}

}  // namespace probe
