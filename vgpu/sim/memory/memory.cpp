// The sim backend's memory manager: host backings, the address-interval index, capacity
// charging, and the teardown of a destroyed context's memory. The entry points live beside it
// (alloc_api.cpp, copy_api.cpp, vmm_api.cpp, pool_api.cpp, array_api.cpp).
#include "sim/memory/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/core/context.h"
#include "sim/core/thread_state.h"
#include "sim/memory/memory_impl.h"

namespace vgpu {

HostMapping::~HostMapping() {
  if (base != nullptr) munmap(base, length);
}

std::shared_ptr<HostMapping> HostMapping::create(size_t bytes) {
  const size_t length = round_up(bytes == 0 ? 1 : bytes, 4096);
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto m = std::make_shared<HostMapping>();
  m->base = p;
  m->length = length;
  return m;
}

PhysicalAllocation::~PhysicalAllocation() {
  if (fd >= 0 && !dedicated)
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
              static_cast<off_t>(size));
  if (DriverState* d = DriverState::get(); d != nullptr && device >= 0 && !imported)
    if (Device* dev = d->device(device)) dev->release(size);
}

namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Bytes of [p, p + bytes) resident in host memory (mincore over whole pages; a page only read
// counts too, mapped to the kernel's zero page).
uint64_t resident_bytes(const char* p, size_t bytes) {
  const size_t page = page_size();
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  constexpr size_t kPagesPerCall = size_t{1} << 16;
  std::vector<unsigned char> v(kPagesPerCall);
  uint64_t resident = 0;
  for (uintptr_t at = first; at < end;) {
    const size_t pages = std::min(kPagesPerCall, (end - at + page - 1) / page);
    if (mincore(reinterpret_cast<void*>(at), pages * page, v.data()) != 0) return resident;
    for (size_t i = 0; i < pages; ++i) resident += v[i] & 1;
    at += pages * page;
  }
  return resident * page;
}

// The pages of [p, p + bytes) by /proc/self/pagemap (one 64-bit entry per page: bit 63 present,
// 62 swapped, 61 a file or shared page, 56 mapped by this process alone). A private page the
// program wrote is present and exclusive; a page only read is mapped to the kernel's zero page,
// present but neither exclusive nor anonymous-owned (the huge zero page reads as a file page);
// a memfd page (VMM, IPC) is a file page and memory of its own. False when pagemap cannot be
// read.
struct PageCensus {
  uint64_t own = 0, swapped = 0, zero_page = 0;
};
bool census(int pagemap, const char* p, size_t bytes, bool shared, PageCensus* out) {
  constexpr uint64_t kPresent = 1ull << 63, kSwapped = 1ull << 62, kFile = 1ull << 61, kExclusive = 1ull << 56;
  const size_t page = page_size();
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page;
  constexpr size_t kPagesPerRead = size_t{1} << 15;
  std::vector<uint64_t> entries(kPagesPerRead);
  for (uintptr_t at = first; at < end;) {
    const size_t pages = std::min<size_t>(kPagesPerRead, end - at);
    const ssize_t want = static_cast<ssize_t>(pages * sizeof(uint64_t));
    if (pread(pagemap, entries.data(), want, static_cast<off_t>(at * sizeof(uint64_t))) != want) return false;
    for (size_t i = 0; i < pages; ++i) {
      const uint64_t e = entries[i];
      if (e & kSwapped) out->swapped += page;
      else if (!(e & kPresent)) continue;
      else if (shared ? (e & kFile) != 0 : (e & kExclusive) && !(e & kFile)) out->own += page;
      else out->zero_page += page;
    }
    at += pages;
  }
  return true;
}

}  // namespace

PageOwner page_owner(const std::vector<std::shared_ptr<Allocation>>& holders) {
  PageOwner o;
  if (holders.empty()) return o;
  for (const auto& h : holders)
    if (!device_only(h->kind)) return o;
  if (holders.front()->physical) {  // VMM: every mapping of the range is a memfd's
    for (const auto& h : holders)
      if (!h->physical) return o;
    o.how = PageRelease::shared_pages;
    return o;
  }
  if (holders.size() != 1 || !holders.front()->mapping) return o;
  o.backing = holders.front()->mapping;
  o.how = PageRelease::private_pages;  // now() reads whether an export made it shared since
  return o;
}

MemoryManager::Footprint MemoryManager::footprint() const {
  std::vector<std::shared_ptr<Allocation>> live;
  {
    std::shared_lock l(impl_->index_mu);
    for (const auto& [base, a] : impl_->index) live.push_back(a);
  }
  Footprint f;
  const int pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  f.private_known = pagemap >= 0;
  for (const auto& a : live) {
    if (a->host == nullptr || a->kind == AllocKind::registered_host) continue;
    const uint64_t resident = resident_bytes(a->host, a->size);
    (device_only(a->kind) ? f.device_bytes : f.host_bytes) += a->size;
    (device_only(a->kind) ? f.device_resident : f.host_resident) += resident;
    if (!device_only(a->kind) || !f.private_known) continue;
    const bool shared = a->physical || (a->mapping && a->mapping->shared.load(std::memory_order_acquire));
    PageCensus c;
    if (!census(pagemap, a->host, a->size, shared, &c)) {
      f.private_known = false;
      continue;
    }
    (shared ? f.device_memfd : f.device_private) += c.own;
    // Kept sorted, largest first: insert where it belongs, the smallest falls off.
    Footprint::Holder h{a->size, c.own, a->kind == AllocKind::pool ? "pool" : a->kind == AllocKind::vmm_mapping ? "vmm" : "device"};
    for (auto& slot : f.largest)
      if (h.own > slot.own) std::swap(h, slot);
    f.device_swapped += c.swapped;
    f.device_zero_page += c.zero_page;
  }
  if (pagemap >= 0) ::close(pagemap);
  return f;
}

MemoryManager::WriteStats MemoryManager::write_stats() const {
  WriteStats s;
  for (int i = 0; i < Impl::kWritePaths; ++i) {
    s.written[i] = impl_->written[i].load(std::memory_order_relaxed);
    s.released[i] = impl_->released[i].load(std::memory_order_relaxed);
  }
  s.timed_only = impl_->timed_only.load(std::memory_order_relaxed);
  return s;
}

bool MemoryManager::store(CUdeviceptr ptr, const void* src, size_t bytes, DeviceWrite path) {
  if (bytes == 0) return true;
  std::vector<std::shared_ptr<Allocation>> holders;
  if (src == nullptr || !impl_->covers(static_cast<uintptr_t>(ptr), bytes, &holders)) return false;
  const Allocation& a = *holders.front();
  char* to = a.host + (static_cast<uintptr_t>(ptr) - a.base);
  impl_->note(path, copy_pages(to, static_cast<const char*>(src), bytes, page_owner(holders).now()));
  return true;
}

MemoryManager::Impl::Impl(DriverState& d) : driver(d) {
  for (int i = 0; i < d.device_count(); ++i) {
    auto p = std::make_shared<Pool>();
    p->device = i;
    p->is_default = true;
    p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->props.location.id = i;
    auto h = mint_handle<CUmemoryPool>(HandleKind::mem_pool);
    p->handle = h;
    pools.add(h, p);
    default_pools.push_back(p);
    default_pool_handles.push_back(h);
  }
  current_pools = default_pool_handles;
}

void MemoryManager::Impl::index_add(const std::shared_ptr<Allocation>& a) {
  std::unique_lock l(index_mu);
  index[a->base] = a;
}

std::shared_ptr<Allocation> MemoryManager::Impl::find(uintptr_t ptr) const {
  std::shared_lock l(index_mu);
  auto it = index.upper_bound(ptr);
  if (it == index.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second;
  return ptr - a.base < a.size ? it->second : nullptr;
}

bool MemoryManager::Impl::covers(uintptr_t ptr, size_t bytes,
                                 std::vector<std::shared_ptr<Allocation>>* holders) const {
  if (bytes == 0 || ptr > UINTPTR_MAX - bytes) return false;
  const uintptr_t end = ptr + bytes;
  std::shared_lock l(index_mu);
  auto it = index.upper_bound(ptr);
  if (it == index.begin()) return false;
  --it;
  if (ptr - it->second->base >= it->second->size) return false;
  uintptr_t reached = it->second->base + it->second->size;
  if (holders) holders->push_back(it->second);
  while (reached < end) {
    if (it->second->kind != AllocKind::vmm_mapping) return false;
    ++it;
    if (it == index.end() || it->second->base != reached ||
        it->second->kind != AllocKind::vmm_mapping)
      return false;
    reached += it->second->size;
    if (holders) holders->push_back(it->second);
  }
  return true;
}

CUresult MemoryManager::Impl::allocate(AllocKind kind, int device, size_t bytes, CUcontext ctx,
                                       std::shared_ptr<Allocation>* out) {
  uint64_t charge = 0;
  if (device >= 0) {
    if (!round_up_checked(bytes, kGranularity, &charge)) return CUDA_ERROR_OUT_OF_MEMORY;
    Device* dev = driver.device(device);
    if (dev == nullptr) return CUDA_ERROR_INVALID_DEVICE;
    if (!dev->reserve(charge)) {
      log::warn("allocation of {} bytes on device {}: out of memory ({} of {} bytes free)",
                bytes, device, dev->free_bytes(), dev->capacity());
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  auto mapping = HostMapping::create(bytes);
  if (!mapping) {
    if (device >= 0) driver.device(device)->release(charge);
    log::warn("allocation of {} bytes: the host has no address space left for its backing", bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto a = std::make_shared<Allocation>();
  a->kind = kind;
  a->base = reinterpret_cast<uintptr_t>(mapping->base);
  a->size = bytes;
  a->host = static_cast<char*>(mapping->base);
  a->device = device;
  a->charged = charge;
  a->ctx = ctx;
  a->buffer_id = next_buffer_id++;
  a->mapping = std::move(mapping);
  index_add(a);
  *out = std::move(a);
  return CUDA_SUCCESS;
}

void MemoryManager::Impl::uncharge(Allocation& a) {
  if (a.device >= 0 && a.charged > 0) {
    if (Device* dev = driver.device(a.device)) dev->release(a.charged);
    a.charged = 0;
  }
}

// One arena is a sparse memfd of 1 TiB: ranges are handed out in order and their pages given
// back to the kernel (hole punched) when released; a fresh arena follows an exhausted one.
CUresult MemoryManager::Impl::arena_allocate(uint64_t size, std::shared_ptr<void>* arena_out,
                                             int* fd, uint64_t* offset) {
  constexpr uint64_t kArenaBytes = 1ull << 40;
  if (size > kArenaBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard l(vmm_mu);
  if (arena_fd < 0 || arena_next + size > kArenaBytes) {
    int f = memfd_create("vgpu-vmm", MFD_CLOEXEC);
    if (f < 0 || ftruncate(f, static_cast<off_t>(kArenaBytes)) != 0) {
      if (f >= 0) close(f);
      log::warn("cuMemCreate: cannot create the memfd arena backing VMM allocations");
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    arena = std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<intptr_t>(f) + 1),
                                  [f](void*) { close(f); });
    arena_fd = f;
    arena_next = 0;
  }
  *arena_out = arena;
  *fd = arena_fd;
  *offset = arena_next;
  arena_next += size;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------

MemoryManager::MemoryManager(DriverState& driver) : impl_(std::make_unique<Impl>(driver)) {}
MemoryManager::~MemoryManager() = default;

CUresult MemoryManager::allocate_device(int device, size_t bytes, CUdeviceptr* out) {
  if (out == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (impl_->driver.device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  // The allocation belongs to the calling thread's context when it is on that device.
  CUcontext ctx = nullptr;
  if (auto c = impl_->driver.contexts().current(); c && c->device() == device) ctx = c->handle();
  std::shared_ptr<Allocation> a;
  if (CUresult r = impl_->allocate(AllocKind::device, device, bytes, ctx, &a); r != CUDA_SUCCESS)
    return r;
  *out = static_cast<CUdeviceptr>(a->base);
  return CUDA_SUCCESS;
}

CUresult MemoryManager::free_device(CUdeviceptr ptr) {
  auto a = impl_->index_remove(static_cast<uintptr_t>(ptr), [](const Allocation& x) {
    return (x.kind == AllocKind::device || x.kind == AllocKind::managed) && (!x.ipc_import || x.pool_import);
  });
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  impl_->uncharge(*a);
  return CUDA_SUCCESS;
}

std::optional<MemoryManager::Resolved> MemoryManager::resolve(CUdeviceptr ptr, size_t bytes) const {
  std::vector<std::shared_ptr<Allocation>> holders;
  if (!impl_->covers(static_cast<uintptr_t>(ptr), bytes == 0 ? 1 : bytes, &holders)) return std::nullopt;
  const Allocation& a = *holders.front();
  Resolved r;
  r.host = a.host + (static_cast<uintptr_t>(ptr) - a.base);
  switch (a.kind) {
    case AllocKind::pinned_host:
    case AllocKind::registered_host:
      r.device = -1;
      r.type = CU_MEMORYTYPE_HOST;
      break;
    default:
      r.device = a.device;
      r.type = CU_MEMORYTYPE_DEVICE;
      break;
  }
  return r;
}

void MemoryManager::context_destroyed(CUcontext ctx) {
  if (ctx == nullptr) return;
  std::vector<std::shared_ptr<Allocation>> gone;
  {
    std::unique_lock l(impl_->index_mu);
    for (auto it = impl_->index.begin(); it != impl_->index.end();) {
      if (it->second->ctx == ctx) {
        gone.push_back(std::move(it->second));
        it = impl_->index.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& a : gone) impl_->uncharge(*a);
  for (auto& arr : impl_->arrays.snapshot()) {
    if (arr->ctx != ctx || !impl_->arrays.remove(arr->handle)) continue;
    if (Device* dev = impl_->driver.device(arr->device)) dev->release(arr->charged);
  }
  for (auto& mip : impl_->mipmaps.snapshot()) {  // their levels went with the arrays above
    if (mip->ctx != ctx || !impl_->mipmaps.remove(mip->handle)) continue;
    if (Device* dev = impl_->driver.device(mip->device)) dev->release(mip->charged);
  }
  if (!gone.empty())
    log::debug("context {}: freed {} allocations with it", static_cast<void*>(ctx), gone.size());
}

}  // namespace vgpu
