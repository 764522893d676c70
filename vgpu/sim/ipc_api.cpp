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

#include "driver/entry_points.h"
#include "exec/virtual_clock.h"
#include "sim/api_util.h"

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
  int32_t device;
  int32_t reserved;
};
static_assert(sizeof(HandleData) <= sizeof(CUipcMemHandle));

// Moves the allocation's pages into a memfd mapped at the same address; idempotent.
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
  std::memcpy(staging, a.mapping->base, length);
  munmap(staging, length);
  // Replaces the private pages in place: the address the program holds stays valid.
  if (mmap(a.mapping->base, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    close(fd);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuIpcGetMemHandle: cannot remap the allocation");
  }
  a.ipc_fd = std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<intptr_t>(fd) + 1),
                                   [](void* p) { close(static_cast<int>(reinterpret_cast<intptr_t>(p) - 1)); });
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
  {
    std::lock_guard lock(c.mem->vmm_mu);  // one export at a time per allocation
    if (CUresult r = share(*a); r != CUDA_SUCCESS) return r;
  }
  HandleData h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.pid = getpid();
  h.fd = static_cast<int32_t>(reinterpret_cast<intptr_t>(a->ipc_fd.get()) - 1);
  h.length = a->mapping->length;
  h.size = a->size;
  h.buffer_id = a->buffer_id;
  h.device = a->device;
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
      c.driver->device(h.device) == nullptr)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuIpcOpenMemHandle: not a vgpu IPC handle");
  if (h.pid == getpid())  // the real driver does not open its own process's handles
    return fail(CUDA_ERROR_INVALID_CONTEXT, "cuIpcOpenMemHandle: the handle was made by this process");
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuIpcOpenMemHandle: {}: {} (has the exporting process exited?)", path,
                std::strerror(errno));
  void* p = mmap(nullptr, h.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuIpcOpenMemHandle: cannot map {} bytes", h.length);
  auto mapping = std::make_shared<HostMapping>();
  mapping->base = p;
  mapping->length = h.length;
  auto a = std::make_shared<Allocation>();
  a->kind = AllocKind::device;
  a->base = reinterpret_cast<uintptr_t>(p);
  a->size = h.size;
  a->host = static_cast<char*>(p);
  a->device = h.device;
  a->charged = 0;  // the exporting process holds the capacity
  a->ctx = c.ctx->handle();
  a->buffer_id = c.mem->next_buffer_id++;
  a->mapping = std::move(mapping);
  a->ipc_import = true;
  c.mem->index_add(a);
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
