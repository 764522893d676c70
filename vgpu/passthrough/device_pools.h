// The stream-ordered allocator's per-device pools, per virtual device.
//
// The real driver keeps one default and one current memory pool per physical GPU. When several
// virtual devices share a GPU, each must still have its own: a release threshold or a trim set on
// one, the pool attributes a framework reads for its statistics (used and reserved memory), and
// cuDeviceSetMemPool must not reach the others. So the first virtual device on a GPU keeps the
// GPU's real pools (a job of one device runs exactly as without vgpu), and every other virtual
// device gets a real pool vgpu creates on that GPU as its default, and a current pool vgpu keeps;
// its cuMemAllocAsync draws from that current pool (cuMemAllocFromPoolAsync).
#pragma once

#include <mutex>
#include <unordered_map>
#include <vector>

#include "front/driver/cuda_api.h"

namespace vgpu::pt {

class DevicePools {
 public:
  // physical[v]: the real CUdevice behind virtual device v.
  explicit DevicePools(std::vector<int> physical);

  // Whether virtual device v uses its GPU's own pools (the first virtual device on the GPU).
  bool owns_gpu_pools(int v) const;
  // cuDeviceGetDefaultMemPool / cuDeviceGetMemPool / cuDeviceSetMemPool for virtual device v
  // (an ordinal that is checked by the caller).
  CUresult default_pool(int v, CUmemoryPool* out);
  CUresult current_pool(int v, CUmemoryPool* out);
  CUresult set_current_pool(int v, CUmemoryPool pool);
  // cuMemPoolCreate made `pool` for virtual device v (set_current_pool refuses it elsewhere).
  void pool_created(CUmemoryPool pool, int v);
  void pool_destroyed(CUmemoryPool pool);
  // A default pool vgpu made for a virtual device (not the program's to destroy).
  bool is_made_default(CUmemoryPool pool);
  // The pool cuMemAllocAsync on a stream of virtual device v must draw from instead of the
  // GPU's current pool; false when the real cuMemAllocAsync is already right (v owns its GPU's
  // pools, or v is not a device).
  bool redirect_alloc(int v, CUmemoryPool* pool);

 private:
  const std::vector<int> physical_;
  std::vector<bool> owns_;
  std::mutex mu_;
  std::vector<CUmemoryPool> default_;  // vgpu-created defaults; nullptr until first asked
  std::vector<CUmemoryPool> current_;  // nullptr: the default
  std::unordered_map<CUmemoryPool, int> created_;  // pools made by cuMemPoolCreate -> virtual device
};

}  // namespace vgpu::pt
