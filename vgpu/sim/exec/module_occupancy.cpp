// The occupancy calculator entry points' logic (cuOccupancy*), over KernelResources.
#include <algorithm>
#include <array>
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
constexpr int kMaxNonPortableCluster = 16;

using Dims = std::array<uint32_t, 3>;

// Blocks in a cluster; a product past int's range reads as INT32_MAX (no cluster that large fits).
int volume(const Dims& d) {
  return static_cast<int>(std::min<uint64_t>(uint64_t{d[0]} * d[1] * d[2], INT32_MAX));
}

// The config's CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, or {0,0,0} when it has none.
Dims config_cluster(const CUlaunchConfig& config) {
  for (unsigned i = 0; i < config.numAttrs && config.attrs != nullptr; ++i)
    if (config.attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      const auto& d = config.attrs[i].value.clusterDim;
      return {d.x, d.y, d.z};
    }
  return {0, 0, 0};
}

// The kernel's required cluster: compiled in (__cluster_dims__, .reqnctapercluster) or set with
// cuFuncSetAttribute(REQUIRED_CLUSTER_*), as cuFuncGetAttribute reports it; {0,0,0}: none.
Dims required_cluster(const Function& fn) {
  const Dims& compiled = fn.info().cluster_dims;
  if (compiled[0] != 0) return compiled;
  const FuncSettings& s = *fn.settings;
  const Dims set{static_cast<uint32_t>(s.cluster_w.load()), static_cast<uint32_t>(s.cluster_h.load()),
                 static_cast<uint32_t>(s.cluster_d.load())};
  return set[0] != 0 ? Dims{set[0], std::max(set[1], 1u), std::max(set[2], 1u)} : Dims{0, 0, 0};
}

// The model's measured answer (GpuModel::max_active_clusters) for clusters of `size` blocks
// when `per_sm` blocks fit an SM, or -1 when the model has none. Between the measured 1, 2 and 4
// blocks per SM (and past 4) it scales the nearest measured row below that reaches `size`; a
// size past every row fits nowhere (the H200 measured 0 for 19 to 32 at one block per SM).
int measured_clusters(const simcore::GpuModel& model, int per_sm, int size) {
  const auto& table = model.max_active_clusters;
  if (table.size() < 3 || size < 1) return -1;
  if (per_sm <= 0) return 0;
  for (int row = per_sm >= 4 ? 2 : per_sm >= 2 ? 1 : 0; row >= 0; --row) {
    if (static_cast<size_t>(size) > table[row].size()) continue;
    const int measured_per_sm = 1 << row;
    return static_cast<int>(int64_t{table[row][size - 1]} * per_sm / measured_per_sm);
  }
  return 0;
}

// Clusters of `size` blocks that fit at once when `per_sm` blocks fit an SM: the measured table,
// else the GPC estimate (a cluster's blocks share one GPC; none past the non-portable 16).
int clusters_that_fit(const simcore::GpuModel& model, int sm_count, int per_sm, int size) {
  if (const int measured = measured_clusters(model, per_sm, size); measured >= 0) return measured;
  if (size > kMaxNonPortableCluster) return 0;
  const int sms_per_gpc = sm_count / kGpcs;  // the smallest GPC decides
  return kGpcs * (sms_per_gpc * per_sm / size);
}

// The cluster a query is about: the kernel's required one, else the config's ({0,0,0}: neither
// names one). A config's cluster that differs from the kernel's required one is refused with
// CUDA_ERROR_INVALID_CLUSTER_SIZE by both cluster queries (measured on an H200, 2026-11-26:
// cuOccupancyMaxPotentialClusterSize too, although cuda.h says it ignores the config's cluster).
CUresult query_cluster(const char* api, const Function& fn, const CUlaunchConfig& config, Dims* cluster) {
  const Dims required = required_cluster(fn), asked = config_cluster(config);
  if (required[0] != 0 && asked[0] != 0 && asked != required) {
    log::warn("{}: cluster {}x{}x{} asked of {}, which requires {}x{}x{}", api, asked[0], asked[1], asked[2],
              fn.info().name, required[0], required[1], required[2]);
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  *cluster = required[0] != 0 ? required : asked;
  return CUDA_SUCCESS;
}

}  // namespace

// The answers of an H200 (driver 580.159.04, measured 2026-11-26 by tests/gpu/probe/cublaslt_queries):
// a kernel with a required cluster is asked about that cluster, and a config's cluster that
// differs from it is refused; a kernel without one and a config without a cluster size is not
// an error (cuda.h says it is) but 0 clusters; sizes past 16 are answered as measured (cuBLAS
// probes up to 32 with NON_PORTABLE_CLUSTER_SIZE_ALLOWED: 17 and 18 fit 2, larger none).
CUresult ModuleManager::max_active_clusters(CUfunction f, const CUlaunchConfig& config, int* clusters) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  const int block = static_cast<int>(config.blockDimX * config.blockDimY * config.blockDimZ);
  if (block <= 0) return CUDA_ERROR_INVALID_VALUE;
  Dims cluster{};
  if (CUresult rc = query_cluster("cuOccupancyMaxActiveClusters", *fn, config, &cluster); rc != CUDA_SUCCESS)
    return rc;
  if (cluster[0] == 0) {
    log::debug("cuOccupancyMaxActiveClusters: no cluster size in the config, and {} requires none: 0",
               fn->info().name);
    *clusters = 0;
    return CUDA_SUCCESS;
  }
  const int size = volume(cluster);
  if (size <= 0) return CUDA_ERROR_INVALID_VALUE;
  const KernelResources r(driver_, fn->device, fn->info());
  // A size that cannot be resident (more blocks than a GPC holds) is "no cluster fits", not an error.
  const int per_sm = r.blocks_per_sm(block, config.sharedMemBytes);
  *clusters = clusters_that_fit(driver_.cluster().model, r.sm_count(), per_sm, size);
  return CUDA_SUCCESS;
}

// cuda.h: "The cluster dimensions in config are ignored [measured: one that differs from a
// required cluster is refused, see query_cluster]. If func has a required cluster size set
// ..., *clusterSize will reflect the required cluster size. By default this function will always
// return a value that's portable on future hardware. A higher value may be returned if the kernel
// function allows non-portable cluster sizes": the largest cluster of at most 16 of which one fits
// (the measured H200 fits 7 clusters of 16 at one block per SM, and answered 16, not 18, with
// non-portable sizes allowed although 17 and 18 fit too).
CUresult ModuleManager::max_potential_cluster_size(CUfunction f, const CUlaunchConfig& config, int* size) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  const int block = static_cast<int>(config.blockDimX * config.blockDimY * config.blockDimZ);
  if (block <= 0) return CUDA_ERROR_INVALID_VALUE;
  Dims cluster{};
  if (CUresult rc = query_cluster("cuOccupancyMaxPotentialClusterSize", *fn, config, &cluster); rc != CUDA_SUCCESS)
    return rc;
  const KernelResources r(driver_, fn->device, fn->info());
  const int per_sm = r.blocks_per_sm(block, config.sharedMemBytes);
  if (const Dims required = required_cluster(*fn); required[0] != 0) {
    *size = per_sm <= 0 ? 0 : volume(required);
    return CUDA_SUCCESS;
  }
  const int limit = fn->settings->non_portable_cluster.load() != 0 ? kMaxNonPortableCluster : kMaxPortableCluster;
  int best = 0;
  for (int s = limit; s >= 1 && best == 0; --s)
    if (clusters_that_fit(driver_.cluster().model, r.sm_count(), per_sm, s) > 0) best = s;
  *size = best;
  return CUDA_SUCCESS;
}

}  // namespace vgpu
