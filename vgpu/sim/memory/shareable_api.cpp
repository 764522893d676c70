// Shareable VMM allocations between the processes of one job (cuMemExportToShareableHandle,
// cuMemImportFromShareableHandle), as NCCL's cuMem transport and PyTorch's expandable segments
// use them. An allocation made shareable (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR requested at
// cuMemCreate) lives in a memfd of its own, named after its device; exporting hands out a copy
// of the descriptor, which the program passes to the other process (a Unix socket, or
// inheritance); importing maps the same pages there. The exporter's device holds the capacity.
// Other handle types (fabric, Win32) are CUDA_ERROR_NOT_SUPPORTED on a virtual device.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "front/driver/entry_points.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace vgpu::sim {

CUresult dedicated_memfd(int device, uint64_t size, PhysicalAllocation* phys) {
  const std::string name = "vgpu-vmm-dev" + std::to_string(device);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate: no memfd of {} bytes for a shareable allocation", size);
  }
  phys->fd = fd;
  phys->offset = 0;
  phys->dedicated = true;
  phys->arena = std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<intptr_t>(fd) + 1),
                                      [](void* p) { close(static_cast<int>(reinterpret_cast<intptr_t>(p) - 1)); });
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

namespace {

// The device a vgpu memfd was made for, from its name ("/memfd:vgpu-vmm-dev3 (deleted)");
// -1 when the descriptor is not one of ours.
int device_of_memfd(int fd) {
  char link[256] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (readlink(path.c_str(), link, sizeof link - 1) <= 0) return -1;
  int device = -1;
  if (std::sscanf(link, "/memfd:vgpu-vmm-dev%d", &device) != 1) return -1;
  return device;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                                          CUmemAllocationHandleType handleType,
                                                          unsigned long long flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (shareableHandle == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuMemExportToShareableHandle: handle type {} is not supported by vgpu",
                static_cast<int>(handleType));
  std::lock_guard l(c.mem->vmm_mu);
  auto it = c.mem->physical.find(handle);
  if (it == c.mem->physical.end())
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemExportToShareableHandle: unknown handle {:#x}", handle);
  const PhysicalAllocation& phys = *it->second.phys;
  if (!phys.dedicated || (phys.prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
    return fail(CUDA_ERROR_INVALID_VALUE,
                "cuMemExportToShareableHandle: the allocation was not created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
  const int fd = dup(phys.fd);  // the caller's to pass on and close (not close-on-exec, as the real driver's)
  if (fd < 0) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemExportToShareableHandle: dup: {}", std::strerror(errno));
  *static_cast<int*>(shareableHandle) = fd;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                            CUmemAllocationHandleType shHandleType) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuMemImportFromShareableHandle: handle type {} is not supported by vgpu",
                static_cast<int>(shHandleType));
  const int theirs = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  struct stat st{};
  const int device = device_of_memfd(theirs);
  if (theirs < 0 || fstat(theirs, &st) != 0 || st.st_size <= 0 || c.driver->device(device) == nullptr)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemImportFromShareableHandle: descriptor {} is not a vgpu allocation",
                theirs);
  const int fd = fcntl(theirs, F_DUPFD_CLOEXEC, 0);  // the caller keeps and closes its own
  if (fd < 0) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemImportFromShareableHandle: dup: {}", std::strerror(errno));
  auto phys = std::make_shared<PhysicalAllocation>();
  phys->fd = fd;
  phys->arena = std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<intptr_t>(fd) + 1),
                                      [](void* p) { close(static_cast<int>(reinterpret_cast<intptr_t>(p) - 1)); });
  phys->offset = 0;
  phys->size = static_cast<uint64_t>(st.st_size);
  phys->dedicated = true;
  phys->imported = true;
  phys->device = device;
  phys->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  phys->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  phys->prop.location.id = device;
  phys->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  phys->block_id = c.mem->next_buffer_id++;
  const CUmemGenericAllocationHandle h = (0x7c5ull << 52) | (c.mem->next_generic_handle++);
  std::lock_guard l(c.mem->vmm_mu);
  c.mem->physical[h] = {std::move(phys), 1};
  *handle = h;
  return CUDA_SUCCESS;
}
