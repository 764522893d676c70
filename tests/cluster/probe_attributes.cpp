// Prints what a driver answers for every CUdevice_attribute of device 0 (or argv[1]), as
// "CU_DEVICE_ATTRIBUTE_X value" lines, plus the name and total memory as '#' lines: the format of
// tests/cluster/data/*_real_attributes.txt, which the catalog tests compare against.
// Run against the real driver on a GPU machine to record a model; run with vgpu's libcuda.so.1
// first on LD_LIBRARY_PATH to see what the virtual devices answer.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace {
struct Attribute { CUdevice_attribute value; const char* name; };
constexpr Attribute kAttributes[] = {
#define VGPU_CU_ATTRIBUTE(name, value) {name, #name},
#include "cu_device_attributes.inc"
};
template <class F> F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}
}  // namespace

int main(int argc, char** argv) {
  const int ordinal = argc > 1 ? std::atoi(argv[1]) : 0;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) { std::fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror()); return 1; }
  auto init = sym<CUresult (*)(unsigned)>(lib, "cuInit");
  auto get_device = sym<CUresult (*)(CUdevice*, int)>(lib, "cuDeviceGet");
  auto get_name = sym<CUresult (*)(char*, int, CUdevice)>(lib, "cuDeviceGetName");
  auto total_mem = sym<CUresult (*)(size_t*, CUdevice)>(lib, "cuDeviceTotalMem_v2");
  auto driver_version = sym<CUresult (*)(int*)>(lib, "cuDriverGetVersion");
  auto get_attribute = sym<CUresult (*)(int*, CUdevice_attribute, CUdevice)>(lib, "cuDeviceGetAttribute");
  if (!init || !get_device || !get_name || !total_mem || !driver_version || !get_attribute) {
    std::fprintf(stderr, "libcuda.so.1 lacks a needed entry point\n");
    return 1;
  }
  CUdevice dev = 0;
  if (CUresult r = init(0); r != CUDA_SUCCESS) { std::fprintf(stderr, "cuInit: %d\n", r); return 1; }
  if (CUresult r = get_device(&dev, ordinal); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuDeviceGet(%d): %d\n", ordinal, r);
    return 1;
  }
  char name[256] = {};
  size_t bytes = 0;
  int version = 0;
  get_name(name, sizeof name, dev);
  total_mem(&bytes, dev);
  driver_version(&version);
  std::printf("# name %s\n# total_mem %zu\n# driver_api %d\n", name, bytes, version);
  for (const Attribute& a : kAttributes) {
    int v = 0;
    if (CUresult r = get_attribute(&v, a.value, dev); r == CUDA_SUCCESS)
      std::printf("%s %d\n", a.name, v);
    else
      std::printf("# %s error %d\n", a.name, r);
  }
  return 0;
}
