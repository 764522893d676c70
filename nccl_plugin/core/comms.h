// The plugin's objects that NCCL holds as opaque pointers (listen/send/recv comms, memory
// registrations, requests), and the registry that tells a live one from a stale or made-up
// pointer before anything is dereferenced.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include "abi/nccl_types.h"
#include "shm_layout.h"
#include "shm_segment.h"

namespace vgpu::nccl {

inline constexpr int kMaxRecvs = 8;  // grouped receives per irecv

enum class Kind { listen, send, recv, region, request };

struct Object {
  explicit Object(Kind k) : kind(k) {}
  virtual ~Object() = default;
  const Kind kind;
};

class Registry {
 public:
  void* add(std::shared_ptr<Object> obj);
  // The live object `p` if it is of kind `k`, else nullptr.
  template <class T> std::shared_ptr<T> find(const void* p, Kind k) const {
    std::shared_lock lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end() || it->second->kind != k) return nullptr;
    return std::static_pointer_cast<T>(it->second);
  }
  std::shared_ptr<Object> remove(const void* p);

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<Object>> live_;
};

// Checks a peer process at most every 50 ms: cheap enough to call from every idle test(). A
// peer seen stopped (SIGSTOP, a debugger) for a second is said once per stop, whatever the log
// level: the wait for it goes on (it may be continued), but not in silence.
class PeerWatch {
 public:
  bool alive(int pid);

 private:
  std::chrono::steady_clock::time_point last_{};
  bool alive_ = true;
  std::chrono::steady_clock::time_point stopped_since_{};
  bool stopped_ = false, told_ = false;
};

struct Request;

// The simcore flow of the last transfer through each buffer of a comm, by address. NCCL reuses
// a staging slot only once the transfer that used it completed, so the next transfer through
// it is submitted "after" that flow: a connection's transfers pipeline as deep as NCCL's window
// instead of all starting at their kernel's start (which also spares simcore re-solving every
// chunk of a large collective at every new one). The last kSlots addresses are kept: NCCL's
// staging slots (NCCL_STEPS per protocol) fit many times over. The receiving end, which places
// the flow, keeps the table of both ends' buffers (the sender's by the address its descriptor
// publishes), so that it knows every flow a later one may name (flow_pins.h).
class SlotFlows {
 public:
  uint64_t flow_of(const void* addr) const {  // 0 when unknown
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (a == 0) return 0;
    for (const auto& e : entries_) {
      if (e.addr == a) return e.flow;
    }
    return 0;
  }
  // Returns the flow the entry held before (replaced, or pushed out with its address), 0 when
  // none: it is named no more through this table (flow_pins.h).
  uint64_t record(const void* addr, uint64_t flow) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (a == 0 || flow == 0) return 0;
    for (auto& e : entries_) {
      if (e.addr == a) return std::exchange(e.flow, flow);
    }
    return std::exchange(entries_[next_++ % kSlots], Entry{a, flow}).flow;
  }

 private:
  static constexpr int kSlots = 64;
  struct Entry {
    uintptr_t addr = 0;
    uint64_t flow = 0;
  };
  std::array<Entry, kSlots> entries_{};
  uint32_t next_ = 0;
};

struct ListenComm : Object {
  ListenComm() : Object(Kind::listen) {}
  std::mutex mu;
  ShmMapping seg;
  ListenSegment* ls = nullptr;
  int dev = 0;
  int gpu = 0;
  uint32_t next_accept = 0;
};

struct PendingSend {
  const unsigned char* data;
  uint64_t size;
  Request* req;  // alive while queued: the registry owns it until it completes or the comm closes
  bool direct;   // the receiver copies it from `data` itself: nothing goes through the ring
};

struct SendComm : Object {
  SendComm() : Object(Kind::send) {}
  std::mutex mu;
  std::shared_ptr<ShmMapping> seg;  // shared with a receiver in this process (one mapping)
  ConnSegment* conn = nullptr;
  int dev = 0;
  int gpu = 0;
  bool closed = false;
  uint64_t posted = 0;    // descriptors published
  uint64_t retired = 0;   // completions taken back (in order)
  uint64_t copy_msg = 0;  // message being copied into the ring, and how far
  uint64_t copy_off = 0;
  uint64_t head = 0;
  std::deque<PendingSend> queue;  // index i holds message retired + i
  PeerWatch watch;
};

struct RecvComm : Object {
  RecvComm() : Object(Kind::recv) {}
  std::mutex mu;
  std::shared_ptr<ShmMapping> seg;
  ConnSegment* conn = nullptr;
  int dev = 0;
  int gpu = 0;
  bool closed = false;
  uint64_t next = 0;      // next message to receive
  uint64_t tail = 0;
  bool matched = false;   // message `next` has its buffer
  Request* cur = nullptr;
  int cur_entry = 0;
  uint64_t cur_off = 0;
  uint64_t cur_flow = 0;
  std::deque<Request*> posted;  // incomplete receives, oldest first
  SlotFlows slots;         // this end's buffers
  SlotFlows sender_slots;  // the sender's buffers, by the address its descriptors publish
  PeerWatch watch;
};

struct MemRegion : Object {
  MemRegion() : Object(Kind::region) {}
  const void* comm = nullptr;
  uintptr_t base = 0;
  size_t size = 0;
  int type = 0;
};

struct Request : Object {
  enum class Type { send, recv, flush };
  Request() : Object(Kind::request) {}
  Type type = Type::send;
  std::shared_ptr<Object> comm;  // keeps the comm's memory alive while NCCL tests
  bool done = false;
  ncclResult_t error = ncclSuccess;
  int n = 1;
  void* data[kMaxRecvs] = {};
  size_t sizes[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  bool matched[kMaxRecvs] = {};
  uint64_t received[kMaxRecvs] = {};
  int filled = 0;
  double not_before = 0;
  // A receive: VirtualTime::hold() at held_at (at or below its not_before) until done.
  bool holds_floor = false;
  double held_at = 0;
  // A receive, once matched: when both ends' kernels had begun (the later of the two), which is
  // when the collective could start moving these bytes. NaN: not known (sends, no launch clock).
  double ready = std::numeric_limits<double>::quiet_NaN();
  uint64_t launch = 0;  // the NCCL kernel launch it belongs to (0: unknown)
  // Virtual time of the transfers it waited for.
  int gpu = 0;
  int peer_gpu = 0;
  uint64_t flow_id = 0;
  double v_start = 0;
  double v_finish = 0;
  bool has_vtime = false;
  bool peer_same_engine = false;  // the flow id is valid in this process's engine
};

}  // namespace vgpu::nccl
