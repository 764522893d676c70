// Core: initialization, NIC properties, memory registration, test() and close.
#include "net_core.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/settings.h"
#include "simcore/cluster_config.h"

namespace vgpu::nccl {

Core& Core::get() {
  // Never destroyed: NCCL may call in from its threads while the process exits.
  static Core* core = new Core();
  return *core;
}

bool Core::ready() const { return ready_.load(std::memory_order_acquire); }

ncclResult_t Core::init() {
  std::lock_guard lock(init_mu_);
  if (ready()) return ncclSuccess;
  simcore::ConfigResult loaded = simcore::load_cluster_config();
  if (!loaded.ok()) {
    vgpu::log::always(fmt::format(
        "vgpu nccl plugin: cannot load the cluster description: {} (fix VGPU_CONFIG or the "
        "VGPU_* overrides)", loaded.error.to_string()));
    return ncclInvalidUsage;
  }
  cluster_ = std::move(*loaded.cluster);
  if (cluster_->nic.per_node <= 0 || !(cluster_->nic.bw > 0)) {
    vgpu::log::always(fmt::format("vgpu nccl plugin: the cluster ({}) has no usable NIC "
                                  "(nic per_node={}, bw={}): configure [nic]",
                                  cluster_->source, cluster_->nic.per_node, cluster_->nic.bw));
    cluster_.reset();
    return ncclInvalidUsage;
  }
  ring_bytes_ = static_cast<uint64_t>(vgpu::settings::integer(vgpu::settings::Id::nccl_ring_bytes));
  // VGPU_NCCL_DIRECT=0: ranks in one process also go through the ring (tests of the ring path,
  // or to rule the direct copy out when chasing a problem).
  direct_ = vgpu::settings::flag(vgpu::settings::Id::nccl_direct);
  nic_names_.clear();
  for (int i = 0; i < cluster_->nic.per_node; ++i) nic_names_.push_back(fmt::format("vgpu-nic{}", i));
  vtime_ = std::make_unique<VirtualTime>(*cluster_);
  if (int n = reap_stale_segments(); n > 0) {
    vgpu::log::info("nccl plugin: removed {} segment(s) left by exited ranks of this job", n);
  }
  ready_.store(true, std::memory_order_release);
  vgpu::log::info("nccl plugin: {} NIC(s) per node at {} Gb/s, cluster {}", cluster_->nic.per_node,
                  cluster_->nic.bw * 8 / 1e9, cluster_->source);
  return ncclSuccess;
}

ncclResult_t Core::finalize() { return ncclSuccess; }  // state lives until the process ends

VirtualTime* Core::vtime() { return ready() ? vtime_.get() : nullptr; }

ncclResult_t Core::devices(int* ndev) {
  if (ndev == nullptr) {
    vgpu::log::warn("nccl devices: ndev is null");
    return ncclInternalError;
  }
  if (!ready()) {
    vgpu::log::warn("nccl devices: called before a successful init");
    return ncclInternalError;
  }
  *ndev = cluster_->nic.per_node;
  return ncclSuccess;
}

ncclResult_t Core::properties(int dev, NicProperties* out) {
  if (out == nullptr || !ready()) {
    vgpu::log::warn("nccl getProperties: {}", out == nullptr ? "props is null" : "not initialized");
    return ncclInternalError;
  }
  if (dev < 0 || dev >= cluster_->nic.per_node) {
    vgpu::log::warn("nccl getProperties: device {} out of range (0..{})", dev,
                    cluster_->nic.per_node - 1);
    return ncclInternalError;
  }
  NicProperties p;
  p.name = nic_names_[dev].c_str();
  p.pci_path = nullptr;
  // Distinct per NIC (NCCL merges NICs that share a guid into one port).
  p.guid = 0x7667707500000000ull | static_cast<uint64_t>(dev);
  p.ptr_support = NCCL_PTR_HOST | (cuda_pointers_.load() ? NCCL_PTR_CUDA : 0);
  double mbps = cluster_->nic.bw * 8.0 / 1e6;
  p.speed_mbps = mbps > 2e9 ? 2000000000 : static_cast<int>(std::lround(mbps));
  p.latency_us = static_cast<float>(cluster_->nic.latency_s * 1e6);
  *out = p;
  return ncclSuccess;
}

ncclResult_t Core::reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) {
    vgpu::log::warn("nccl regMr: mhandle is null");
    return ncclInternalError;
  }
  *mhandle = nullptr;
  if (registry_.find<SendComm>(comm, Kind::send) == nullptr &&
      registry_.find<RecvComm>(comm, Kind::recv) == nullptr) {
    vgpu::log::warn("nccl regMr: {} is not a live send or receive comm", comm);
    return ncclInternalError;
  }
  int supported = NCCL_PTR_HOST | (cuda_pointers_.load() ? NCCL_PTR_CUDA : 0);
  if ((type & supported) == 0 || (type & ~supported) != 0) {
    vgpu::log::warn("nccl regMr: pointer type {:#x} not supported (this plugin takes {:#x})", type,
                    supported);
    return ncclInvalidUsage;
  }
  if (data == nullptr && size > 0) {
    vgpu::log::warn("nccl regMr: null buffer of {} bytes", size);
    return ncclInternalError;
  }
  uintptr_t base = reinterpret_cast<uintptr_t>(data);
  if (base + size < base) {
    vgpu::log::warn("nccl regMr: region {}+{} wraps around the address space", data, size);
    return ncclInternalError;
  }
  auto r = std::make_shared<MemRegion>();
  r->comm = comm;
  r->base = base;
  r->size = size;
  r->type = type;
  *mhandle = registry_.add(std::move(r));
  return ncclSuccess;
}

ncclResult_t Core::dereg_mr(void* comm, void* mhandle) {
  auto r = registry_.find<MemRegion>(mhandle, Kind::region);
  if (r == nullptr) {
    vgpu::log::warn("nccl deregMr: {} is not a live registration", mhandle);
    return ncclInternalError;
  }
  (void)comm;  // NCCL may deregister through either comm of the pair
  registry_.remove(mhandle);
  return ncclSuccess;
}

ncclResult_t Core::check_region(void* mhandle, const void* data, size_t size, const char* call) {
  if (size == 0) return ncclSuccess;
  if (data == nullptr) {
    vgpu::log::warn("nccl {}: null buffer of {} bytes", call, size);
    return ncclInternalError;
  }
  auto r = registry_.find<MemRegion>(mhandle, Kind::region);
  if (r == nullptr) {
    vgpu::log::warn("nccl {}: memory handle {} is not a live registration", call, mhandle);
    return ncclInternalError;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(data);
  if (p < r->base || p + size < p || p + size > r->base + r->size) {
    vgpu::log::warn("nccl {}: buffer {}+{} lies outside its registered region {:#x}+{}", call, data,
                    size, r->base, r->size);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t Core::iflush(void* recv_comm, int n, void** request) {
  if (request == nullptr) {
    vgpu::log::warn("nccl iflush: request is null");
    return ncclInternalError;
  }
  *request = nullptr;
  auto c = registry_.find<RecvComm>(recv_comm, Kind::recv);
  if (c == nullptr || n < 0 || n > kMaxRecvs) {
    vgpu::log::warn("nccl iflush: {}", c == nullptr ? "not a live receive comm" : "bad count");
    return ncclInternalError;
  }
  // Host staging leaves nothing in flight towards the GPU: the flush is complete at once.
  auto r = std::make_shared<Request>();
  r->type = Request::Type::flush;
  r->comm = c;
  r->n = n;
  r->done = true;
  *request = registry_.add(std::move(r));
  return ncclSuccess;
}

void Core::finish_request_vtime(Request& r) {
  if (r.type == Request::Type::flush || vtime_ == nullptr) return;
  vgpu_nccl_completion c{};
  c.gpu = r.gpu;
  c.peer_gpu = r.peer_gpu;
  c.is_send = r.type == Request::Type::send;
  c.flow_id = r.flow_id;
  c.launch = r.launch;
  c.ready = r.ready;
  for (int i = 0; i < r.n; ++i) c.bytes += r.received[i];
  c.start = NAN;
  c.finish = NAN;
  if (r.has_vtime) {
    c.start = r.v_start;
    c.finish = r.v_finish;
  }
  // Where the flow lives in this process's engine, ask again: later submissions may have moved
  // it. Not through the daemon: the receiver's answer is as good as a second round trip.
  double s = 0, f = 0;
  if (r.flow_id != 0 && r.n == 1 && r.peer_same_engine && vtime_->cheap_queries() &&
      vtime_->query(r.flow_id, &s, &f)) {
    c.start = s;
    c.finish = f;
  }
  vtime_->record(c);
}

ncclResult_t Core::test(void* request, int* done, int* sizes) {
  if (done == nullptr) {
    vgpu::log::warn("nccl test: done is null");
    return ncclInternalError;
  }
  *done = 0;
  auto r = registry_.find<Request>(request, Kind::request);
  if (r == nullptr) {
    vgpu::log::warn("nccl test: {} is not a live request", request);
    return ncclInternalError;
  }
  ncclResult_t rc = ncclSuccess;
  if (r->type == Request::Type::send) {
    auto& c = static_cast<SendComm&>(*r->comm);
    std::lock_guard lock(c.mu);
    if (!r->done && r->error == ncclSuccess) rc = progress_send(c);
  } else if (r->type == Request::Type::recv) {
    auto& c = static_cast<RecvComm&>(*r->comm);
    std::lock_guard lock(c.mu);
    if (!r->done && r->error == ncclSuccess) rc = progress_recv(c);
  }
  if (r->error != ncclSuccess) return r->error;
  if (rc != ncclSuccess) return rc;
  if (!r->done) return ncclSuccess;
  *done = 1;
  if (sizes != nullptr && r->type != Request::Type::flush) {
    for (int i = 0; i < r->n; ++i) {
      sizes[i] = r->received[i] > static_cast<uint64_t>(INT32_MAX)
                     ? INT32_MAX : static_cast<int>(r->received[i]);
    }
  }
  finish_request_vtime(*r);
  registry_.remove(request);
  return ncclSuccess;
}

ncclResult_t Core::close_send(void* send_comm) {
  auto obj = registry_.find<SendComm>(send_comm, Kind::send);
  if (obj == nullptr) {
    vgpu::log::warn("nccl closeSend: {} is not a live send comm", send_comm);
    return ncclInternalError;
  }
  registry_.remove(send_comm);
  auto& c = *obj;
  std::lock_guard lock(c.mu);
  c.closed = true;
  ConnHeader& h = c.conn->header;
  h.sender_closed.store(1, std::memory_order_seq_cst);
  // A receiver of this process may be copying out of one of our buffers (direct messages): let
  // it finish (one bounded memcpy) before NCCL may free them. It starts no copy after this.
  while (h.direct_reader.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  for (auto& m : c.queue) registry_.remove(m.req);
  c.queue.clear();
  {
    std::lock_guard local(local_mu_);
    local_conns_.erase(c.seg->name());
  }
  c.seg->unlink();  // no-op once the receiver accepted (it unlinked the name)
  return ncclSuccess;
}

ncclResult_t Core::close_recv(void* recv_comm) {
  auto obj = registry_.find<RecvComm>(recv_comm, Kind::recv);
  if (obj == nullptr) {
    vgpu::log::warn("nccl closeRecv: {} is not a live receive comm", recv_comm);
    return ncclInternalError;
  }
  registry_.remove(recv_comm);
  auto& c = *obj;
  std::lock_guard lock(c.mu);
  c.closed = true;
  c.conn->header.receiver_closed.store(1, std::memory_order_release);
  for (Request* q : c.posted) registry_.remove(q);
  c.posted.clear();
  c.cur = nullptr;
  return ncclSuccess;
}

ncclResult_t Core::close_listen(void* listen_comm) {
  auto obj = registry_.find<ListenComm>(listen_comm, Kind::listen);
  if (obj == nullptr) {
    vgpu::log::warn("nccl closeListen: {} is not a live listen comm", listen_comm);
    return ncclInternalError;
  }
  registry_.remove(listen_comm);
  auto& l = *obj;
  std::lock_guard lock(l.mu);
  l.ls->closed.store(1, std::memory_order_release);
  l.seg.unlink();
  return ncclSuccess;
}

}  // namespace vgpu::nccl
