// ABI v8: int sizes in isend/irecv, init(logger), no vNIC, no transfer limits in properties.
#include "abi/net_v8.h"

#include "common.h"
#include "common/log.h"

namespace vgpu::nccl::adapt {
namespace {

ncclResult_t init_v8(ncclDebugLogger_t) { return Core::get().init(); }

ncclResult_t properties_v8(int dev, ncclNetProperties_v8_t* props) {
  NicProperties p;
  return base_properties(dev, props, &p);
}

ncclResult_t listen_v8(int dev, void* handle, void** listen_comm) {
  return Core::get().listen(dev, handle, listen_comm);
}

ncclResult_t connect_v8(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t**) {
  return Core::get().connect(dev, handle, send_comm);
}

ncclResult_t isend_v8(void* send_comm, void* data, int size, int tag, void* mhandle,
                      void** request) {
  if (size < 0) {
    if (request != nullptr) *request = nullptr;
    vgpu::log::warn("nccl isend: negative size {}", size);
    return ncclInternalError;
  }
  return Core::get().isend(send_comm, data, static_cast<size_t>(size), tag, mhandle, request);
}

ncclResult_t irecv_v8(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                      void** request) {
  if (request != nullptr) *request = nullptr;
  if (n < 1 || n > kMaxRecvs || sizes == nullptr) {
    vgpu::log::warn("nccl irecv: bad grouped receive (n={}, sizes={})", n,
                    static_cast<const void*>(sizes));
    return ncclInternalError;
  }
  size_t wide[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) {
      vgpu::log::warn("nccl irecv: negative size {}", sizes[i]);
      return ncclInternalError;
    }
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return Core::get().irecv(recv_comm, n, data, wide, tags, mhandles, request);
}

}  // namespace
}  // namespace vgpu::nccl::adapt

using namespace vgpu::nccl::adapt;

VGPU_NCCL_EXPORT ncclNet_v8_t ncclNetPlugin_v8;
ncclNet_v8_t ncclNetPlugin_v8 = {
    kPluginName, init_v8, devices, properties_v8, listen_v8, connect_v8, accept, reg_mr,
    reg_mr_dmabuf, dereg_mr, isend_v8, irecv_v8, iflush, test, close_send, close_recv,
    close_listen, get_device_mr, irecv_consumed,
};
