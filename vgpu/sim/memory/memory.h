// Every allocation path and every copy/set of the sim backend: device memory backed by host
// memory so data round-trips, pinned/registered host memory, VMM, stream-ordered pools,
// managed memory, arrays; capacity enforced per virtual device. OWNER: the contexts/memory
// helper. The declarations below are the interface other concerns rely on; add to them, do not
// change them.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "front/driver/cuda_api.h"

namespace vgpu {

class DriverState;

class MemoryManager {
 public:
  explicit MemoryManager(DriverState& driver);
  ~MemoryManager();

  // Device memory on virtual device `device`, charged to its capacity
  // (CUDA_ERROR_OUT_OF_MEMORY past it). Used by cuMemAlloc and by module globals.
  CUresult allocate_device(int device, size_t bytes, CUdeviceptr* out);
  CUresult free_device(CUdeviceptr ptr);

  // Where [ptr, ptr + bytes) lives, if it lies inside one known allocation (device, pinned,
  // managed, registered or VMM-mapped): the virtual device it belongs to (-1 for host memory)
  // and the host address backing `ptr`.
  struct Resolved {
    int device = -1;
    void* host = nullptr;
    CUmemorytype type = CU_MEMORYTYPE_DEVICE;
  };
  std::optional<Resolved> resolve(CUdeviceptr ptr, size_t bytes) const;

  // ---- Added by the memory helper. ----

  // A context is being destroyed (or a primary context reset): free everything it allocated
  // (device, pinned host, managed memory, arrays, registrations) and give the capacity back.
  void context_destroyed(CUcontext ctx);

  // A stream, event or context synchronization of virtual device `device` (-1: unknown, every
  // device) has completed: the stream-ordered pools of that device give back the free blocks
  // they hold above their release threshold (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), as the real
  // driver does at its next synchronization. Called by the streams concern.
  void synchronized(int device);

  // Host memory behind the live allocations (VGPU_SIM_MEMORY_REPORT): bytes allocated and how
  // many of them are resident, for device-only memory (device, pool and VMM allocations) and for
  // memory the host reads as well (managed, pinned). Registered memory is the program's own.
  struct Footprint {
    uint64_t device_bytes = 0, device_resident = 0;
    uint64_t host_bytes = 0, host_resident = 0;
  };
  Footprint footprint() const;

  // The internals, for the entry points of this folder only (sim/memory_impl.h).
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu
