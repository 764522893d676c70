// Core: isend / irecv and the progress of both ends of a connection. The sender publishes a
// descriptor per message and streams payloads into the ring in message order; the receiver
// matches each message to the oldest posted receive (by tag among its buffers), copies it out,
// reports the transfer to simcore, and writes the outcome back into the descriptor, which is
// what completes the send. Progress happens inside isend/irecv/test, on whichever thread calls.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "net_core.h"

namespace vgpu::nccl {
namespace {

constexpr size_t kMaxPostedRecvs = 1024;
// Both ends publish their ring position after every slice they copy, so the peer starts on the
// first bytes of a large copy while the rest is still being copied (sender and receiver
// pipeline instead of taking turns).
constexpr uint64_t kPublishSlice = 64 * 1024;
constexpr uint64_t kDirectPerCall = 16ull << 20;

void ring_write(ConnSegment* conn, uint64_t pos, const unsigned char* src, uint64_t n) {
  uint64_t cap = conn->header.ring_bytes;
  uint64_t at = pos % cap;
  uint64_t first = std::min(n, cap - at);
  std::memcpy(conn->ring() + at, src, first);
  if (n > first) std::memcpy(conn->ring(), src + first, n - first);
}

void ring_read(ConnSegment* conn, uint64_t pos, unsigned char* dst, uint64_t n) {
  uint64_t cap = conn->header.ring_bytes;
  uint64_t at = pos % cap;
  uint64_t first = std::min(n, cap - at);
  std::memcpy(dst, conn->ring() + at, first);
  if (n > first) std::memcpy(dst + first, conn->ring(), n - first);
}

}  // namespace

ncclResult_t Core::fail(ConnHeader& h, ncclResult_t code) {
  int32_t expected = 0;
  h.error.compare_exchange_strong(expected, static_cast<int32_t>(code), std::memory_order_acq_rel);
  return static_cast<ncclResult_t>(h.error.load(std::memory_order_acquire));
}

ncclResult_t Core::isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                         void** request, uint64_t launch) {
  if (request == nullptr) {
    vgpu::log::warn("nccl isend: request is null");
    return ncclInternalError;
  }
  *request = nullptr;
  auto c = registry_.find<SendComm>(send_comm, Kind::send);
  if (c == nullptr) {
    vgpu::log::warn("nccl isend: {} is not a live send comm", send_comm);
    return ncclInternalError;
  }
  if (ncclResult_t rc = check_region(mhandle, data, size, "isend"); rc != ncclSuccess) return rc;
  vtime_->use_gpu(c->gpu);
  std::lock_guard lock(c->mu);
  ConnHeader& h = c->conn->header;
  if (int32_t e = h.error.load(std::memory_order_acquire); e != 0) {
    return static_cast<ncclResult_t>(e);
  }
  if (c->posted - c->retired >= kDescriptors) {
    (void)progress_send(*c);
    if (c->posted - c->retired >= kDescriptors) return ncclSuccess;  // would block: NCCL retries
  }
  auto r = std::make_shared<Request>();
  r->type = Request::Type::send;
  r->comm = c;
  r->n = 1;
  r->sizes[0] = size;
  r->tags[0] = tag;
  r->gpu = c->gpu;
  r->launch = launch;
  // NCCL sends once its kernel has put the data in the buffer: the kernel is running, so the
  // driver can tell its virtual start.
  r->not_before = vtime_->now(c->gpu, launch);
  Request* raw = r.get();

  // Both ends in this process: the receiver copies straight from `data` (NCCL keeps it valid
  // until test() reports the send done, which only the receiver's copy allows).
  const bool direct = direct_ && size > 0 &&
                      h.receiver_pid.load(std::memory_order_acquire) == h.sender_pid;
  MessageDesc& d = c->conn->desc[c->posted % kDescriptors];
  d.size = size;
  d.tag = tag;
  d.direct = direct ? 1 : 0;
  d.src_addr = reinterpret_cast<uintptr_t>(data);
  d.not_before = r->not_before;
  d.ready_hint = vtime_->launch_ready(launch);
  d.flow_id = 0;
  d.v_start = 0;
  d.v_finish = 0;
  d.received = 0;
  d.state.store(kDescPending, std::memory_order_relaxed);
  c->queue.push_back(PendingSend{static_cast<const unsigned char*>(data), size, raw, direct});
  c->posted++;
  h.posted.store(c->posted, std::memory_order_release);
  *request = registry_.add(std::move(r));
  (void)progress_send(*c);  // a failure is recorded on the requests: test() reports it
  return ncclSuccess;
}

ncclResult_t Core::progress_send(SendComm& c) {
  ConnHeader& h = c.conn->header;
  if (int32_t e = h.error.load(std::memory_order_acquire); e != 0) {
    for (auto& m : c.queue) m.req->error = static_cast<ncclResult_t>(e);
    return static_cast<ncclResult_t>(e);
  }
  bool moved = false;
  // Stream payloads into the ring, in message order, as far as the receiver has made room.
  while (c.copy_msg < c.posted) {
    PendingSend& m = c.queue[c.copy_msg - c.retired];
    if (m.direct) {  // the receiver takes it from the sender's buffer
      c.copy_msg++;
      continue;
    }
    uint64_t space = h.ring_bytes - (c.head - h.tail.load(std::memory_order_acquire));
    uint64_t n = std::min(m.size - c.copy_off, space);
    while (n > 0) {
      uint64_t k = std::min(n, kPublishSlice);
      ring_write(c.conn, c.head, m.data + c.copy_off, k);
      c.head += k;
      c.copy_off += k;
      n -= k;
      h.head.store(c.head, std::memory_order_release);
      moved = true;
    }
    if (c.copy_off < m.size) break;
    c.copy_msg++;
    c.copy_off = 0;
  }
  // Take back completions in order.
  while (c.retired < c.posted) {
    MessageDesc& d = c.conn->desc[c.retired % kDescriptors];
    if (d.state.load(std::memory_order_acquire) != kDescDone) break;
    Request* r = c.queue.front().req;
    r->received[0] = d.received;
    r->flow_id = d.flow_id;
    r->v_start = d.v_start;
    r->v_finish = d.v_finish;
    r->has_vtime = d.flow_id != 0;
    r->peer_gpu = h.dst_gpu.load(std::memory_order_relaxed);
    r->peer_same_engine = vtime_->shared_engine() ||
                          h.receiver_pid.load(std::memory_order_relaxed) == h.sender_pid;
    r->done = true;
    c.queue.pop_front();
    c.retired++;
    moved = true;
    vtime_->settle();  // a process that only sends moves its floor too
  }
  if (moved || c.retired == c.posted) return ncclSuccess;
  if (h.receiver_closed.load(std::memory_order_acquire) != 0) {
    vgpu::log::warn("nccl: the receiver closed the connection with {} send(s) pending",
                    c.posted - c.retired);
    return fail(h, ncclSystemError);
  }
  int peer = h.receiver_pid.load(std::memory_order_acquire);
  if (!c.watch.alive(peer)) {
    vgpu::log::warn("nccl: receiving process {} died with {} send(s) pending", peer,
                    c.posted - c.retired);
    return fail(h, ncclSystemError);
  }
  return ncclSuccess;
}

ncclResult_t Core::irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                         void** mhandles, void** request, uint64_t launch) {
  if (request == nullptr) {
    vgpu::log::warn("nccl irecv: request is null");
    return ncclInternalError;
  }
  *request = nullptr;  // also clears NCCL_NET_OPTIONAL_RECV_COMPLETION: we always complete
  auto c = registry_.find<RecvComm>(recv_comm, Kind::recv);
  if (c == nullptr) {
    vgpu::log::warn("nccl irecv: {} is not a live receive comm", recv_comm);
    return ncclInternalError;
  }
  if (n < 1 || n > kMaxRecvs || data == nullptr || sizes == nullptr || tags == nullptr ||
      mhandles == nullptr) {
    vgpu::log::warn("nccl irecv: bad arguments (n={}, at most {} grouped receives)", n, kMaxRecvs);
    return ncclInternalError;
  }
  for (int i = 0; i < n; ++i) {
    if (ncclResult_t rc = check_region(mhandles[i], data[i], sizes[i], "irecv"); rc != ncclSuccess) {
      return rc;
    }
  }
  std::lock_guard lock(c->mu);
  ConnHeader& h = c->conn->header;
  if (int32_t e = h.error.load(std::memory_order_acquire); e != 0) {
    return static_cast<ncclResult_t>(e);
  }
  if (c->posted.size() >= kMaxPostedRecvs) return ncclSuccess;  // would block
  auto r = std::make_shared<Request>();
  r->type = Request::Type::recv;
  r->comm = c;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->sizes[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  r->gpu = c->gpu;
  r->peer_gpu = h.src_gpu;
  r->peer_same_engine = true;  // the receiver reports the flows to its own engine
  r->launch = launch;
  r->holds_floor = vtime_->hold(c->gpu, &r->held_at);  // before now(): its flows start no earlier
  r->not_before = vtime_->now(c->gpu, launch);
  c->posted.push_back(r.get());
  *request = registry_.add(std::move(r));
  (void)progress_recv(*c);  // a failure is recorded on the requests: test() reports it
  return ncclSuccess;
}

// A direct message (both ends in this process): copy from the sender's buffer, at most
// kDirectPerCall bytes per call so that one huge message does not stall NCCL's proxy thread.
// The sender's closeSend waits while direct_reader is set, and this never starts a copy once
// it saw sender_closed: the buffer cannot be freed under the copy.
ncclResult_t Core::copy_direct(RecvComm& c, const MessageDesc& d) {
  ConnHeader& h = c.conn->header;
  const auto* src = reinterpret_cast<const unsigned char*>(static_cast<uintptr_t>(d.src_addr));
  auto* dst = static_cast<unsigned char*>(c.cur->data[c.cur_entry]);
  uint64_t n = std::min(d.size - c.cur_off, kDirectPerCall);
  h.direct_reader.store(1, std::memory_order_seq_cst);
  if (h.sender_closed.load(std::memory_order_seq_cst) != 0) {
    h.direct_reader.store(0, std::memory_order_release);
    vgpu::log::warn("nccl: the sender closed the connection with a message in flight");
    return ncclSystemError;
  }
  std::memcpy(dst + c.cur_off, src + c.cur_off, n);
  h.direct_reader.store(0, std::memory_order_release);
  c.cur_off += n;
  return ncclSuccess;
}

ncclResult_t Core::progress_recv(RecvComm& c) {
  ConnHeader& h = c.conn->header;
  auto poison = [&](ncclResult_t code) {
    ncclResult_t e = fail(h, code);
    for (Request* q : c.posted) {
      q->error = e;
      if (std::exchange(q->holds_floor, false)) vtime_->unhold(q->held_at);
    }
    return e;
  };
  if (int32_t e = h.error.load(std::memory_order_acquire); e != 0) {
    return poison(static_cast<ncclResult_t>(e));
  }
  bool moved = false;
  while (c.next < h.posted.load(std::memory_order_acquire)) {
    MessageDesc& d = c.conn->desc[c.next % kDescriptors];
    if (!c.matched) {
      if (c.posted.empty()) break;  // the sender is ahead: wait for a receive
      Request* r = c.posted.front();
      int entry = -1;
      for (int i = 0; i < r->n; ++i) {
        if (!r->matched[i] && r->tags[i] == d.tag) {
          entry = i;
          break;
        }
      }
      if (entry < 0) {
        vgpu::log::warn("nccl: a send with tag {} matches no free buffer of the oldest posted "
                        "receive ({} buffer(s))", d.tag, r->n);
        return poison(ncclInvalidUsage);
      }
      if (d.size > r->sizes[entry]) {
        vgpu::log::warn("nccl: a send of {} bytes is larger than the posted receive of {} bytes",
                        d.size, r->sizes[entry]);
        return poison(ncclInvalidUsage);
      }
      r->matched[entry] = true;
      c.matched = true;
      c.cur = r;
      c.cur_entry = entry;
      c.cur_off = 0;
      // It starts once both ranks reached it and both buffers were free (their previous
      // transfers finished). NCCL posts receives ahead of its kernel: the receiving kernel's
      // start may have become known since.
      if (r->launch != 0) r->not_before = std::max(r->not_before, vtime_->now(c.gpu, r->launch));
      r->ready = std::max({d.not_before, r->not_before, d.ready_hint});
      // After the previous transfers out of the sender's buffer and into this one (SlotFlows).
      c.cur_flow = vtime_->add_flow(h.src_gpu, c.gpu, d.size, std::max(d.not_before, r->not_before),
                                    c.sender_slots.flow_of(reinterpret_cast<const void*>(d.src_addr)),
                                    c.slots.flow_of(r->data[entry]));
      if (vtime_->lost()) return poison(ncclSystemError);
      vgpu::log::debug("nccl plugin: flow {} matched: sender ready at {:.9f}, receiver (launch {}) at {:.9f}",
                       c.cur_flow, d.not_before, r->launch, r->not_before);
    }
    if (d.direct != 0) {
      if (ncclResult_t rc = copy_direct(c, d); rc != ncclSuccess) return poison(rc);
      moved = true;
      if (c.cur_off < d.size) break;  // a very large message: the rest on the next call
    }
    uint64_t avail = d.direct != 0 ? 0 : h.head.load(std::memory_order_acquire) - c.tail;
    uint64_t n = std::min(avail, d.size - c.cur_off);
    while (n > 0) {
      uint64_t k = std::min(n, kPublishSlice);
      ring_read(c.conn, c.tail, static_cast<unsigned char*>(c.cur->data[c.cur_entry]) + c.cur_off, k);
      c.tail += k;
      c.cur_off += k;
      n -= k;
      h.tail.store(c.tail, std::memory_order_release);
      moved = true;
    }
    if (c.cur_off < d.size) break;

    Request* r = c.cur;
    double s = 0, f = 0;
    bool timed = vtime_->query(c.cur_flow, &s, &f);
    if (vtime_->lost()) return poison(ncclSystemError);
    d.flow_id = c.cur_flow;
    d.v_start = timed ? s : 0;
    d.v_finish = timed ? f : 0;
    d.received = d.size;
    d.state.store(kDescDone, std::memory_order_release);
    c.next++;
    h.completed.store(c.next, std::memory_order_release);
    moved = true;

    r->received[c.cur_entry] = d.size;
    // The buffers now name this flow, no more the one before (flow_pins.h); its placement lets go.
    vtime_->pin(c.cur_flow);
    vtime_->unpin(c.slots.record(r->data[c.cur_entry], c.cur_flow));
    vtime_->pin(c.cur_flow);
    vtime_->unpin(c.sender_slots.record(reinterpret_cast<const void*>(d.src_addr), c.cur_flow));
    vtime_->unpin(c.cur_flow);
    if (timed) {
      if (!r->has_vtime || s < r->v_start) r->v_start = s;
      if (!r->has_vtime || f > r->v_finish) r->v_finish = f;
      r->has_vtime = true;
    }
    if (r->flow_id == 0) r->flow_id = c.cur_flow;
    c.matched = false;
    c.cur = nullptr;
    if (++r->filled == r->n) {
      r->done = true;
      c.posted.pop_front();
      if (std::exchange(r->holds_floor, false)) vtime_->unhold(r->held_at);
    }
    vtime_->settle();
  }
  if (moved || c.posted.empty()) return ncclSuccess;
  // A closed sender publishes nothing more: once its last bytes are taken, what is still
  // pending (no message, or the rest of one) never comes.
  if (h.sender_closed.load(std::memory_order_acquire) != 0 &&
      (c.next >= h.posted.load(std::memory_order_acquire) ||
       h.head.load(std::memory_order_acquire) == c.tail)) {
    vgpu::log::warn("nccl: the sender closed the connection with {} receive(s) pending",
                    c.posted.size());
    return poison(ncclSystemError);
  }
  if (!c.watch.alive(h.sender_pid)) {
    vgpu::log::warn("nccl: sending process {} died with {} receive(s) pending", h.sender_pid,
                    c.posted.size());
    return poison(ncclSystemError);
  }
  return ncclSuccess;
}

}  // namespace vgpu::nccl
