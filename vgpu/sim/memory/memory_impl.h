// The internals of the sim backend's memory, shared by the entry points of vgpu/sim/ only:
// the allocation record, the address-interval index, and the objects behind the handles the
// memory API hands out (arrays, VMM allocations, pools).
//
// Capacity accounting: every allocation path charges its device through Device::reserve(),
// rounded up to the real driver's 2 MiB granularity (kGranularity): the H100 hands out device
// memory in 2 MiB pages, so a 1-byte cuMemAlloc costs a page of capacity there too (the
// real driver sub-allocates small blocks from a shared page; vgpu charges each allocation its
// own page, which errs on the early side for programs that make very many tiny allocations).
// The charge is given back when the allocation is freed (or its context destroyed), never in a
// destructor that a pending asynchronous copy could delay.
//
// Backing: device, managed and pinned memory are anonymous private mappings with
// MAP_NORESERVE, so an untouched gigabyte costs nothing; the device pointer IS the host address
// of the backing (unified addressing, as on the real driver). VMM physical allocations live in
// memfd arenas so one allocation can be mapped at several addresses and show the same bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "sim/core/handle_table.h"
#include "front/driver/cuda_api.h"
#include "sim/memory/memory.h"
#include "sim/memory/page_writes.h"

namespace vgpu {

inline constexpr uint64_t kGranularity = 2ull << 20;
inline uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
// Checked rounding: false when `v` rounded up would overflow.
inline bool round_up_checked(uint64_t v, uint64_t to, uint64_t* out) {
  if (v > UINT64_MAX - (to - 1)) return false;
  *out = round_up(v, to);
  return true;
}

// An anonymous mapping owned by whoever holds the shared_ptr: unmapped when the last holder
// (the allocation, or a queued copy still using it) lets go.
struct HostMapping {
  void* base = nullptr;
  size_t length = 0;
  // A shared mapping of a memfd (created so, or remapped in place by an IPC export): its pages
  // are given back by MADV_REMOVE, a private one's by MADV_DONTNEED (page_writes.h). Set before
  // the remapping, read when a write runs.
  std::atomic<bool> shared{false};
  ~HostMapping();
  // nullptr when the address space cannot be had.
  static std::shared_ptr<HostMapping> create(size_t bytes);
};

// A VMM physical allocation (cuMemCreate): a range of a memfd arena, charged to its device.
struct PhysicalAllocation {
  int fd = -1;              // the arena's descriptor (owned by the arena)
  std::shared_ptr<void> arena;  // keeps the arena's descriptor open
  uint64_t offset = 0, size = 0;
  int device = -1;
  CUmemAllocationProp prop{};
  unsigned long long block_id = 0;
  // A memfd of its own (requested shareable: cuMemExportToShareableHandle hands out a copy of
  // the descriptor), freed by the kernel once no process holds it; imported from another
  // process (cuMemImportFromShareableHandle): the exporter holds the capacity.
  bool dedicated = false;
  bool imported = false;
  ~PhysicalAllocation();  // punches the hole (arena ranges) and gives the capacity back
};

struct Pool;

enum class AllocKind { device, pinned_host, registered_host, managed, vmm_mapping, pool };

// Memory only a device reaches: the program sees its bytes through copies alone (managed and
// host memory the host reads directly).
inline bool device_only(AllocKind k) {
  return k == AllocKind::device || k == AllocKind::pool || k == AllocKind::vmm_mapping;
}

struct Allocation {
  AllocKind kind = AllocKind::device;
  uintptr_t base = 0;
  size_t size = 0;
  char* host = nullptr;     // host address backing `base`
  int device = -1;          // the device charged / owning the memory; -1 for none
  uint64_t charged = 0;     // bytes charged to `device`
  CUcontext ctx = nullptr;  // the context it was allocated in (nullptr: pools, VMM)
  unsigned int host_flags = 0;
  unsigned long long buffer_id = 0;
  CUmemoryPool pool = nullptr;
  std::shared_ptr<Pool> pool_owner;  // pool memory: the pool whose reserve holds the block
  uint64_t pool_block = 0;           // pool memory: the block's size in the pool's reserve
  CUmemGenericAllocationHandle vmm_handle = 0;
  std::shared_ptr<HostMapping> mapping;          // owned backing, if any
  std::shared_ptr<PhysicalAllocation> physical;  // VMM mappings
  // VMM access per device ordinal (cuMemSetAccess); managed-memory advice.
  std::map<int, unsigned long long> access;
  // IPC (ipc_api.cpp): an exported allocation's memory lives in a memfd (closed with the
  // allocation); an imported one maps another process's and is charged to nobody here.
  std::shared_ptr<void> ipc_fd;
  bool ipc_import = false;
  bool pool_import = false;  // imported from an exported pool: freed by cuMemFree(Async)
  int read_mostly = 0;
  int preferred_location = CU_DEVICE_INVALID;
  int last_prefetch = CU_DEVICE_INVALID;
  std::set<int> accessed_by;
};

// How a write gives back the whole pages of its destination (page_writes.h), decided when the
// write is set up and read again when it runs: an export (cuIpcGetMemHandle) may have turned a
// private backing into a shared one meanwhile.
struct PageOwner {
  PageRelease how = PageRelease::none;
  std::shared_ptr<HostMapping> backing;  // a private backing, whose `shared` may change
  PageRelease now() const {
    if (how == PageRelease::private_pages && backing && backing->shared.load(std::memory_order_acquire))
      return PageRelease::shared_pages;
    return how;
  }
};
// Device-only memory is the driver's to give back: pool blocks and device allocations by their
// backing, VMM mappings (memfd) as shared; every other kind (and a range across kinds) is
// written.
PageOwner page_owner(const std::vector<std::shared_ptr<Allocation>>& holders);

struct ArrayObject {
  CUarray handle = nullptr;
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  size_t element_bytes = 0;
  size_t row_bytes = 0, height = 1, depth = 1;
  int device = -1;
  uint64_t charged = 0;
  CUcontext ctx = nullptr;
  bool mipmap_level = false;  // a level of a mipmapped array: destroyed with it, never alone
  std::shared_ptr<HostMapping> mapping;
  char* data() const { return static_cast<char*>(mapping->base); }
  size_t bytes() const { return row_bytes * height * depth; }
};

// A mipmapped array: each level is an array (copies and descriptors reach it as any array),
// and the levels are charged together, once, to the mipmapped array.
struct MipmapObject {
  CUmipmappedArray handle = nullptr;
  int device = -1;
  uint64_t charged = 0;
  CUcontext ctx = nullptr;
  std::vector<std::shared_ptr<ArrayObject>> levels;
};

// A stream-ordered memory pool (pool.cpp has the model). Every block is its own 2 MiB-rounded
// host mapping: `reserved` counts every block the pool holds (charged to its device), `used`
// the blocks handed out and not yet freed in stream order; both in rounded bytes.
struct Pool {
  CUmemoryPool handle = nullptr;
  int device = -1;
  bool is_default = false;
  CUmemPoolProps props{};
  std::mutex mu;  // guards everything below
  bool destroyed = false;
  uint64_t reserved = 0, used = 0, reserved_high = 0, used_high = 0;
  uint64_t release_threshold = 0;
  int follow_event_deps = 1, allow_opportunistic = 1, allow_internal_deps = 1;
  std::map<int, CUmemAccess_flags> access;  // devices other than `device` (cuMemPoolSetAccess)
  std::multimap<uint64_t, std::shared_ptr<HostMapping>> free_blocks;  // by block size
  int imported_from = 0;  // the exporting process of an imported pool (ipc_api.cpp); 0: own pool
  int exporter_gpu = -1;  // the cluster's GPU of an imported pool, as the exporter named it
};

// A texture or surface object (texture_api.cpp): the descriptors it was created with, returned
// by the Get*Desc queries. Nothing samples it on the sim backend.
struct TextureObject {
  bool surface = false;
  CUDA_RESOURCE_DESC res{};
  CUDA_TEXTURE_DESC tex{};
  CUDA_RESOURCE_VIEW_DESC view{};
  bool has_view = false;
  CUcontext ctx = nullptr;
};

struct MemoryManager::Impl {
  explicit Impl(DriverState& d);

  DriverState& driver;

  // ---- the address-interval index: every allocation a pointer can fall into ----
  mutable std::shared_mutex index_mu;
  std::map<uintptr_t, std::shared_ptr<Allocation>> index;
  std::atomic<unsigned long long> next_buffer_id{1};

  void index_add(const std::shared_ptr<Allocation>& a);
  // Removes the allocation that starts exactly at `base` (and is of one of the kinds allowed by
  // `accept`); nullptr when there is none.
  template <class Accept> std::shared_ptr<Allocation> index_remove(uintptr_t base, Accept accept);
  // The allocation containing `ptr`, or nullptr.
  std::shared_ptr<Allocation> find(uintptr_t ptr) const;
  // The allocation containing all of [ptr, ptr + bytes) (bytes >= 1), or nullptr. Adjacent
  // VMM mappings of one reservation count as one range, as the real driver lets a copy run
  // across them. `holders` receives every allocation the range touches.
  bool covers(uintptr_t ptr, size_t bytes, std::vector<std::shared_ptr<Allocation>>* holders) const;

  // ---- allocation helpers shared by every path ----
  // Charges `device`, maps backing and indexes a new allocation of `kind`.
  CUresult allocate(AllocKind kind, int device, size_t bytes, CUcontext ctx,
                    std::shared_ptr<Allocation>* out);
  // Un-indexes nothing; gives back the charge of an allocation already removed from the index.
  void uncharge(Allocation& a);

  // ---- handles ----
  HandleTable<ArrayObject> arrays;
  HandleTable<MipmapObject> mipmaps;
  HandleTable<Pool> pools;
  HandleTable<TextureObject> textures;  // texture and surface objects
  std::vector<std::shared_ptr<Pool>> default_pools;  // one per device
  std::vector<CUmemoryPool> default_pool_handles;
  std::mutex current_pool_mu;
  std::vector<CUmemoryPool> current_pools;  // cuDeviceSetMemPool

  // ---- stream-ordered pools (pool.cpp) ----
  // A block of at least `bytes` from `pool` (a freed block that fits, else a new one charged to
  // the pool's device; on OUT_OF_MEMORY the pool first gives back its own unused blocks).
  CUresult pool_allocate(const std::shared_ptr<Pool>& pool, size_t bytes, std::shared_ptr<Allocation>* out);
  // The block of a pool allocation freed in stream order: back to its pool's free blocks (or to
  // the device, when the pool was destroyed meanwhile).
  void pool_return(const std::shared_ptr<Pool>& pool, uint64_t block, std::shared_ptr<HostMapping> mapping);
  // Gives free blocks back to the device until the pool reserves at most `keep` bytes.
  // Caller holds pool.mu.
  void pool_trim_locked(Pool& pool, uint64_t keep);
  // The pool a cuMemAllocAsync on `device` draws from.
  std::shared_ptr<Pool> current_pool(int device);

  // VMM: physical allocations by handle (with the count of cuMemRelease still owed), and the
  // address reservations.
  struct PhysEntry {
    std::shared_ptr<PhysicalAllocation> phys;
    int refs = 1;
  };
  std::mutex vmm_mu;
  std::unordered_map<CUmemGenericAllocationHandle, PhysEntry> physical;
  std::map<uintptr_t, size_t> reservations;  // base -> size
  std::atomic<unsigned long long> next_generic_handle{1};
  // What the paths that write device memory stored and released (MemoryManager::write_stats).
  static constexpr int kWritePaths = static_cast<int>(DeviceWrite::count);
  std::atomic<uint64_t> written[kWritePaths] = {}, released[kWritePaths] = {};
  std::atomic<uint64_t> timed_only{0};
  void note(DeviceWrite path, const PageWriteResult& r) {
    written[static_cast<int>(path)].fetch_add(r.written, std::memory_order_relaxed);
    released[static_cast<int>(path)].fetch_add(r.released, std::memory_order_relaxed);
  }

  // The memfd arena new physical allocations come from.
  std::shared_ptr<void> arena;
  int arena_fd = -1;
  uint64_t arena_next = 0;
  CUresult arena_allocate(uint64_t size, std::shared_ptr<void>* arena_out, int* fd, uint64_t* offset);
};

template <class Accept>
std::shared_ptr<Allocation> MemoryManager::Impl::index_remove(uintptr_t base, Accept accept) {
  std::unique_lock l(index_mu);
  auto it = index.find(base);
  if (it == index.end() || !accept(*it->second)) return nullptr;
  auto a = std::move(it->second);
  index.erase(it);
  return a;
}

}  // namespace vgpu
