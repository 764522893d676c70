#include "common.h"

#include "profiler/launch_tags.h"

#include "common/log.h"

namespace vgpu::nccl::adapt {

ncclResult_t devices(int* ndev) { return Core::get().devices(ndev); }

ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v7_t** dev_comm) {
  (void)dev_comm;  // no device offload: NCCL keeps its host proxy path
  return Core::get().accept(listen_comm, recv_comm);
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return Core::get().reg_mr(comm, data, size, type, mhandle);
}

ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) {
  (void)offset;
  (void)fd;  // host staging reads through the virtual address; the dma-buf adds nothing
  return Core::get().reg_mr(comm, data, size, type & ~NCCL_PTR_DMABUF, mhandle);
}

ncclResult_t dereg_mr(void* comm, void* mhandle) { return Core::get().dereg_mr(comm, mhandle); }

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void* phandle, void** request) {
  return Core::get().isend(send_comm, data, size, tag, mhandle, request,
                           prof::LaunchTags::get().launch_of_transfer(phandle));
}

ncclResult_t irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) {
  // Grouped receives are the same step of one operation's channels: one launch.
  uint64_t launch = 0;
  for (int i = 0; phandles != nullptr && i < n && launch == 0; ++i)
    launch = prof::LaunchTags::get().launch_of_transfer(phandles[i]);
  return Core::get().irecv(recv_comm, n, data, sizes, tags, mhandles, request, launch);
}

ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                    void** request) {
  (void)data;
  (void)sizes;
  (void)mhandles;
  return Core::get().iflush(recv_comm, n, request);
}

ncclResult_t test(void* request, int* done, int* sizes) {
  return Core::get().test(request, done, sizes);
}

ncclResult_t close_send(void* c) { return Core::get().close_send(c); }
ncclResult_t close_recv(void* c) { return Core::get().close_recv(c); }
ncclResult_t close_listen(void* c) { return Core::get().close_listen(c); }

ncclResult_t get_device_mr(void* comm, void* mhandle, void** dptr_mhandle) {
  (void)comm;
  (void)mhandle;
  (void)dptr_mhandle;
  vgpu::log::warn("nccl getDeviceMr: this plugin has no device-side networking");
  return ncclInternalError;
}

ncclResult_t irecv_consumed(void* recv_comm, int n, void* request) {
  (void)recv_comm;
  (void)n;
  (void)request;
  return ncclSuccess;
}

ncclResult_t init_with_ctx(void** ctx) {
  ncclResult_t rc = Core::get().init();
  // One core serves every communicator: the context is only a non-null token.
  if (ctx != nullptr) *ctx = rc == ncclSuccess ? static_cast<void*>(&Core::get()) : nullptr;
  return rc;
}

ncclResult_t finalize(void* ctx) {
  (void)ctx;
  return Core::get().finalize();
}

}  // namespace vgpu::nccl::adapt
