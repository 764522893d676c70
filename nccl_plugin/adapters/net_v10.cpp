// ABI v10: init(logger, profiler), connect takes a comm config, profiler handles on isend/irecv.
#include "abi/net_v10.h"

#include "common.h"

namespace vgpu::nccl::adapt {
namespace {

ncclResult_t init_v10(ncclDebugLogger_t, ncclProfilerCallback_t) { return Core::get().init(); }

ncclResult_t properties_v10(int dev, ncclNetProperties_v10_t* props) {
  NicProperties p;
  return v9_properties(dev, props, &p);
}

ncclResult_t listen_v10(int dev, void* handle, void** listen_comm) {
  return Core::get().listen(dev, handle, listen_comm);
}

ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v10_t**) {
  return Core::get().connect(dev, handle, send_comm);  // traffic classes mean nothing here
}

}  // namespace
}  // namespace vgpu::nccl::adapt

using namespace vgpu::nccl::adapt;

VGPU_NCCL_EXPORT ncclNet_v10_t ncclNetPlugin_v10;
ncclNet_v10_t ncclNetPlugin_v10 = {
    kPluginName, init_v10, devices, properties_v10, listen_v10, connect_v10, accept, reg_mr,
    reg_mr_dmabuf, dereg_mr, isend, irecv, iflush, test, close_send, close_recv, close_listen,
    get_device_mr, irecv_consumed,
    nullptr,  // makeVDevice
};
