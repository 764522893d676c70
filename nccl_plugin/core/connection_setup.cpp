// Core: listen / connect / accept through shared-memory rendezvous. Non-blocking: connect()
// completes as soon as its connection segment is published in the listener's slot; accept()
// returns a null comm until a connector has published one.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "common/log.h"
#include "net_core.h"

namespace vgpu::nccl {

ncclResult_t Core::listen(int dev, void* handle, void** listen_comm) {
  if (handle == nullptr || listen_comm == nullptr) {
    vgpu::log::warn("nccl listen: null {}", handle == nullptr ? "handle" : "listenComm");
    return ncclInternalError;
  }
  *listen_comm = nullptr;
  if (!ready() || dev < 0 || dev >= cluster_->nic.per_node) {
    vgpu::log::warn("nccl listen: {}", ready() ? "device out of range" : "not initialized");
    return ncclInternalError;
  }
  std::string error;
  int gpu = vtime_->rank_gpu(&error);
  if (gpu < 0) {
    vgpu::log::always("vgpu nccl plugin: listen: " + error);
    return ncclInvalidUsage;
  }
  auto l = std::make_shared<ListenComm>();
  std::string name = make_segment_name('L');
  error = l->seg.create_own(name, sizeof(ListenSegment));
  if (!error.empty()) {
    vgpu::log::warn("nccl listen: {}", error);
    return ncclSystemError;
  }
  auto* ls = new (l->seg.data()) ListenSegment();
  ls->magic = kListenMagic;
  ls->version = kLayoutVersion;
  ls->nonce = random_nonce();
  ls->pid = static_cast<int32_t>(getpid());
  ls->dev = dev;
  l->ls = ls;
  l->dev = dev;
  l->gpu = gpu;

  WireHandle h{};
  h.magic = kHandleMagic;
  h.version = kLayoutVersion;
  h.nonce = ls->nonce;
  h.listener_pid = ls->pid;
  h.dev = dev;
  std::snprintf(h.name, sizeof h.name, "%s", name.c_str());
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *listen_comm = registry_.add(std::move(l));
  return ncclSuccess;
}

ncclResult_t Core::connect(int dev, const void* handle, void** send_comm) {
  if (handle == nullptr || send_comm == nullptr) {
    vgpu::log::warn("nccl connect: null {}", handle == nullptr ? "handle" : "sendComm");
    return ncclInternalError;
  }
  *send_comm = nullptr;
  if (!ready() || dev < 0 || dev >= cluster_->nic.per_node) {
    vgpu::log::warn("nccl connect: {}", ready() ? "device out of range" : "not initialized");
    return ncclInternalError;
  }
  WireHandle h;
  std::memcpy(&h, handle, sizeof h);
  if (h.magic != kHandleMagic || h.version != kLayoutVersion ||
      std::memchr(h.name, '\0', sizeof h.name) == nullptr) {
    vgpu::log::warn("nccl connect: the handle is not one of this plugin's (version {})",
                    kLayoutVersion);
    return ncclInternalError;
  }
  std::string error;
  int gpu = vtime_->rank_gpu(&error);
  if (gpu < 0) {
    vgpu::log::always("vgpu nccl plugin: connect: " + error);
    return ncclInvalidUsage;
  }
  ShmMapping listener;
  error = listener.open(h.name, sizeof(ListenSegment));
  if (!error.empty()) {
    vgpu::log::warn("nccl connect: listener unreachable ({}): was it closed, or is the peer in "
                    "another /dev/shm?", error);
    return ncclSystemError;
  }
  auto* ls = static_cast<ListenSegment*>(listener.data());
  if (ls->magic != kListenMagic || ls->nonce != h.nonce) {
    vgpu::log::warn("nccl connect: segment {} does not belong to this handle", h.name);
    return ncclSystemError;
  }
  if (ls->closed.load(std::memory_order_acquire) != 0) {
    vgpu::log::warn("nccl connect: the listener was closed");
    return ncclSystemError;
  }

  auto c = std::make_shared<SendComm>();
  std::string name = make_segment_name('C');
  c->seg = std::make_shared<ShmMapping>();
  error = c->seg->create_own(name, ConnSegment::total_bytes(ring_bytes_));
  if (!error.empty()) {
    vgpu::log::warn("nccl connect: {}", error);
    return ncclSystemError;
  }
  auto* conn = new (c->seg->data()) ConnSegment();
  ConnHeader& hd = conn->header;
  hd.magic = kConnMagic;
  hd.version = kLayoutVersion;
  hd.nonce = random_nonce();
  hd.ring_bytes = ring_bytes_;
  hd.sender_pid = static_cast<int32_t>(getpid());
  hd.src_gpu = gpu;
  hd.receiver_pid.store(ls->pid, std::memory_order_relaxed);
  hd.dst_gpu.store(-1, std::memory_order_relaxed);
  c->conn = conn;
  c->dev = dev;
  c->gpu = gpu;

  uint32_t slot = ls->next_claim.fetch_add(1, std::memory_order_acq_rel);
  if (slot >= static_cast<uint32_t>(kListenSlots)) {
    vgpu::log::warn("nccl connect: listener {} already took {} connections", h.name, kListenSlots);
    return ncclSystemError;
  }
  {
    std::lock_guard local(local_mu_);
    local_conns_[name] = c->seg;
  }
  ListenSlot& s = ls->slots[slot];
  std::snprintf(s.conn_name, sizeof s.conn_name, "%s", name.c_str());
  s.state.store(kSlotReady, std::memory_order_release);
  *send_comm = registry_.add(std::move(c));
  return ncclSuccess;
}

ncclResult_t Core::accept(void* listen_comm, void** recv_comm) {
  if (recv_comm == nullptr) {
    vgpu::log::warn("nccl accept: recvComm is null");
    return ncclInternalError;
  }
  *recv_comm = nullptr;
  auto l = registry_.find<ListenComm>(listen_comm, Kind::listen);
  if (l == nullptr) {
    vgpu::log::warn("nccl accept: {} is not a live listen comm", listen_comm);
    return ncclInternalError;
  }
  std::lock_guard lock(l->mu);
  if (l->next_accept >= static_cast<uint32_t>(kListenSlots)) {
    vgpu::log::warn("nccl accept: this listener already accepted {} connections", kListenSlots);
    return ncclInternalError;
  }
  ListenSlot& s = l->ls->slots[l->next_accept];
  if (s.state.load(std::memory_order_acquire) != kSlotReady) return ncclSuccess;  // not yet

  auto c = std::make_shared<RecvComm>();
  std::string error;
  // The slot was written by the connecting peer: its name must be a terminated segment name of
  // this user's plugin before anything opens or unlinks it.
  char copied[sizeof s.conn_name];
  std::memcpy(copied, s.conn_name, sizeof copied);  // once: the peer may still write the slot
  const void* nul = std::memchr(copied, '\0', sizeof copied);
  const std::string conn_name = nul ? std::string(copied) : std::string();
  if (!is_segment_name(conn_name)) {
    l->next_accept++;
    vgpu::log::warn("nccl accept: slot {} names no segment of this plugin", l->next_accept - 1);
    return ncclSystemError;
  }
  {
    std::lock_guard local(local_mu_);
    auto it = local_conns_.find(conn_name);
    if (it != local_conns_.end()) {
      c->seg = it->second.lock();  // the sender is in this process: share its mapping
      local_conns_.erase(it);
    }
  }
  if (c->seg == nullptr) {
    c->seg = std::make_shared<ShmMapping>();
    error = c->seg->open(conn_name, sizeof(ConnSegment));
  }
  if (error.empty()) {
    auto* conn = static_cast<ConnSegment*>(c->seg->data());
    if (conn->header.magic != kConnMagic || conn->header.version != kLayoutVersion ||
        c->seg->size() < ConnSegment::total_bytes(conn->header.ring_bytes)) {
      error = fmt::format("segment {} is not a connection of this plugin", conn_name);
    }
  }
  if (!error.empty()) {
    l->next_accept++;  // never retry a broken slot forever
    vgpu::log::warn("nccl accept: {}", error);
    return ncclSystemError;
  }
  auto* conn = static_cast<ConnSegment*>(c->seg->data());
  conn->header.dst_gpu.store(l->gpu, std::memory_order_relaxed);
  conn->header.receiver_pid.store(static_cast<int32_t>(getpid()), std::memory_order_release);
  // Both ends have it mapped now: drop the name so nothing lingers in /dev/shm.
  shm_unlink(conn_name.c_str());
  c->conn = conn;
  c->dev = l->dev;
  c->gpu = l->gpu;
  l->next_accept++;
  *recv_comm = registry_.add(std::move(c));
  return ncclSuccess;
}

}  // namespace vgpu::nccl
