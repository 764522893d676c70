// The occupancy calculator entry points' logic (cuOccupancy*), over KernelResources.
#include <algorithm>

#include "common/log.h"
#include "core/driver_state.h"
#include "exec/module_registry.h"
#include "exec/module_resources.h"

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

}  // namespace vgpu
