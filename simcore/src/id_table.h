// What the simulator keeps per event id: the event's record slot while it is live, its final
// interval once it is retired. A long run submits ~10^8 events, so this table must not keep
// 20 bytes for each of them forever: ids are handed out in order and stored in chunks of
// kChunk, and a chunk is freed once every one of its ids is both retired (final, its history
// reclaimed) and released by the submitter (Engine::release: it will never name the id again).
// A user that never releases (vgpu-netsim, the NCCL plugin, vgpud's clients) keeps everything,
// as before. An id whose chunk was freed is no longer known (queries answer nullopt, a
// dependency on it is refused), never a dangling read.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

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
  uint32_t slot(EventId id) const { return chunk_of(id)->slot[index(id)]; }
  // slot(), or kRetired for an id that is not present.
  uint32_t slot_or_retired(EventId id) const {
    const Chunk* c = chunk_of(id);
    return c ? c->slot[index(id)] : kRetired;
  }
  const Interval& result(EventId id) const { return chunk_of(id)->result[index(id)]; }
  // Fetches an id's lines ahead of a retire() (any id: an unknown one fetches nothing).
  void prefetch(EventId id) const {
    if (const Chunk* c = chunk_of(id)) {
      __builtin_prefetch(&c->slot[index(id)], 1);
      __builtin_prefetch(&c->result[index(id)], 1);
    }
  }
  void retire(EventId id, const Interval& final_interval);
  // A live id's event moved to another slot (a flow group split into its members).
  void rebind(EventId id, uint32_t slot) { chunk_of(id)->slot[index(id)] = slot; }
  // A live id's position among its flow group's members (flow_group.h). Kept where the final
  // interval goes once the id retires, which a live id does not use.
  void set_member(EventId id, uint32_t position) {
    chunk_of(id)->result[index(id)].start = static_cast<double>(position);
  }
  // rebind() and set_member() at once (one lookup of the id's chunk).
  void bind_member(EventId id, uint32_t slot, uint32_t position) {
    Chunk* c = chunk_of(id);
    c->slot[index(id)] = slot;
    c->result[index(id)].start = static_cast<double>(position);
  }
  uint32_t member(EventId id) const { return static_cast<uint32_t>(chunk_of(id)->result[index(id)].start); }

  // The submitter will not name `id` again (a second release of an id is ignored).
  void release(EventId id);

  size_t bytes() const;

 private:
  struct Chunk {
    uint32_t slot[kChunk];
    Interval result[kChunk];
    uint64_t released_bits[kChunk / 64] = {};
    uint32_t retired = 0;
    uint32_t released = 0;
  };
  static uint32_t index(EventId id) { return static_cast<uint32_t>((id - 1) % kChunk); }
  Chunk* chunk_of(EventId id) const;
  void maybe_free(EventId id);

  // chunks_[front_] holds ids from first_ on; the freed ones before it are dropped in bulk.
  // (A vector and an offset, not a deque: chunk_of() runs several times per event, and a
  // deque's two-level indexing was a tenth of the simulator's instructions.)
  std::vector<std::unique_ptr<Chunk>> chunks_;
  size_t front_ = 0;
  EventId first_ = 1;                          // first id of chunks_[front_]
  EventId last_ = 0;
  size_t held_ = 0;                            // chunks not freed
};

// Inline: the engine asks it several times per event (known, settled, interval, slot).
inline IdTable::Chunk* IdTable::chunk_of(EventId id) const {
  if (id == kNoEvent || id > last_ || id < first_) return nullptr;
  const size_t c = static_cast<size_t>((id - first_) / kChunk);
  return c < chunks_.size() - front_ ? chunks_[front_ + c].get() : nullptr;
}

}  // namespace simcore::detail
