// What the simulator keeps per event id: the event's record slot while it is live, its final
// interval once it is retired. A long run submits ~10^8 events, so this table must not keep
// 20 bytes for each of them forever: ids are handed out in order and stored in chunks of
// kChunk, and a chunk is freed once every one of its ids is both retired (final, its history
// reclaimed) and released by the submitter (Engine::release: it will never name the id again).
// A user that never releases (vgpu-netsim, the NCCL plugin, vgpud's clients) keeps everything,
// as before. An id whose chunk was freed is no longer known (queries answer nullopt, a
// dependency on it is refused), never a dangling read.
//
// The members of a flow group (flow_group.h) name the group through a handle (open_handle(),
// bind_handle()): one small entry, shared by all of them, that holds the group's record slot
// while it lives and its final interval once it retires (retire_handle()). A group's
// retirement then writes one entry and a count in each of the (at most kHandleChunks) chunks
// its ids lie in, not one entry per member: on a 4096-GPU ring a group retires ~180 steps after
// its submission, and reading its members and writing their ids was two cache misses per flow
// (an eighth of the run). An id keeps naming the handle until its chunk goes.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "block_pool.h"
#include "chunked_store.h"
#include "simcore/engine.h"

namespace simcore::detail {

class IdTable {
 public:
  static constexpr uint32_t kRetired = std::numeric_limits<uint32_t>::max();
  static constexpr uint32_t kChunk = 4096;

  // A new id for an event in `slot`.
  EventId add(uint32_t slot);
  EventId last() const { return last_; }
  // The id was handed out and its chunk is still held.
  bool present(EventId id) const { return chunk_of(id) != nullptr; }

  // Only for present ids.
  uint32_t slot(EventId id) const { return resolve(chunk_of(id)->slot[index(id)]); }
  // slot(), or kRetired for an id that is not present.
  uint32_t slot_or_retired(EventId id) const {
    const Chunk* c = chunk_of(id);
    return c ? resolve(c->slot[index(id)]) : kRetired;
  }
  // Only for retired ids (slot() == kRetired).
  Interval result(EventId id) const {
    const Chunk* c = chunk_of(id);
    const uint32_t s = c->slot[index(id)];
    if (is_handle(s)) return handles_[s & ~kHandleBit].result;
    const Result& r = c->result[index(id)];
    return Interval{r.start, r.finish};
  }
  // Fetches an id's lines ahead of a retire() (any id: an unknown one fetches nothing).
  void prefetch(EventId id) const {
    if (const Chunk* c = chunk_of(id)) {
      __builtin_prefetch(&c->slot[index(id)], 1);
      if (c->member) __builtin_prefetch(&c->member[index(id)], 1);
    }
  }
  // Fetches a handle's entry ahead of its retire_handle() (written there).
  void prefetch_handle(uint32_t handle) const { __builtin_prefetch(&handles_[handle], 1); }
  void retire(EventId id, const Interval& final_interval);
  // A live id's event moved to another slot (a flow group split into its members).
  void rebind(EventId id, uint32_t slot) {
    uint32_t& s = chunk_of(id)->slot[index(id)];
    unbind(s, id);
    s = slot;
  }
  // Ids first..last (one call's, a group's members) can share a handle: they lie in at most
  // kHandleChunks chunks, numbered below 2^32 (Handle).
  static bool can_share(EventId first, EventId last) {
    return chunk_number(last) - chunk_number(first) < kHandleChunks && chunk_number(last) <= 0xFFFFFFFFu;
  }
  // A handle for a flow group in record `slot` whose members' ids lie from `first` on
  // (can_share()); the group holds one reference to it until close_handle().
  uint32_t open_handle(uint32_t slot, EventId first);
  // A live id's event is member `position` of the group behind `handle`.
  void bind_handle(EventId id, uint32_t handle, uint32_t position) {
    Chunk* c = chunk_of(id);
    uint32_t& s = c->slot[index(id)];
    unbind(s, id);
    Handle& h = handles_[handle];
    s = kHandleBit | handle;
    ++h.refs;
    ++h.count[chunk_number(id) - h.first_chunk];
    members_of(c)[index(id)] = position;
  }
  // Every id still bound to `handle` is retired with `final_interval`: one write, and each of
  // its chunks counts its ids retired at once.
  void retire_handle(uint32_t handle, const Interval& final_interval);
  // The group lets go of its handle (it retired or came apart).
  void close_handle(uint32_t handle) { drop_ref(handle); }
  // rebind() and set_member() at once, for an id not bound to a handle (one chunk lookup).
  void bind_member(EventId id, uint32_t slot, uint32_t position) {
    Chunk* c = chunk_of(id);
    c->slot[index(id)] = slot;
    members_of(c)[index(id)] = position;
  }
  // A live id's position among its flow group's members (flow_group.h).
  void set_member(EventId id, uint32_t position) { members_of(chunk_of(id))[index(id)] = position; }
  // Only for live ids (an id whose chunk's ids all retired has no position kept).
  uint32_t member(EventId id) const { return chunk_of(id)->member[index(id)]; }

  // The submitter will not name `id` again (a second release of an id is ignored).
  void release(EventId id);

  size_t bytes() const;
  // Its pools' mappings from now on are advised for huge pages (EngineOptions::huge_pages).
  void set_huge_pages(bool on) {
    for (BlockPool* p : {&chunk_pool_, &member_pool_, &result_pool_}) p->set_huge_pages(on);
    handles_.set_huge_pages(on);
  }
  size_t handles_held() const { return handles_.size() - free_handles_.size(); }

 private:
  static constexpr uint32_t kHandleBit = 0x80000000u;  // a slot entry naming a handle
  static constexpr int kHandleChunks = 3;  // a call of up to 2 * kChunk + 1 ids fits
  // A group's entry: its record slot (kRetired once retired) and then its final interval;
  // refs counts the ids bound to it (until their chunk goes) and the group itself; count[k]
  // its live members' ids in chunk first_chunk + k (what each chunk counts retired at once).
  // 32 bytes (16-bit counts: a handle's ids lie in kHandleChunks chunks of kChunk; a 32-bit
  // chunk number: can_share() refuses ids past it): a caller that never releases keeps one a
  // group, and at 48 bytes they were a tenth of a 2048-GPU ring's last-level misses.
  struct Handle {
    Interval result;
    uint32_t slot = kRetired;
    uint32_t first_chunk = 0;
    uint16_t refs = 0;
    uint16_t count[kHandleChunks] = {};
  };
  static_assert(sizeof(Handle) == 32);
  static_assert(kHandleChunks * kChunk + 1 <= 0xFFFF);
  static uint64_t chunk_number(EventId id) { return (id - 1) / kChunk; }
  // Handles are kHandleBit | h, below kRetired: one unsigned comparison.
  static bool is_handle(uint32_t s) { return s - kHandleBit < kRetired - kHandleBit; }
  uint32_t resolve(uint32_t s) const { return is_handle(s) ? handles_[s & ~kHandleBit].slot : s; }
  void drop_ref(uint32_t handle) {
    if (--handles_[handle].refs == 0) free_handles_.push_back(handle);
  }
  // A live id bound to a handle (entry `s`) leaves it.
  void unbind(uint32_t s, EventId id) {
    if (!is_handle(s)) return;
    Handle& h = handles_[s & ~kHandleBit];
    --h.count[chunk_number(id) - h.first_chunk];
    drop_ref(s & ~kHandleBit);
  }
  // A final interval, left unwritten until an id retires on its own (Interval zeroes itself).
  struct Result {
    double start, finish;
  };
  // Ids retired with their group's handle keep no interval of their own, and a live id needs
  // only its slot and, in a group, its position: a chunk's slots (16 KB, left unwritten until
  // their ids are), its positions (16 KB) made when one of its ids joins a group and its
  // results (64 KB) when one retires on its own, both unwritten until used. (Positions were
  // kept where the interval goes: every chunk was 82 KB, zeroed at once, 20 bytes an id
  // through the cache where a 4096-GPU ring's step has 2 MB to share, and kept for every id of
  // a caller that never releases.)
  // Its three arrays come from the table's pools (block_pool.h), the positions and results
  // only when first needed.
  struct Chunk {
    uint32_t slot[kChunk];
    uint32_t* member = nullptr;  // a live member id's position in its group
    Result* result = nullptr;
    uint64_t released_bits[kChunk / 64] = {};
  };
  uint32_t* members_of(Chunk* c) {
    if (c->member == nullptr) {
      c->member = static_cast<uint32_t*>(member_pool_.allocate());
    }
    return c->member;
  }
  // Every id of the chunk of `id` retired: its positions are read no more (they are read only
  // for live members), and the array goes back to the pool for the next chunk whose ids join a
  // group. A caller that never releases kept 4 bytes an id for the whole run: 134 MB on a
  // 4096-GPU ring, where the arrays of the chunks that went before now serve (~20 us a page
  // first touched on the virtual machines we run on: a tenth of the run).
  void all_retired(EventId id);
  // A chunk and its counts of retired and released ids. The counts sit here, in the dense
  // table of chunks, not at the end of the chunk's 82 KB: a group retires ~180 steps after its
  // submission on a 4096-GPU ring, and its count written in its chunk was a cache miss per
  // group (the largest part of retire_handle()); the table's 16 bytes a chunk stay cached.
  struct Held {
    Chunk* chunk = nullptr;
    uint32_t retired = 0;
    uint32_t released = 0;
  };
  static uint32_t index(EventId id) { return static_cast<uint32_t>((id - 1) % kChunk); }
  Chunk* chunk_of(EventId id) const;
  Held& held_of(EventId id) { return chunks_[front_ + static_cast<size_t>((id - first_) / kChunk)]; }
  void maybe_free(EventId id);

  // chunks_[front_] holds ids from first_ on; the freed ones before it are dropped in bulk.
  // (A vector and an offset, not a deque: chunk_of() runs several times per event, and a
  // deque's two-level indexing was a tenth of the simulator's instructions.)
  std::vector<Held> chunks_;
  size_t front_ = 0;
  EventId first_ = 1;                          // first id of chunks_[front_]
  EventId last_ = 0;
  // In chunks of 256 (8 KB) that never move: a caller that never releases keeps one a group
  // (2 bytes a flow on a ring), and a vector's doublings copied them into fresh pages each
  // time, 40% of a 4096-GPU ring's page faults (~20 us each on a virtual machine).
  ChunkedStore<Handle> handles_;
  std::vector<uint32_t> free_handles_;
  BlockPool chunk_pool_{sizeof(Chunk)};
  BlockPool member_pool_{kChunk * sizeof(uint32_t)};
  BlockPool result_pool_{kChunk * sizeof(Result)};
};

// Inline: the engine asks it several times per event (known, settled, interval, slot).
inline IdTable::Chunk* IdTable::chunk_of(EventId id) const {
  if (id == kNoEvent || id > last_ || id < first_) return nullptr;
  const size_t c = static_cast<size_t>((id - first_) / kChunk);
  return c < chunks_.size() - front_ ? chunks_[front_ + c].chunk : nullptr;
}

}  // namespace simcore::detail
