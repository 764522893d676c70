// The virtual memory management API of the sim backend: address reservations are PROT_NONE
// host reservations; a physical allocation (cuMemCreate) is a range of a memfd arena, charged to
// its device; cuMemMap maps that range MAP_SHARED|MAP_FIXED into a reservation, so one
// allocation mapped at two addresses shows the same bytes at both. As on the real driver, only
// a whole allocation can be mapped (offset 0, its full size).
#include <sys/mman.h>

#include "front/driver/entry_points.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace {

// The reservation holding all of [ptr, ptr + size), under vmm_mu.
bool in_reservation(const MemoryManager::Impl& m, uintptr_t ptr, size_t size) {
  auto it = m.reservations.upper_bound(ptr);
  if (it == m.reservations.begin()) return false;
  --it;
  return ptr >= it->first && size <= it->second && ptr - it->first <= it->second - size;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                           CUmemAllocationGranularity_flags option) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && c.driver->device(prop->location.id) == nullptr)
    return CUDA_ERROR_INVALID_DEVICE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                                 unsigned long long flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  (void)addr;  // a hint only
  if (ptr == nullptr || size == 0 || size % kGranularity != 0 || flags != 0 ||
      (alignment != 0 && (alignment & (alignment - 1)) != 0))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAddressReserve: size {} / alignment {} invalid", size, alignment);
  const size_t align = std::max<size_t>(alignment, kGranularity);
  if (size > (1ull << 46) || align > (1ull << 40)) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t span = size + align;
  void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAddressReserve: no address space for {} bytes", size);
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = round_up(start, align);
  if (base > start) munmap(raw, base - start);
  if (base + size < start + span) munmap(reinterpret_cast<void*>(base + size), start + span - base - size);
  std::lock_guard l(c.mem->vmm_mu);
  c.mem->reservations[base] = size;
  *ptr = base;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::lock_guard l(c.mem->vmm_mu);
  auto it = c.mem->reservations.find(ptr);
  if (it == c.mem->reservations.end() || it->second != size)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree: {:#x}+{} is not a reservation", ptr, size);
  {
    std::shared_lock il(c.mem->index_mu);
    auto m = c.mem->index.lower_bound(ptr);
    if (m != c.mem->index.end() && m->first < ptr + size)
      return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAddressFree: {:#x} still has mappings", ptr);
  }
  munmap(reinterpret_cast<void*>(ptr), size);
  c.mem->reservations.erase(it);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                         unsigned long long flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranularity != 0 || flags != 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: size {} is not a multiple of the granularity", size);
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemCreate: only pinned device allocations are supported");
  Device* dev = c.driver->device(prop->location.id);
  if (dev == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (!dev->reserve(size)) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate: out of memory on device {}", prop->location.id);
  auto phys = std::make_shared<PhysicalAllocation>();
  // Shareable with other processes: a memfd of its own (sim/shareable_api.cpp); else a range of
  // the process's arena.
  const CUresult made = (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                            ? sim::dedicated_memfd(prop->location.id, size, phys.get())
                            : c.mem->arena_allocate(size, &phys->arena, &phys->fd, &phys->offset);
  if (made != CUDA_SUCCESS) {
    dev->release(size);
    return made;
  }
  phys->size = size;
  phys->device = prop->location.id;  // from here on the destructor gives the capacity back
  phys->prop = *prop;
  phys->block_id = c.mem->next_buffer_id++;
  const CUmemGenericAllocationHandle h = (0x7c5ull << 52) | (c.mem->next_generic_handle++);
  std::lock_guard l(c.mem->vmm_mu);
  c.mem->physical[h] = {std::move(phys), 1};
  *handle = h;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<PhysicalAllocation> last;  // destroyed outside the lock
  std::lock_guard l(c.mem->vmm_mu);
  auto it = c.mem->physical.find(handle);
  if (it == c.mem->physical.end()) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemRelease: unknown handle {:#x}", handle);
  if (--it->second.refs == 0) {
    last = std::move(it->second.phys);
    c.mem->physical.erase(it);
  }
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                      unsigned long long flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (size == 0 || flags != 0 || ptr % kGranularity != 0 || size % kGranularity != 0 || offset % kGranularity != 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: unaligned address, size or offset");
  std::lock_guard l(c.mem->vmm_mu);
  auto it = c.mem->physical.find(handle);
  if (it == c.mem->physical.end()) return fail(CUDA_ERROR_INVALID_HANDLE, "cuMemMap: unknown handle {:#x}", handle);
  auto phys = it->second.phys;
  if (offset > phys->size || size > phys->size - offset)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: offset+size past the allocation");
  // The real driver maps whole handles only: part of one is CUDA_ERROR_NOT_SUPPORTED (measured
  // on an H100, driver 580), so a program that works on the sim works on a GPU.
  if (offset != 0 || size != phys->size)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuMemMap: {:#x}+{} is part of a {}-byte allocation; only whole "
                "allocations can be mapped", offset, size, phys->size);
  if (!in_reservation(*c.mem, ptr, size)) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: {:#x} is not reserved", ptr);
  std::unique_lock il(c.mem->index_mu);
  auto next = c.mem->index.lower_bound(ptr);
  if (next != c.mem->index.end() && next->first < ptr + size) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: already mapped");
  if (next != c.mem->index.begin() && std::prev(next)->second->base + std::prev(next)->second->size > ptr)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap: already mapped");
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, phys->fd,
                 static_cast<off_t>(phys->offset + offset));
  if (p == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemMap: mmap failed");
  auto a = std::make_shared<Allocation>();
  a->kind = AllocKind::vmm_mapping;
  a->base = ptr;
  a->size = size;
  a->host = static_cast<char*>(p);
  a->device = phys->device;
  a->vmm_handle = handle;
  a->buffer_id = c.mem->next_buffer_id++;
  a->physical = std::move(phys);
  c.mem->index[ptr] = std::move(a);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::shared_ptr<Allocation>> gone;  // released outside the locks
  std::lock_guard l(c.mem->vmm_mu);
  if (!in_reservation(*c.mem, ptr, size)) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemUnmap: {:#x} is not reserved", ptr);
  std::unique_lock il(c.mem->index_mu);
  auto first = c.mem->index.lower_bound(ptr);
  auto last = first;
  uintptr_t reached = ptr;
  while (last != c.mem->index.end() && last->first < ptr + size) {
    if (last->second->kind != AllocKind::vmm_mapping || last->first != reached) break;
    reached = last->first + last->second->size;
    ++last;
  }
  if (reached != ptr + size) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemUnmap: {:#x}+{} is not exactly mapped", ptr, size);
  for (auto it = first; it != last; ++it) gone.push_back(std::move(it->second));
  c.mem->index.erase(first, last);
  // Back to an inaccessible reservation (the pages themselves stay with the allocation).
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || c.driver->device(desc[i].location.id) == nullptr)
      return CUDA_ERROR_INVALID_DEVICE;
  std::vector<std::shared_ptr<Allocation>> holders;
  if (!c.mem->covers(ptr, size, &holders))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess: {:#x}+{} is not mapped", ptr, size);
  std::lock_guard l(c.mem->vmm_mu);  // guards the access maps
  for (auto& a : holders) {
    if (a->kind != AllocKind::vmm_mapping) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; ++i) a->access[desc[i].location.id] = desc[i].flags;
  }
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(ptr);
  if (!a || a->kind != AllocKind::vmm_mapping) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(c.mem->vmm_mu);
  auto it = a->access.find(location->id);
  *flags = it == a->access.end() ? CU_MEM_ACCESS_FLAGS_PROT_NONE : static_cast<CUmemAccess_flags>(it->second);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                                    CUmemGenericAllocationHandle handle) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(c.mem->vmm_mu);
  auto it = c.mem->physical.find(handle);
  if (it == c.mem->physical.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.phys->prop;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(reinterpret_cast<uintptr_t>(addr));
  if (!a || a->kind != AllocKind::vmm_mapping) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(c.mem->vmm_mu);
  auto it = c.mem->physical.find(a->vmm_handle);
  if (it == c.mem->physical.end()) {
    // Released but still mapped: the handle comes back to life with this reference.
    c.mem->physical[a->vmm_handle] = {a->physical, 1};
  } else {
    ++it->second.refs;
  }
  *handle = a->vmm_handle;
  return CUDA_SUCCESS;
}
