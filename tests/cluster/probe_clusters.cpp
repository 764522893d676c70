// Prints what a driver answers to cuOccupancyMaxActiveClusters for an empty kernel at every
// cluster size from 1 to 16, with dynamic shared memory that leaves 1, 2 and 4 blocks per SM:
// "clusters blocks_per_sm=B size=S N" lines. cuBLASLt sizes its persistent Hopper GEMMs by this
// answer (a grid of 2 x 66 clusters on a 132-SM part), so the sim backend must give what the
// real part gives for the kernels it picks to be the same. Run against the real driver on a GPU
// machine to record a model (tests/cluster/data/*_real_clusters.txt), or with vgpu's
// libcuda.so.1 first on LD_LIBRARY_PATH to see what a virtual device answers.
#include "probe_driver.h"

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace {
using probe::sym;

// An empty kernel (sm_90, any driver JITs it).
constexpr char kPtx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry probe_kernel() { ret; }
)";
}  // namespace

int main(int argc, char** argv) {
  const probe::Device d = probe::open_device(argc, argv);
  if (!d.lib) return 1;
  auto retain = sym<CUresult (*)(CUcontext*, CUdevice)>(d.lib, "cuDevicePrimaryCtxRetain");
  auto set_current = sym<CUresult (*)(CUcontext)>(d.lib, "cuCtxSetCurrent");
  auto load = sym<CUresult (*)(CUmodule*, const void*)>(d.lib, "cuModuleLoadData");
  auto get_function = sym<CUresult (*)(CUfunction*, CUmodule, const char*)>(d.lib, "cuModuleGetFunction");
  auto set_attribute = sym<CUresult (*)(CUfunction, CUfunction_attribute, int)>(d.lib, "cuFuncSetAttribute");
  auto clusters = sym<CUresult (*)(int*, CUfunction, const CUlaunchConfig*)>(d.lib, "cuOccupancyMaxActiveClusters");
  if (!retain || !set_current || !load || !get_function || !set_attribute || !clusters) {
    std::fprintf(stderr, "libcuda.so.1 lacks a needed entry point\n");
    return 1;
  }
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  if (retain(&ctx, d.dev) != CUDA_SUCCESS || set_current(ctx) != CUDA_SUCCESS) {
    std::fprintf(stderr, "no context on device %d\n", d.ordinal);
    return 1;
  }
  if (CUresult r = load(&mod, kPtx); r != CUDA_SUCCESS) { std::fprintf(stderr, "cuModuleLoadData: %d\n", r); return 1; }
  if (get_function(&fn, mod, "probe_kernel") != CUDA_SUCCESS) { std::fprintf(stderr, "no probe_kernel\n"); return 1; }
  int sms = 0, smem_sm = 0, optin = 0, reserved = 0;
  d.get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.dev);
  d.get_attribute(&smem_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, d.dev);
  d.get_attribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d.dev);
  d.get_attribute(&reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, d.dev);
  std::printf("# SMs %d, shared memory per SM %d, per block opt-in %d, reserved per block %d\n", sms, smem_sm, optin,
              reserved);
  set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin);
  set_attribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  for (int per_sm : {1, 2, 4}) {
    const unsigned shared = static_cast<unsigned>(smem_sm / per_sm - reserved - 1024);
    for (unsigned size = 1; size <= 16; ++size) {
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr.value.clusterDim.x = size;
      attr.value.clusterDim.y = 1;
      attr.value.clusterDim.z = 1;
      CUlaunchConfig config{};
      config.gridDimX = size;
      config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = 128;
      config.blockDimY = config.blockDimZ = 1;
      config.sharedMemBytes = shared;
      config.attrs = &attr;
      config.numAttrs = 1;
      int n = -1;
      const CUresult r = clusters(&n, fn, &config);
      std::printf("clusters blocks_per_sm=%d size=%u %d%s\n", per_sm, size, r == CUDA_SUCCESS ? n : -1,
                  r == CUDA_SUCCESS ? "" : " (error)");
    }
  }
  return 0;
}
