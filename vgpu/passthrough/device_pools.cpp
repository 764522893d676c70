#include "passthrough/device_pools.h"

#include <utility>

#include "common/log.h"
#include "passthrough/passthrough_state.h"

namespace vgpu::pt {
namespace {

// A valid pool handle answers an attribute query; the real driver's error otherwise.
CUresult check_pool(CUmemoryPool pool) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t threshold = 0;
  return VGPU_REAL("cuMemPoolGetAttribute", CUresult (*)(CUmemoryPool, CUmemPool_attribute, void*))(
      pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
}

}  // namespace

DevicePools::DevicePools(std::vector<int> physical)
    : physical_(std::move(physical)), owns_(physical_.size()), default_(physical_.size()),
      current_(physical_.size()) {
  for (size_t v = 0; v < physical_.size(); ++v) {
    bool first = true;
    for (size_t u = 0; u < v; ++u) first = first && physical_[u] != physical_[v];
    owns_[v] = first;
  }
}

bool DevicePools::owns_gpu_pools(int v) const {
  return v >= 0 && static_cast<size_t>(v) < owns_.size() && owns_[static_cast<size_t>(v)];
}

CUresult DevicePools::default_pool(int v, CUmemoryPool* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (v < 0 || static_cast<size_t>(v) >= physical_.size()) return CUDA_ERROR_INVALID_DEVICE;
  const int p = physical_[static_cast<size_t>(v)];
  if (owns_gpu_pools(v))
    return VGPU_REAL("cuDeviceGetDefaultMemPool", CUresult (*)(CUmemoryPool*, CUdevice))(out, p);
  std::lock_guard l(mu_);
  CUmemoryPool& pool = default_[static_cast<size_t>(v)];
  if (pool == nullptr) {
    // What the real default pool is: pinned device memory of the GPU, no export handles.
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = p;
    const CUresult r = VGPU_REAL("cuMemPoolCreate", CUresult (*)(CUmemoryPool*, const CUmemPoolProps*))(&pool, &props);
    if (r != CUDA_SUCCESS) {
      pool = nullptr;
      log::warn("passthrough: no default memory pool for virtual device {} on GPU {}: error {}", v, p,
                static_cast<int>(r));
      return r;
    }
  }
  *out = pool;
  return CUDA_SUCCESS;
}

CUresult DevicePools::current_pool(int v, CUmemoryPool* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (v < 0 || static_cast<size_t>(v) >= physical_.size()) return CUDA_ERROR_INVALID_DEVICE;
  if (owns_gpu_pools(v))
    return VGPU_REAL("cuDeviceGetMemPool", CUresult (*)(CUmemoryPool*, CUdevice))(out, physical_[static_cast<size_t>(v)]);
  {
    std::lock_guard l(mu_);
    if (CUmemoryPool set = current_[static_cast<size_t>(v)]) {
      *out = set;
      return CUDA_SUCCESS;
    }
  }
  return default_pool(v, out);
}

CUresult DevicePools::set_current_pool(int v, CUmemoryPool pool) {
  if (v < 0 || static_cast<size_t>(v) >= physical_.size()) return CUDA_ERROR_INVALID_DEVICE;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard l(mu_);
    if (auto it = created_.find(pool); it != created_.end() && it->second != v) {
      log::info("cuDeviceSetMemPool: the pool belongs to virtual device {}, not {}", it->second, v);
      return CUDA_ERROR_INVALID_DEVICE;
    }
    for (size_t u = 0; u < default_.size(); ++u)
      if (default_[u] == pool && static_cast<int>(u) != v) {
        log::info("cuDeviceSetMemPool: the pool is virtual device {}'s default, not {}'s", u, v);
        return CUDA_ERROR_INVALID_DEVICE;
      }
  }
  if (owns_gpu_pools(v))
    return VGPU_REAL("cuDeviceSetMemPool", CUresult (*)(CUdevice, CUmemoryPool))(physical_[static_cast<size_t>(v)], pool);
  if (CUresult r = check_pool(pool); r != CUDA_SUCCESS) return r;
  std::lock_guard l(mu_);
  current_[static_cast<size_t>(v)] = pool;
  return CUDA_SUCCESS;
}

void DevicePools::pool_created(CUmemoryPool pool, int v) {
  std::lock_guard l(mu_);
  created_[pool] = v;
}

void DevicePools::pool_destroyed(CUmemoryPool pool) {
  std::lock_guard l(mu_);
  created_.erase(pool);
  // A destroyed current pool leaves the default current, as the real driver does.
  for (CUmemoryPool& c : current_)
    if (c == pool) c = nullptr;
}

bool DevicePools::is_made_default(CUmemoryPool pool) {
  if (pool == nullptr) return false;
  std::lock_guard l(mu_);
  for (CUmemoryPool d : default_)
    if (d == pool) return true;
  return false;
}

bool DevicePools::redirect_alloc(int v, CUmemoryPool* pool) {
  if (v < 0 || static_cast<size_t>(v) >= physical_.size() || owns_gpu_pools(v)) return false;
  return current_pool(v, pool) == CUDA_SUCCESS;
}

}  // namespace vgpu::pt
