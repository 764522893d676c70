// ABI v9: size_t sizes, no profiler handles, vNIC properties and transfer limits; init(logger).
#include "abi/net_v9.h"

#include "common.h"

namespace vgpu::nccl::adapt {
namespace {

ncclResult_t init_v9(ncclDebugLogger_t) { return Core::get().init(); }

ncclResult_t properties_v9(int dev, ncclNetProperties_v9_t* props) {
  NicProperties p;
  return v9_properties(dev, props, &p);
}

ncclResult_t listen_v9(int dev, void* handle, void** listen_comm) {
  return Core::get().listen(dev, handle, listen_comm);
}

ncclResult_t connect_v9(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v9_t**) {
  return Core::get().connect(dev, handle, send_comm);
}

ncclResult_t isend_v9(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                      void** request) {
  return Core::get().isend(send_comm, data, size, tag, mhandle, request);
}

ncclResult_t irecv_v9(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** request) {
  return Core::get().irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace
}  // namespace vgpu::nccl::adapt

using namespace vgpu::nccl::adapt;

VGPU_NCCL_EXPORT ncclNet_v9_t ncclNetPlugin_v9;
ncclNet_v9_t ncclNetPlugin_v9 = {
    kPluginName, init_v9, devices, properties_v9, listen_v9, connect_v9, accept, reg_mr,
    reg_mr_dmabuf, dereg_mr, isend_v9, irecv_v9, iflush, test, close_send, close_recv,
    close_listen, get_device_mr, irecv_consumed,
    nullptr,  // makeVDevice: no NIC fusion
};
