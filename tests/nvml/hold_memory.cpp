// A sim-backend program that holds memory on virtual devices 1 and 3 until its stdin closes, and
// prints what the driver says about every device, so the tests compare vgpu-smi and NVML with
// the driver's own numbers rather than with constants:
//   DEVICE <ordinal> UUID <GPU-...> PCI <bus id> TOTAL <bytes> USED <bytes>
//   KERNELS <device> <count>
//   PID <pid>
//   READY
// On device 1 it also runs kKernels back-to-back kernels (an empty PTX kernel over a grid large
// enough for the fallback model to give each 5 ms), so that monitors see a busy device.
// USED is total - free from cuMemGetInfo on that device after the allocations (the context's
// charge included); 0 on devices the program never touched.
#include <cuda.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  std::fprintf(stderr, "hold_memory: %s failed: %d\n", what, static_cast<int>(r));
  return false;
}

std::string uuid_text(const CUuuid& u) {
  std::string s = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(u.bytes[i]));
    s += hex;
  }
  return s;
}

constexpr int kKernels = 300;
constexpr const char* kPtx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry busy(.param .u64 busy_param_0)
{
	ret;
}
)";

// Runs kKernels launches of `busy` on the current context and waits for them.
bool run_kernels() {
  CUmodule module;
  CUfunction busy;
  if (!ok(cuModuleLoadData(&module, kPtx), "cuModuleLoadData") ||
      !ok(cuModuleGetFunction(&busy, module, "busy"), "cuModuleGetFunction"))
    return false;
  unsigned long long n = 1ull << 30;
  void* params[] = {&n};
  for (int i = 0; i < kKernels; ++i)
    if (!ok(cuLaunchKernel(busy, 1u << 20, 1, 1, 1024, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel"))
      return false;
  return ok(cuCtxSynchronize(), "cuCtxSynchronize");
}

}  // namespace

int main() {
  constexpr int kDevices[] = {1, 3};
  constexpr size_t kBytes[] = {(1ull << 30) + (3ull << 20), 256ull << 20};  // 1 GiB + 3 MiB, 256 MiB
  if (!ok(cuInit(0), "cuInit")) return 1;
  int count = 0;
  if (!ok(cuDeviceGetCount(&count), "cuDeviceGetCount") || count < 4) return 1;
  size_t used[64] = {};
  for (int k = 0; k < 2; ++k) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    size_t free_b = 0, total_b = 0;
    if (!ok(cuDeviceGet(&dev, kDevices[k]), "cuDeviceGet") || !ok(cuDevicePrimaryCtxRetain(&ctx, dev), "retain") ||
        !ok(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") || !ok(cuMemAlloc(&p, kBytes[k]), "cuMemAlloc") ||
        !ok(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo"))
      return 1;
    used[kDevices[k]] = total_b - free_b;
    if (kDevices[k] == 1) {
      if (!run_kernels() || !ok(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo")) return 1;
      used[1] = total_b - free_b;  // the module's memory included
      std::printf("KERNELS 1 %d\n", kKernels);
    }
  }
  for (int d = 0; d < count && d < 64; ++d) {
    CUuuid uuid;
    char bus[64] = {};
    size_t total = 0;
    if (!ok(cuDeviceGetUuid(&uuid, d), "cuDeviceGetUuid") || !ok(cuDeviceGetPCIBusId(bus, sizeof bus, d), "bus id") ||
        !ok(cuDeviceTotalMem(&total, d), "cuDeviceTotalMem"))
      return 1;
    std::printf("DEVICE %d UUID %s PCI %s TOTAL %zu USED %zu\n", d, uuid_text(uuid).c_str(), bus, total, used[d]);
  }
  std::printf("PID %d\nREADY\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}
