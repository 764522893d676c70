// The version-neutral plugin: every ABI adapter (adapters/net_vN.cpp) is a thin translation
// onto these calls. One Core per process owns the cluster description, the NIC table, the
// registry of live objects and virtual time. Every call validates what NCCL hands it and
// answers an NCCL error code with one log line; nothing throws.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "abi/nccl_types.h"
#include "comms.h"
#include "simcore/cluster_spec.h"
#include "virtual_time.h"

namespace vgpu::nccl {

// One NIC as every ABI version describes it (each adapter copies the fields its struct has).
struct NicProperties {
  const char* name = nullptr;     // "vgpu-nic<i>", stable for the life of the process
  const char* pci_path = nullptr; // virtual NIC: NCCL attaches it by name from NCCL_TOPO_FILE
  uint64_t guid = 0;
  int ptr_support = NCCL_PTR_HOST;
  int reg_is_global = 0;
  int force_flush = 0;
  int speed_mbps = 0;
  int port = 1;
  float latency_us = 0;
  int max_comms = 65536;
  int max_recvs = kMaxRecvs;
  uint64_t max_p2p_bytes = NCCL_MAX_NET_SIZE_BYTES;
  uint64_t max_coll_bytes = NCCL_MAX_NET_SIZE_BYTES;
  int max_multi_request_size = 1;
};

class Core {
 public:
  static Core& get();

  ncclResult_t init();  // idempotent; fails (with a message saying what to change) on bad config
  ncclResult_t finalize();
  ncclResult_t devices(int* ndev);
  ncclResult_t properties(int dev, NicProperties* out);

  ncclResult_t listen(int dev, void* handle, void** listen_comm);
  ncclResult_t connect(int dev, const void* handle, void** send_comm);
  ncclResult_t accept(void* listen_comm, void** recv_comm);

  ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t dereg_mr(void* comm, void* mhandle);

  // `launch`: the NCCL kernel launch the transfer belongs to (profiler/launch_tags.h), 0 when
  // unknown.
  ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request, uint64_t launch = 0);
  ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                     void** mhandles, void** request, uint64_t launch = 0);
  ncclResult_t iflush(void* recv_comm, int n, void** request);
  ncclResult_t test(void* request, int* done, int* sizes);

  ncclResult_t close_send(void* send_comm);
  ncclResult_t close_recv(void* recv_comm);
  ncclResult_t close_listen(void* listen_comm);

  VirtualTime* vtime();  // nullptr before a successful init()

  // Set from NCCL_PTR_CUDA-capable backends (the passthrough backend, later).
  void set_cuda_pointers(bool on) { cuda_pointers_ = on; }

 private:
  Core() = default;
  bool ready() const;
  ncclResult_t check_region(void* mhandle, const void* data, size_t size, const char* call);
  ncclResult_t progress_send(SendComm& c);
  ncclResult_t progress_recv(RecvComm& c);
  ncclResult_t copy_direct(RecvComm& c, const MessageDesc& d);
  ncclResult_t fail(ConnHeader& h, ncclResult_t code);
  void finish_request_vtime(Request& r);

  std::mutex init_mu_;
  std::optional<simcore::ClusterSpec> cluster_;
  std::vector<std::string> nic_names_;
  std::unique_ptr<VirtualTime> vtime_;
  uint64_t ring_bytes_ = 1u << 20;
  bool direct_ = true;  // ranks in one process: the receiver copies from the sender's buffer
  std::atomic<bool> cuda_pointers_{false};
  // Connection segments this process created and nobody accepted yet, by name: an accept in
  // this process takes the creator's mapping instead of mapping the segment a second time, so
  // both ends use the same addresses (which is also what lets ThreadSanitizer see how they
  // synchronize).
  std::mutex local_mu_;
  std::unordered_map<std::string, std::weak_ptr<ShmMapping>> local_conns_;
  std::atomic<bool> ready_{false};
  Registry registry_;
};

}  // namespace vgpu::nccl
