// Entry points: kernel launches (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and
// their per-thread-default-stream _ptsz forms) and the occupancy calculator (cuOccupancy*).
#include <cstring>

#include "front/driver/query_lines.h"
#include "sim/exec/module_api_util.h"

using vgpu::LaunchRequest;
namespace q = vgpu::query_trace;

namespace {

LaunchRequest request(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                      unsigned int by, unsigned int bz, unsigned int shared, CUstream stream,
                      void** params, void** extra, const char* api) {
  LaunchRequest r;
  r.function = f;
  r.shape.grid = {gx, gy, gz};
  r.shape.block = {bx, by, bz};
  r.shape.dynamic_shared = shared;
  r.stream = stream;
  r.kernel_params = params;
  r.extra = extra;
  r.api = api;
  return r;
}

// The highest CUlaunchAttributeID of the toolkit vgpu is built with (CUDA 13:
// CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING).
constexpr int kLastLaunchAttribute = 16;

CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra,
                   bool per_thread, const char* api) {
  VGPU_MODULE_CALL(api, config);
  if (config->numAttrs && !config->attrs) {
    vgpu::log::warn("{}: {} launch attributes but attrs is NULL", api, config->numAttrs);
    return CUDA_ERROR_INVALID_VALUE;
  }
  LaunchRequest r = request(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                            config->blockDimY, config->blockDimZ, config->sharedMemBytes,
                            config->hStream, params, extra, api);
  for (unsigned int i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    // The id as the program stored it: read as an int first, because loading a value outside
    // CUlaunchAttributeID (12345, say) as the enum is undefined behaviour.
    int id;
    std::memcpy(&id, &a.id, sizeof id);
    if (id < 0 || id > kLastLaunchAttribute) {
      vgpu::log::warn("{}: unknown launch attribute {}", api, id);
      return CUDA_ERROR_INVALID_VALUE;
    }
    switch (id) {
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: r.cooperative = a.value.cooperative != 0; break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        r.cluster = {a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z};
        break;
      case CU_LAUNCH_ATTRIBUTE_PRIORITY: r.priority = a.value.priority; break;
      default:
        // Scheduling hints (access policy, programmatic serialization, memory sync domains,
        // preferred cluster, completion events...) change nothing in the simulated duration.
        break;
    }
  }
  return m->launch(r, per_thread);
}

CUresult launch(const LaunchRequest& r, bool per_thread) {
  VGPU_MODULE_CALL(r.api);
  return m->launch(r, per_thread);
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                            unsigned int gridDimZ, unsigned int blockDimX,
                                            unsigned int blockDimY, unsigned int blockDimZ,
                                            unsigned int sharedMemBytes, CUstream hStream,
                                            void** kernelParams, void** extra) {
  VGPU_CALL_SCOPE();
  return launch(request(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                        sharedMemBytes, hStream, kernelParams, extra, "cuLaunchKernel"),
                false);
}

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                 unsigned int gridDimY, unsigned int gridDimZ,
                                                 unsigned int blockDimX, unsigned int blockDimY,
                                                 unsigned int blockDimZ, unsigned int sharedMemBytes,
                                                 CUstream hStream, void** kernelParams, void** extra) {
  VGPU_CALL_SCOPE();
  return launch(request(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                        sharedMemBytes, hStream, kernelParams, extra, "cuLaunchKernel_ptsz"),
                true);
}

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                              void** kernelParams, void** extra) {
  VGPU_CALL_SCOPE();
  return launch_ex(config, f, kernelParams, extra, false, "cuLaunchKernelEx");
}

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                                   void** kernelParams, void** extra) {
  VGPU_CALL_SCOPE();
  return launch_ex(config, f, kernelParams, extra, true, "cuLaunchKernelEx_ptsz");
}

VGPU_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                                       unsigned int gridDimY, unsigned int gridDimZ,
                                                       unsigned int blockDimX, unsigned int blockDimY,
                                                       unsigned int blockDimZ,
                                                       unsigned int sharedMemBytes, CUstream hStream,
                                                       void** kernelParams) {
  VGPU_CALL_SCOPE();
  LaunchRequest r = request(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                            sharedMemBytes, hStream, kernelParams, nullptr, "cuLaunchCooperativeKernel");
  r.cooperative = true;
  return launch(r, false);
}

VGPU_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  VGPU_CALL_SCOPE();
  LaunchRequest r = request(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                            sharedMemBytes, hStream, kernelParams, nullptr,
                            "cuLaunchCooperativeKernel_ptsz");
  r.cooperative = true;
  return launch(r, true);
}

// ---- occupancy ----

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuOccupancyMaxActiveBlocksPerMultiprocessor", numBlocks);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~unsigned{CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE}) == 0)
    r = m->max_active_blocks(func, blockSize, dynamicSMemSize, numBlocks);
  if (q::enabled())
    q::max_active_blocks("cuOccupancyMaxActiveBlocksPerMultiprocessor", vgpu::traced_name(m, func), blockSize,
                         dynamicSMemSize, flags, r, numBlocks);
  return r;
}

// cuBLAS asks these while it creates a handle (Hopper GEMMs launch thread-block clusters).
VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* numClusters, CUfunction func,
                                                          const CUlaunchConfig* config) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuOccupancyMaxActiveClusters", numClusters, config);
  const CUresult r = m->max_active_clusters(func, *config, numClusters);
  if (q::enabled())
    q::cluster_query("cuOccupancyMaxActiveClusters", vgpu::traced_name(m, func), config, r, numClusters);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int* clusterSize, CUfunction func,
                                                                const CUlaunchConfig* config) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuOccupancyMaxPotentialClusterSize", clusterSize, config);
  const CUresult r = m->max_potential_cluster_size(func, *config, clusterSize);
  if (q::enabled())
    q::cluster_query("cuOccupancyMaxPotentialClusterSize", vgpu::traced_name(m, func), config, r, clusterSize);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func,
                                                                         int blockSize,
                                                                         size_t dynamicSMemSize) {
  VGPU_CALL_SCOPE();
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                               dynamicSMemSize, CU_OCCUPANCY_DEFAULT);
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize,
    size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuOccupancyMaxPotentialBlockSize", minGridSize, blockSize);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~unsigned{CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE}) == 0)
    r = m->max_potential_block_size(func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit,
                                    minGridSize, blockSize);
  if (q::enabled())
    q::max_potential_block_size("cuOccupancyMaxPotentialBlockSize", vgpu::traced_name(m, func),
                                blockSizeToDynamicSMemSize != nullptr, dynamicSMemSize, blockSizeLimit, flags, r,
                                minGridSize, blockSize);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize,
                                                              CUfunction func,
                                                              CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                              size_t dynamicSMemSize, int blockSizeLimit) {
  VGPU_CALL_SCOPE();
  return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func,
                                                   blockSizeToDynamicSMemSize, dynamicSMemSize,
                                                   blockSizeLimit, CU_OCCUPANCY_DEFAULT);
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize,
                                                                     CUfunction func, int numBlocks,
                                                                     int blockSize) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuOccupancyAvailableDynamicSMemPerBlock", dynamicSmemSize);
  const CUresult r = m->available_dynamic_shared(func, numBlocks, blockSize, dynamicSmemSize);
  if (q::enabled()) q::available_dynamic_smem(vgpu::traced_name(m, func), numBlocks, blockSize, r, dynamicSmemSize);
  return r;
}
