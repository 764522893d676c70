// The shared-pages memory policy (VGPU_MEMORY_POLICY=shared): every device allocation of every
// virtual device is a fresh virtual address range whose pages all map, through the VMM API, onto
// the same few physical chunks of each physical GPU. The real driver maps only whole handles
// (cuMemMap of part of a handle is CUDA_ERROR_NOT_SUPPORTED, measured on an H100), so each GPU
// holds one chunk of every power-of-two size from 2 MiB up to VGPU_SHARED_CHUNK, and a range is
// mapped as its size's binary decomposition (plus as many largest chunks as it needs). N virtual devices of 80 GB then fit on one GPU whatever
// they allocate, kernels run at their real speed on real memory, and the values a program reads
// back are meaningless (every allocation aliases the same bytes) -- a policy for timing and
// capacity planning, never for results. Capacity is still enforced per virtual device.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "front/driver/cuda_api.h"

namespace vgpu::pt {

class SharedPages {
 public:
  // Whether VGPU_MEMORY_POLICY=shared; the chunk size comes from VGPU_SHARED_CHUNK (bytes,
  // default 1 GiB, rounded to the allocation granularity).
  static bool enabled();
  // Allocations below this size (VGPU_SHARED_MIN_BYTES, default 4 MiB) stay private: they hold
  // what programs index with (token ids, labels, offsets: PyTorch keeps tensors under 1 MiB in
  // 2 MiB segments), and aliased indices would make kernels read out of bounds.
  static bool applies_to(size_t bytes);
  // The backend root's (passthrough.h).
  static SharedPages& get();

  // A range of `bytes` on physical GPU `physical`, mapped onto that GPU's chunk.
  CUresult allocate(CUdeviceptr* out, size_t bytes, int physical);
  // false when `p` is not a shared-pages allocation (the caller frees it the usual way).
  bool free(CUdeviceptr p, CUresult* result);
  // Physical bytes the policy holds (one chunk per GPU that allocated).
  size_t physical_bytes() const;

 private:
  struct Range {
    size_t bytes;
    std::vector<std::pair<CUdeviceptr, size_t>> pieces;
  };
  // The chunks of GPU `physical` (index k holds 2 MiB << k bytes), made on first use.
  CUresult chunks_for(int physical, const std::vector<CUmemGenericAllocationHandle>** out);

  mutable std::mutex mu_;
  std::map<int, std::vector<CUmemGenericAllocationHandle>> chunks_;  // physical GPU -> chunks
  std::map<CUdeviceptr, Range> ranges_;
  size_t chunk_bytes_ = 0;
};

}  // namespace vgpu::pt
