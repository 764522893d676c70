// What every ABI adapter shares: the entry points whose signature did not change from v8 to
// v12 (they forward to the core unchanged), and the property fields common to all versions.
#pragma once

#include "abi/nccl_types.h"
#include "core/net_core.h"

#define VGPU_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::nccl::adapt {

inline constexpr const char* kPluginName = "vgpu";

ncclResult_t devices(int* ndev);
ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v7_t** dev_comm);
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);
ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void* phandle, void** request);
ncclResult_t irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request);
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* send_comm);
ncclResult_t close_recv(void* recv_comm);
ncclResult_t close_listen(void* listen_comm);
ncclResult_t get_device_mr(void* comm, void* mhandle, void** dptr_mhandle);
ncclResult_t irecv_consumed(void* recv_comm, int n, void* request);
// v11+: init with a per-communicator context, and its finalize.
ncclResult_t init_with_ctx(void** ctx);
ncclResult_t finalize(void* ctx);

// The fields every version has (v8's set).
template <class P> ncclResult_t base_properties(int dev, P* out, NicProperties* p) {
  if (out == nullptr) return Core::get().properties(dev, nullptr);
  ncclResult_t rc = Core::get().properties(dev, p);
  if (rc != ncclSuccess) return rc;
  *out = P{};
  out->name = const_cast<char*>(p->name);
  out->pciPath = const_cast<char*>(p->pci_path);
  out->guid = p->guid;
  out->ptrSupport = p->ptr_support;
  out->regIsGlobal = p->reg_is_global;
  out->speed = p->speed_mbps;
  out->port = p->port;
  out->latency = p->latency_us;
  out->maxComms = p->max_comms;
  out->maxRecvs = p->max_recvs;
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

// v9+ additions: flush policy, the (single-device) vNIC description and transfer limits.
template <class P> ncclResult_t v9_properties(int dev, P* out, NicProperties* p) {
  ncclResult_t rc = base_properties(dev, out, p);
  if (rc != ncclSuccess) return rc;
  out->forceFlush = p->force_flush;
  out->vProps.ndevs = 1;
  out->vProps.devs[0] = dev;
  out->maxP2pBytes = p->max_p2p_bytes;
  out->maxCollBytes = p->max_coll_bytes;
  return ncclSuccess;
}

}  // namespace vgpu::nccl::adapt
