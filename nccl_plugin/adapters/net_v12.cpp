// ABI v12: per-communicator init context and finalize; listen/connect take the context.
#include "abi/net_v12.h"

#include "common.h"

namespace vgpu::nccl::adapt {
namespace {

ncclResult_t init_v12(void** ctx, uint64_t, ncclNetCommConfig_v12_t*, ncclDebugLogger_t,
                      ncclProfilerCallback_t) {
  return init_with_ctx(ctx);
}

ncclResult_t properties_v12(int dev, ncclNetProperties_v12_t* props) {
  NicProperties p;
  ncclResult_t rc = v9_properties(dev, props, &p);
  if (rc != ncclSuccess) return rc;
  props->maxMultiRequestSize = p.max_multi_request_size;
  // No rail/plane hints: NCCL then takes the topology (NCCL_TOPO_FILE) as it is.
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

ncclResult_t listen_v12(void*, int dev, void* handle, void** listen_comm) {
  return Core::get().listen(dev, handle, listen_comm);
}

ncclResult_t connect_v12(void*, int dev, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v12_t**) {
  return Core::get().connect(dev, handle, send_comm);
}

}  // namespace
}  // namespace vgpu::nccl::adapt

using namespace vgpu::nccl::adapt;

VGPU_NCCL_EXPORT ncclNet_v12_t ncclNetPlugin_v12;
ncclNet_v12_t ncclNetPlugin_v12 = {
    kPluginName, init_v12, devices, properties_v12, listen_v12, connect_v12, accept, reg_mr,
    reg_mr_dmabuf, dereg_mr, isend, irecv, iflush, test, close_send, close_recv, close_listen,
    get_device_mr, irecv_consumed,
    nullptr,  // makeVDevice: no NIC fusion
    finalize,
    nullptr,  // setNetAttr: no per-operation tuning
};
