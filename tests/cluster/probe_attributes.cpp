// Prints what a driver answers for every CUdevice_attribute of device 0 (or argv[1]), as
// "CU_DEVICE_ATTRIBUTE_X value" lines, plus the name and total memory as '#' lines: the format of
// tests/cluster/data/*_real_attributes.txt, which the catalog tests compare against.
// Run against the real driver on a GPU machine to record a model; run with vgpu's libcuda.so.1
// first on LD_LIBRARY_PATH to see what the virtual devices answer.
#include "probe_driver.h"

#include <cstdio>
#include <cstdlib>

namespace {
using probe::sym;
struct Attribute { CUdevice_attribute value; const char* name; };
constexpr Attribute kAttributes[] = {
#define VGPU_CU_ATTRIBUTE(name, value) {name, #name},
#include "cu_device_attributes.inc"
};
}  // namespace

int main(int argc, char** argv) {
  const probe::Device d = probe::open_device(argc, argv);
  if (!d.lib) return 1;
  void* lib = d.lib;
  const CUdevice dev = d.dev;
  auto get_name = sym<CUresult (*)(char*, int, CUdevice)>(lib, "cuDeviceGetName");
  auto total_mem = sym<CUresult (*)(size_t*, CUdevice)>(lib, "cuDeviceTotalMem_v2");
  auto driver_version = sym<CUresult (*)(int*)>(lib, "cuDriverGetVersion");
  if (!get_name || !total_mem || !driver_version) {
    std::fprintf(stderr, "libcuda.so.1 lacks a needed entry point\n");
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
    if (CUresult r = d.get_attribute(&v, a.value, dev); r == CUDA_SUCCESS)
      std::printf("%s %d\n", a.name, v);
    else
      std::printf("# %s error %d\n", a.name, r);
  }
  return 0;
}
