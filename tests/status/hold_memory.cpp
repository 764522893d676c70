// A program that holds memory on virtual devices 1 and 3 through several allocation paths until
// its stdin closes, and prints what the driver says each device has in use, so that the test
// compares the status region (through vgpu-smi) with the driver's own numbers:
//   DEVICE <ordinal> CONTEXT <bytes> USED <bytes>
//                       (total - free from cuMemGetInfo once the device's context is made, and
//                       at the end; 0 if never touched)
//   REAL CONTEXT <bytes> USED <bytes>
//                       (passthrough only: the same from the real driver, whose one device
//                       holds every virtual device)
//   LIBRARY <path of the libcuda.so.1 it runs on>
//   READY
// Built twice: on the sim backend, and on the passthrough backend. For the passthrough one the
// test names the sim library serving as its real driver (VGPU_REAL_LIBCUDA) and a job for it
// (STATUS_REAL_JOB_ID): this program initializes that real driver first under that job, so the
// real driver's own status (all memory on its one device) goes to a region of its own and the
// job's region holds the virtual devices only, as it would over a real GPU.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  std::fprintf(stderr, "hold_memory: %s failed: %d\n", what, static_cast<int>(r));
  return false;
}

void* g_real = nullptr;  // the real driver under the passthrough; null on the sim backend

bool init_real_driver_under_its_own_job() {
  const char* real = std::getenv("VGPU_REAL_LIBCUDA");
  const char* real_job = std::getenv("STATUS_REAL_JOB_ID");
  if (real == nullptr || real_job == nullptr) return true;
  const std::string job = std::getenv("VGPU_JOB_ID") ? std::getenv("VGPU_JOB_ID") : "";
  void* h = g_real = dlopen(real, RTLD_NOW | RTLD_LOCAL);  // the handle the passthrough will get too
  auto init = h ? reinterpret_cast<CUresult (*)(unsigned)>(dlsym(h, "cuInit")) : nullptr;
  if (init == nullptr) {
    std::fprintf(stderr, "hold_memory: cannot load %s\n", real);
    return false;
  }
  setenv("VGPU_JOB_ID", real_job, 1);
  const CUresult r = init(0);
  setenv("VGPU_JOB_ID", job.c_str(), 1);
  return ok(r, "the real driver's cuInit");
}

bool use(int device, CUcontext* ctx) {
  CUdevice dev;
  return ok(cuDeviceGet(&dev, device), "cuDeviceGet") && ok(cuDevicePrimaryCtxRetain(ctx, dev), "retain") &&
         ok(cuCtxSetCurrent(*ctx), "cuCtxSetCurrent");
}

size_t used_now() {
  size_t free_b = 0, total_b = 0;
  return ok(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo") ? total_b - free_b : 0;
}

// The same from the real driver (the real context of the current virtual device is current
// there too).
size_t real_used_now() {
  auto info = reinterpret_cast<CUresult (*)(size_t*, size_t*)>(dlsym(g_real, "cuMemGetInfo_v2"));
  size_t free_b = 0, total_b = 0;
  return info != nullptr && ok(info(&free_b, &total_b), "the real driver's cuMemGetInfo") ? total_b - free_b : 0;
}

}  // namespace

int main() {
  if (!init_real_driver_under_its_own_job() || !ok(cuInit(0), "cuInit")) return 1;
  int count = 0;
  if (!ok(cuDeviceGetCount(&count), "cuDeviceGetCount") || count < 4 || count > 64) return 1;
  size_t context[64] = {}, used[64] = {};
  CUcontext ctx;
  if (!use(1, &ctx)) return 1;
  context[1] = used_now();
  if (!use(3, &ctx)) return 1;
  context[3] = used_now();
  const size_t real_context = g_real ? real_used_now() : 0;
  CUdeviceptr p;
  // Device 1: plain device memory, not a whole number of pages.
  if (!use(1, &ctx) || !ok(cuMemAlloc(&p, (1ull << 30) + (3ull << 20)), "cuMemAlloc")) return 1;
  used[1] = used_now();
  // Device 3: device memory, a CUDA array and a VMM allocation.
  if (!use(3, &ctx) || !ok(cuMemAlloc(&p, 256ull << 20), "cuMemAlloc")) return 1;
  CUDA_ARRAY3D_DESCRIPTOR ad{};
  ad.Width = 1024;
  ad.Height = 1024;
  ad.Format = CU_AD_FORMAT_FLOAT;
  ad.NumChannels = 4;
  CUarray array;
  if (!ok(cuArray3DCreate(&array, &ad), "cuArray3DCreate")) return 1;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 3;
  CUmemGenericAllocationHandle handle;
  if (!ok(cuMemCreate(&handle, 64ull << 20, &prop, 0), "cuMemCreate")) return 1;
  used[3] = used_now();
  for (int d = 0; d < count; ++d) std::printf("DEVICE %d CONTEXT %zu USED %zu\n", d, context[d], used[d]);
  if (g_real != nullptr) std::printf("REAL CONTEXT %zu USED %zu\n", real_context, real_used_now());
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuInit), &info) != 0 && info.dli_fname != nullptr)
    std::printf("LIBRARY %s\n", info.dli_fname);
  std::printf("READY\n");
  std::fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}
