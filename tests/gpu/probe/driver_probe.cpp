// Asks the REAL driver the questions whose answers vgpu must reproduce, and prints them as
// plain text so they can be kept as reference data:
//   proc <name> <version> <flags> <status> <symbol-or->   (cuGetProcAddress_v2 + dladdr)
//   attr <number> <value-or-error>                         (cuDeviceGetAttribute, device 0)
//   err <code> <name> | <string>                           (cuGetErrorName/String)
//   info <key> <value>                                     (name, total memory, free at start)
// Usage: driver_probe <libcuda path> <requests file: "name version" per line>
#include <cuda.h>
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#define LOAD(sym) auto p_##sym = reinterpret_cast<decltype(&sym)>(dlsym(h, #sym))

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  LOAD(cuInit); LOAD(cuGetProcAddress_v2); LOAD(cuDeviceGetAttribute); LOAD(cuGetErrorName);
  LOAD(cuGetErrorString); LOAD(cuDeviceGetName); LOAD(cuDeviceTotalMem_v2); LOAD(cuDriverGetVersion);
  LOAD(cuDevicePrimaryCtxRetain); LOAD(cuCtxSetCurrent); LOAD(cuMemGetInfo_v2); LOAD(cuDeviceGetCount);
  if (p_cuInit(0) != CUDA_SUCCESS) { fprintf(stderr, "cuInit failed\n"); return 1; }
  int v = 0; p_cuDriverGetVersion(&v); printf("info driver_version %d\n", v);
  int n = 0; p_cuDeviceGetCount(&n); printf("info device_count %d\n", n);
  char name[256]; p_cuDeviceGetName(name, sizeof name, 0); printf("info name %s\n", name);
  size_t total = 0; p_cuDeviceTotalMem_v2(&total, 0); printf("info total_mem %zu\n", total);
  for (int a = 0; a < 1000; ++a) {
    int val = 0; CUresult r = p_cuDeviceGetAttribute(&val, (CUdevice_attribute)a, 0);
    if (r == CUDA_SUCCESS) printf("attr %d %d\n", a, val); else printf("attr %d error%d\n", a, (int)r);
  }
  for (int e = 0; e < 1100; ++e) {
    const char* en = nullptr; const char* es = nullptr;
    if (p_cuGetErrorName((CUresult)e, &en) != CUDA_SUCCESS) continue;
    p_cuGetErrorString((CUresult)e, &es);
    printf("err %d %s | %s\n", e, en, es ? es : "(null)");
  }
  std::ifstream in(argv[2]);
  std::string sym; int ver;
  while (in >> sym >> ver) {
    for (unsigned long long flags = 0; flags < 3; ++flags) {
      void* fn = nullptr; CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
      CUresult r = p_cuGetProcAddress_v2(sym.c_str(), &fn, ver, flags, &st);
      Dl_info info{}; const char* s = "-";
      if (fn && dladdr(fn, &info) && info.dli_sname) s = info.dli_sname;
      printf("proc %s %d %llu %d %d %s\n", sym.c_str(), ver, flags, (int)r, (int)st, fn ? s : "-");
    }
  }
  CUcontext c; p_cuDevicePrimaryCtxRetain(&c, 0); p_cuCtxSetCurrent(c);
  size_t fr = 0, to = 0; p_cuMemGetInfo_v2(&fr, &to); printf("info free_at_start %zu total %zu\n", fr, to);
  return 0;
}
