// CUDA IPC between the processes of one job on the sim backend (cuIpcGetMemHandle,
// cuIpcOpenMemHandle, cuIpcCloseMemHandle): PyTorch's multiprocessing and NCCL's proxies share
// device buffers this way.
//
// Device memory here is host memory. Exporting an allocation moves its pages into a memfd
// mapped at the same address (the contents copied once), so from then on both processes see
// the same bytes; the handle names the exporting process, the descriptor and the size. The
// importer maps the descriptor through /proc/<pid>/fd/<fd> (same user, as vgpu's status region
// requires too) and sees a device allocation of the exporter's device, charged to nobody here
// (the exporter holds the capacity). Handles of a process that has exited, or opened in the
// process that made them, are refused as the real driver refuses them.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "front/driver/entry_points.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"
#include "sim/memory/page_writes.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace {

constexpr char kMagic[8] = {'v', 'g', 'p', 'u', 'i', 'p', 'c', '1'};

struct HandleData {  // within CUipcMemHandle's 64 reserved bytes
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t length;     // bytes mapped (whole pages)
  uint64_t size;       // the allocation's size
  uint64_t buffer_id;  // the exporter's allocation id
  int32_t device;      // the cluster's GPU: processes number GPUs differently (CUDA_VISIBLE_DEVICES)
  int32_t reserved;
};
static_assert(sizeof(HandleData) <= sizeof(CUipcMemHandle));

// The importer's ordinal of the exporter's GPU `gpu` (the cluster's). A process that does not see
// that GPU (another node's, under CUDA_VISIBLE_DEVICES) maps the memory into its current device's
// address space, as the real driver does, and counts it as that device's; -1: no such GPU.
int importer_ordinal(const Call& c, int gpu) {
  if (gpu < 0 || gpu >= c.driver->cluster().total_gpus()) return -1;
  for (int i = 0; i < c.driver->device_count(); ++i)
    if (c.driver->global_gpu(i) == gpu) return i;
  return c.ctx ? c.ctx->device() : 0;
}

// Moves the allocation's pages into a memfd mapped at the same address; idempotent. Done once,
// at the first export: a copy or memset of this process running on the buffer at that very
// moment (on a driver thread) could lose its bytes: a known limit of the sim backend.
CUresult share(Allocation& a) {
  if (a.ipc_fd) return CUDA_SUCCESS;
  if (!a.mapping || a.mapping->base != reinterpret_cast<void*>(a.base))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuIpcGetMemHandle: {:#x} cannot be shared", a.base);
  const size_t length = a.mapping->length;
  const int fd = memfd_create("vgpu-ipc", 0);  // not CLOEXEC-sensitive: opened by path, never inherited
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(length)) != 0) {
    if (fd >= 0) close(fd);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuIpcGetMemHandle: no memfd for {} bytes", length);
  }
  void* staging = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (staging == MAP_FAILED) {
    close(fd);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuIpcGetMemHandle: cannot map the memfd");
  }
  // Pages of zeros (never written, or released) stay holes of the memfd: they cost nothing.
  copy_pages(static_cast<char*>(staging), static_cast<const char*>(a.mapping->base), length,
             PageRelease::shared_pages);
  munmap(staging, length);
  // Replaces the private pages in place: the address the program holds stays valid. Marked
  // shared first, so that a write releasing pages from now on punches holes in the memfd.
  a.mapping->shared.store(true, std::memory_order_release);
  if (mmap(a.mapping->base, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    a.mapping->shared.store(false, std::memory_order_release);
    close(fd);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuIpcGetMemHandle: cannot remap the allocation");
  }
  a.ipc_fd = std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<intptr_t>(fd) + 1),
                                   [](void* p) { close(static_cast<int>(reinterpret_cast<intptr_t>(p) - 1)); });
  return CUDA_SUCCESS;
}

// Maps the exporter's memory named by `h` into this process as a device allocation of its
// device, charged to nobody here.
CUresult map_exported(const char* call, const Call& c, const HandleData& h, std::shared_ptr<Allocation>* out) {
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: {}: {} (has the exporting process exited?)", call, path,
                std::strerror(errno));
  void* p = mmap(nullptr, h.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY, "{}: cannot map {} bytes", call, h.length);
  auto mapping = std::make_shared<HostMapping>();
  mapping->base = p;
  mapping->length = h.length;
  mapping->shared.store(true, std::memory_order_relaxed);
  auto a = std::make_shared<Allocation>();
  a->kind = AllocKind::device;
  a->base = reinterpret_cast<uintptr_t>(p);
  a->size = h.size;
  a->host = static_cast<char*>(p);
  a->device = importer_ordinal(c, h.device);
  a->charged = 0;  // the exporting process holds the capacity
  a->ctx = c.ctx->handle();
  a->buffer_id = c.mem->next_buffer_id++;
  a->mapping = std::move(mapping);
  a->ipc_import = true;
  c.mem->index_add(a);
  *out = std::move(a);
  return CUDA_SUCCESS;
}

// The handle data of an allocation `a` (shared first).
CUresult export_data(const char* call, MemoryManager::Impl& mem, Allocation& a, HandleData* h) {
  {
    std::lock_guard lock(mem.vmm_mu);  // one export at a time per allocation
    if (CUresult r = share(a); r != CUDA_SUCCESS) return fail(r, "{}: the memory cannot be shared", call);
  }
  *h = HandleData{};
  std::memcpy(h->magic, kMagic, sizeof kMagic);
  h->pid = getpid();
  h->fd = static_cast<int32_t>(reinterpret_cast<intptr_t>(a.ipc_fd.get()) - 1);
  h->length = a.mapping->length;
  h->size = a.size;
  h->buffer_id = a.buffer_id;
  h->device = mem.driver.global_gpu(a.device);
  return CUDA_SUCCESS;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuIpcGetMemHandle", &c); r != CUDA_SUCCESS) return r;
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(dptr);
  if (!a || a->kind != AllocKind::device || a->ipc_import)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuIpcGetMemHandle: {:#x} is not memory of cuMemAlloc", dptr);
  HandleData h;
  if (CUresult r = export_data("cuIpcGetMemHandle", *c.mem, *a, &h); r != CUDA_SUCCESS) return r;
  std::memset(pHandle, 0, sizeof *pHandle);
  std::memcpy(pHandle->reserved, &h, sizeof h);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuIpcOpenMemHandle", &c); r != CUDA_SUCCESS) return r;
  if (pdptr == nullptr || (flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0) return CUDA_ERROR_INVALID_VALUE;
  HandleData h;
  std::memcpy(&h, handle.reserved, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.length == 0 || h.size > h.length ||
      importer_ordinal(c, h.device) < 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuIpcOpenMemHandle: not a vgpu IPC handle");
  if (h.pid == getpid())  // the real driver does not open its own process's handles
    return fail(CUDA_ERROR_INVALID_CONTEXT, "cuIpcOpenMemHandle: the handle was made by this process");
  std::shared_ptr<Allocation> a;
  if (CUresult r = map_exported("cuIpcOpenMemHandle", c, h, &a); r != CUDA_SUCCESS) return r;
  *pdptr = static_cast<CUdeviceptr>(a->base);
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  return cuIpcOpenMemHandle_v2(pdptr, handle, flags);
}

VGPU_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuIpcCloseMemHandle", &c); r != CUDA_SUCCESS) return r;
  auto a = c.mem->index_remove(static_cast<uintptr_t>(dptr), [](const Allocation& x) { return x.ipc_import; });
  if (!a) return fail(CUDA_ERROR_INVALID_VALUE, "cuIpcCloseMemHandle: {:#x} was not opened by cuIpcOpenMemHandle", dptr);
  return CUDA_SUCCESS;  // the mapping goes with the last reference (copies in flight keep it)
}

// ---- pools shared between processes (cuMemPoolExportToShareableHandle and friends) -----------
// A pool created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR exports as a descriptor of a small
// memfd that names the exporting process and the device; the importer gets a pool of its own
// standing for it, from which nothing can be allocated, only pointers imported: each exported
// pointer (cuMemPoolExportPointer) is shared as cuIpcGetMemHandle shares memory, and imported
// pointers are given back with cuMemFree / cuMemFreeAsync.

namespace {
struct PoolRecord {
  char magic[8];
  int32_t pid;
  int32_t device;  // the cluster's GPU, as HandleData's
};
constexpr char kPoolMagic[8] = {'v', 'g', 'p', 'u', 'p', 'o', 'o', 'l'};
static_assert(sizeof(HandleData) <= sizeof(CUmemPoolPtrExportData));
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                                              CUmemAllocationHandleType handleType,
                                                              unsigned long long flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (handle_out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto p = c.mem->pools.find(pool);
  if (!p || p->imported_from != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolExportToShareableHandle: not a pool of this process");
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      (p->props.handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolExportToShareableHandle: the pool was not created shareable by file descriptor");
  const int fd = memfd_create("vgpu-pool", 0);
  PoolRecord rec{};
  std::memcpy(rec.magic, kPoolMagic, sizeof kPoolMagic);
  rec.pid = getpid();
  rec.device = c.driver->global_gpu(p->device);
  if (fd < 0 || pwrite(fd, &rec, sizeof rec, 0) != static_cast<ssize_t>(sizeof rec)) {
    if (fd >= 0) close(fd);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemPoolExportToShareableHandle: no memfd");
  }
  *static_cast<int*>(handle_out) = fd;  // the caller's to pass on and close
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                                                CUmemAllocationHandleType handleType,
                                                                unsigned long long flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (pool_out == nullptr || flags != 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_INVALID_VALUE;
  PoolRecord rec{};
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(handle));
  if (pread(fd, &rec, sizeof rec, 0) != static_cast<ssize_t>(sizeof rec) ||
      std::memcmp(rec.magic, kPoolMagic, sizeof kPoolMagic) != 0 || importer_ordinal(c, rec.device) < 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolImportFromShareableHandle: descriptor {} is not a vgpu pool", fd);
  auto p = std::make_shared<Pool>();
  p->device = importer_ordinal(c, rec.device);
  p->exporter_gpu = rec.device;
  p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p->props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p->props.location.id = p->device;
  p->imported_from = rec.pid;
  p->handle = mint_handle<CUmemoryPool>(HandleKind::mem_pool);
  c.mem->pools.add(p->handle, p);
  *pool_out = p->handle;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData* shareData_out, CUdeviceptr ptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (shareData_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(ptr);
  if (!a || a->kind != AllocKind::pool || a->base != ptr || !a->pool_owner ||
      (a->pool_owner->props.handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolExportPointer: {:#x} is not an allocation of a shareable pool", ptr);
  HandleData h;
  if (CUresult r = export_data("cuMemPoolExportPointer", *c.mem, *a, &h); r != CUDA_SUCCESS) return r;
  std::memset(shareData_out, 0, sizeof *shareData_out);
  std::memcpy(shareData_out->reserved, &h, sizeof h);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool,
                                                    CUmemPoolPtrExportData* shareData) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuMemPoolImportPointer", &c); r != CUDA_SUCCESS) return r;
  if (ptr_out == nullptr || shareData == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto p = c.mem->pools.find(pool);
  HandleData h;
  std::memcpy(&h, shareData->reserved, sizeof h);
  if (!p || p->imported_from == 0 || p->imported_from != h.pid || std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 ||
      h.length == 0 || h.size > h.length || h.device != p->exporter_gpu)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolImportPointer: the data does not belong to this imported pool");
  std::shared_ptr<Allocation> a;
  if (CUresult r = map_exported("cuMemPoolImportPointer", c, h, &a); r != CUDA_SUCCESS) return r;
  a->pool_import = true;
  *ptr_out = static_cast<CUdeviceptr>(a->base);
  return CUDA_SUCCESS;
}
