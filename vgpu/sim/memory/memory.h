// Every allocation path and every copy/set of the sim backend: device memory backed by host
// memory so data round-trips, pinned/registered host memory, VMM, stream-ordered pools,
// managed memory, arrays; capacity enforced per virtual device. OWNER: the contexts/memory
// helper. The declarations below are the interface other concerns rely on; add to them, do not
// change them.
#pragma once

#include <cstddef>
#include <cstdint>
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
    // Of device_resident (mincore, which also counts a page only read: the kernel's shared zero
    // page), what /proc/self/pagemap says: private pages written (RssAnon), pages of memfds
    // mapped here (VMM and IPC-exported memory: RssShmem), pages swapped out, and pages mapped to
    // the zero page (they cost no memory). private_known is false when pagemap cannot be read.
    uint64_t device_private = 0, device_memfd = 0, device_swapped = 0, device_zero_page = 0;
    bool private_known = false;
    // The allocations holding the most pages of their own (private or memfd), largest first:
    // which buffers the resident memory is (a model's parameters, NCCL's buffers, ...).
    struct Holder {
      uint64_t bytes = 0, own = 0;
      const char* kind = "";  // "device", "pool" or "vmm"
    };
    static constexpr size_t kLargest = 5;
    Holder largest[kLargest] = {};
  };
  Footprint footprint() const;

  // The paths that write device memory, for the memory report: what each stored, and what it
  // released instead (whole pages that were to hold only zeros: a memset of 0, or a copy from
  // zeros such as never-written memory; see sim/memory/page_writes.h).
  enum class DeviceWrite : int { host_to_device, device_to_device, peer, memset, nccl, count };
  struct WriteStats {
    uint64_t written[static_cast<int>(DeviceWrite::count)] = {};
    uint64_t released[static_cast<int>(DeviceWrite::count)] = {};
    uint64_t timed_only = 0;  // copies and memsets VGPU_SIM_COPY_DATA_BYTES left undone
  };
  WriteStats write_stats() const;

  // Stores `bytes` bytes from host memory `src` at `ptr`, memory of this process as resolve()
  // finds it (the NCCL data mover's results), releasing whole device pages that are to hold
  // only zeros; counted as `path`. False (nothing stored) when the range is not inside one known
  // allocation.
  bool store(CUdeviceptr ptr, const void* src, size_t bytes, DeviceWrite path);

  // The internals, for the entry points of this folder only (sim/memory_impl.h).
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu
