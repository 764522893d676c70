// The occupancy calculator entry points' logic (cuOccupancy*), over KernelResources.
#include <algorithm>
#include <cstdint>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/exec/module_registry.h"
#include "sim/exec/module_resources.h"

namespace vgpu {

CUresult ModuleManager::max_active_blocks(CUfunction f, int block_size, size_t dynamic_shared,
                                          int* blocks) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  if (block_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  const KernelResources r(driver_, fn->device, fn->info());
  *blocks = r.blocks_per_sm(block_size, dynamic_shared);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::max_potential_block_size(CUfunction f, CUoccupancyB2DSize shared_of_block,
                                                 size_t dynamic_shared, int block_limit,
                                                 int* min_grid, int* block_size) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  if (block_limit < 0) return CUDA_ERROR_INVALID_VALUE;
  const KernelResources r(driver_, fn->device, fn->info());
  int limit = r.max_threads_per_block();
  if (block_limit > 0) limit = std::min(limit, block_limit);
  const int warp = r.warp_size();
  int best_threads = 0, best_size = 0, best_blocks = 0;
  // From the largest block down in steps of a warp; a larger block wins a tie.
  for (int aligned = (limit + warp - 1) / warp * warp; aligned > 0; aligned -= warp) {
    const int size = std::min(aligned, limit);
    const size_t shared = shared_of_block ? shared_of_block(size) : dynamic_shared;
    const int blocks = r.blocks_per_sm(size, shared);
    if (blocks * size > best_threads) {
      best_threads = blocks * size;
      best_size = size;
      best_blocks = blocks;
    }
  }
  *min_grid = best_blocks * r.sm_count();
  *block_size = best_size;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::available_dynamic_shared(CUfunction f, int blocks, int block_size,
                                                 size_t* bytes) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  if (blocks <= 0 || block_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  const KernelResources r(driver_, fn->device, fn->info());
  *bytes = r.dynamic_shared_for(blocks, block_size);
  return CUDA_SUCCESS;
}

namespace {

// A cluster's blocks must all be resident in one GPC. H100 and H200 have 8 GPCs (132 SMs in
// the SXM parts: 16 or 17 usable per GPC); models without the figure are taken to have 8 too.
constexpr int kGpcs = 8;
// Portable cluster size; 16 needs CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED.
constexpr int kMaxPortableCluster = 8;

int cluster_size_of(const CUlaunchConfig& config) {
  for (unsigned i = 0; i < config.numAttrs && config.attrs != nullptr; ++i)
    if (config.attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      const auto& d = config.attrs[i].value.clusterDim;
      return static_cast<int>(d.x * d.y * d.z);
    }
  return 1;
}

// The model's measured answer (GpuModel::max_active_clusters) for clusters of `size` blocks
// when `per_sm` blocks fit an SM, or -1 when the model has none. Between the measured 1, 2 and 4
// blocks per SM (and past 4) it scales the nearest measured row below.
int measured_clusters(const simcore::GpuModel& model, int per_sm, int size) {
  const auto& table = model.max_active_clusters;
  if (table.size() < 3 || size < 1 || size > 16) return -1;
  if (per_sm <= 0) return 0;
  const int row = per_sm >= 4 ? 2 : per_sm >= 2 ? 1 : 0;
  const int measured_per_sm = 1 << row;
  return static_cast<int>(int64_t{table[row][size - 1]} * per_sm / measured_per_sm);
}

}  // namespace

CUresult ModuleManager::max_active_clusters(CUfunction f, const CUlaunchConfig& config, int* clusters) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  const int block = static_cast<int>(config.blockDimX * config.blockDimY * config.blockDimZ);
  const int size = cluster_size_of(config);
  if (block <= 0 || size <= 0) return CUDA_ERROR_INVALID_VALUE;
  const KernelResources r(driver_, fn->device, fn->info());
  // Libraries probe growing sizes: one that cannot be resident (past the non-portable limit of
  // 16, or more blocks than a GPC holds) is "no cluster fits", not an error.
  if (size > 2 * kMaxPortableCluster) {
    *clusters = 0;
    return CUDA_SUCCESS;
  }
  const int per_sm = r.blocks_per_sm(block, config.sharedMemBytes);
  if (const int measured = measured_clusters(driver_.cluster().model, per_sm, size); measured >= 0) {
    *clusters = measured;
    return CUDA_SUCCESS;
  }
  const int sms_per_gpc = r.sm_count() / kGpcs;  // the smallest GPC decides
  *clusters = kGpcs * (sms_per_gpc * per_sm / size);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::max_potential_cluster_size(CUfunction f, const CUlaunchConfig& config, int* size) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  const int block = static_cast<int>(config.blockDimX * config.blockDimY * config.blockDimZ);
  if (block <= 0) return CUDA_ERROR_INVALID_VALUE;
  const KernelResources r(driver_, fn->device, fn->info());
  const int per_sm = r.blocks_per_sm(block, config.sharedMemBytes);
  *size = per_sm <= 0 ? 0 : std::min(kMaxPortableCluster, r.sm_count() / kGpcs * per_sm);
  return CUDA_SUCCESS;
}

}  // namespace vgpu
