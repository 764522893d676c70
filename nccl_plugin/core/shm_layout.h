// The layout of the two kinds of shared-memory segments the plugin uses, shared by processes
// (and threads) of one job. Only lock-free atomics live here: no process can die holding a lock
// that its peer then waits on.
//
// Listener segment (created by listen(), named in the handle): connectors claim slots in order
// and publish the name of the connection segment they created; accept() takes them in order.
//
// Connection segment (created by connect(), one per sender->receiver connection): a ring of
// message descriptors (sender -> receiver; the receiver writes each one's outcome back) and a
// byte ring that carries the payloads in message order (host staging). When both ends are in
// one process (ranks as threads, or one process driving several GPUs), a descriptor instead
// names the sender's buffer and the receiver copies from it directly: one copy instead of two.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace vgpu::nccl {

inline constexpr uint32_t kListenMagic = 0x4c4e4756;  // "VGNL"
inline constexpr uint32_t kConnMagic = 0x434e4756;    // "VGNC"
inline constexpr uint32_t kHandleMagic = 0x484e4756;  // "VGNH"
inline constexpr uint32_t kLayoutVersion = 4;

inline constexpr int kListenSlots = 64;      // connects one listener accepts
inline constexpr int kSegmentNameMax = 96;   // bytes, NUL included
inline constexpr uint32_t kDescriptors = 256;  // NCCL_NET_MAX_REQUESTS x maxRecvs (32 x 8)

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

// What NCCL carries from the listener to the connector (<= NCCL_NET_HANDLE_MAXSIZE bytes).
struct WireHandle {
  uint32_t magic;
  uint32_t version;
  uint64_t nonce;                 // must match the listener segment's
  int32_t listener_pid;
  int32_t dev;
  char name[kSegmentNameMax];     // listener segment name
};
static_assert(sizeof(WireHandle) <= 128);

enum SlotState : uint32_t { kSlotFree = 0, kSlotWriting = 1, kSlotReady = 2 };

struct ListenSlot {
  std::atomic<uint32_t> state;
  char conn_name[kSegmentNameMax];
};

struct ListenSegment {
  uint32_t magic;
  uint32_t version;
  uint64_t nonce;
  int32_t pid;
  int32_t dev;
  std::atomic<uint32_t> closed;
  std::atomic<uint32_t> next_claim;   // slots handed out to connectors
  ListenSlot slots[kListenSlots];
};

enum DescState : uint32_t { kDescPending = 0, kDescDone = 1 };

struct MessageDesc {
  uint64_t size;
  int32_t tag;
  uint32_t direct;                    // 1: the payload is at src_addr in the sender (same process)
  uint64_t src_addr;                  // the sender's buffer (the payload when direct; else the
                                      // receiver's key for the buffer's previous transfer)
  double not_before;                  // sender's virtual clock at isend
  // When every rank the sender heard from in this launch had begun its kernel (the latest
  // `ready` of the sender's completed receives of the launch; < 0: none). A ring forwards what
  // it received, so passing this on makes each rank's `ready` the latest start of ALL ranks
  // after one turn of the ring (on 8 ranks it was only the neighbours': a rank's collective
  // ended before another had begun it).
  double ready_hint;
  // Written by the receiver before `state` turns kDescDone:
  uint64_t flow_id;
  double v_start;
  double v_finish;
  uint64_t received;                  // bytes the receiver took (== size)
  std::atomic<uint32_t> state;
  uint32_t pad2;
};

struct alignas(64) ConnHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t nonce;
  uint64_t ring_bytes;
  int32_t sender_pid;
  int32_t src_gpu;
  std::atomic<int32_t> receiver_pid;  // the listener's pid until accept(), then the receiver's
  std::atomic<int32_t> dst_gpu;
  std::atomic<uint32_t> sender_closed;
  std::atomic<uint32_t> receiver_closed;
  std::atomic<int32_t> error;         // an ncclResult_t that poisons the connection both ways
  // 1 while the receiver copies out of the sender's buffer (direct messages): closeSend waits for
  // 0 after setting sender_closed, so the buffer is never read after NCCL may have freed it.
  std::atomic<uint32_t> direct_reader;
  alignas(64) std::atomic<uint64_t> posted;     // descriptors published by the sender
  alignas(64) std::atomic<uint64_t> completed;  // messages fully received
  alignas(64) std::atomic<uint64_t> head;       // payload bytes written into the ring
  alignas(64) std::atomic<uint64_t> tail;       // payload bytes taken out of the ring
};

struct ConnSegment {
  ConnHeader header;
  MessageDesc desc[kDescriptors];
  // followed by ring_bytes of payload, 64-byte aligned
  static size_t ring_offset() { return (sizeof(ConnSegment) + 63) & ~size_t{63}; }
  static size_t total_bytes(uint64_t ring) { return ring_offset() + ring; }
  unsigned char* ring() { return reinterpret_cast<unsigned char*>(this) + ring_offset(); }
};

}  // namespace vgpu::nccl
