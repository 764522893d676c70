#include "id_table.h"

namespace simcore::detail {

EventId IdTable::add(uint32_t slot) {
  const EventId id = last_ + 1;
  if (index(id) == 0) {
    chunks_.push_back(std::make_unique<Chunk>());
    ++held_;
  }
  last_ = id;
  Chunk* c = chunk_of(id);
  c->slot[index(id)] = slot;
  c->result[index(id)] = Interval{};
  return id;
}

void IdTable::retire(EventId id, const Interval& final_interval) {
  Chunk* c = chunk_of(id);
  if (c == nullptr) return;
  uint32_t& s = c->slot[index(id)];
  if (s == kRetired) return;
  if (is_handle(s)) {
    if (handles_[s & ~kHandleBit].slot == kRetired) return;  // retired with its group
    drop_ref(s & ~kHandleBit);
  }
  s = kRetired;
  c->result[index(id)] = final_interval;
  // Only a chunk whose count just reached full can be freed: testing the counters after every
  // increment read the two 4-byte counts as one 8-byte word right after the 4-byte store, a
  // store-forwarding stall per retired id (4% of a 4096-GPU ring).
  if (++c->retired == kChunk) maybe_free(id);
}

void IdTable::release(EventId id) {
  Chunk* c = chunk_of(id);
  if (c == nullptr) return;
  uint64_t& word = c->released_bits[index(id) / 64];
  const uint64_t bit = uint64_t{1} << (index(id) % 64);
  if (word & bit) return;
  word |= bit;
  uint32_t& s = c->slot[index(id)];
  if (is_handle(s)) {
    const uint32_t h = s & ~kHandleBit;
    if (handles_[h].slot == kRetired) {
      // Retired with its group: now an ordinary retired id, counted in its chunk.
      c->result[index(id)] = handles_[h].result;
      s = kRetired;
      drop_ref(h);
      ++c->retired;
    } else {
      ++handles_[h].released_live;
    }
  }
  if (++c->released == kChunk) maybe_free(id);
}

void IdTable::maybe_free(EventId id) {
  Chunk* c = chunk_of(id);
  // Only a full chunk: ids still to come would land in a freed one.
  if (c == nullptr || c->retired != kChunk || c->released != kChunk) return;
  chunks_[front_ + static_cast<size_t>((id - first_) / kChunk)].reset();
  --held_;
  while (front_ < chunks_.size() && chunks_[front_] == nullptr) {
    ++front_;
    first_ += kChunk;
  }
  if (front_ >= 64 && 2 * front_ >= chunks_.size()) {
    chunks_.erase(chunks_.begin(), chunks_.begin() + static_cast<long>(front_));
    front_ = 0;
  }
}

uint32_t IdTable::open_handle(uint32_t slot) {
  uint32_t h;
  if (free_handles_.empty()) {
    h = static_cast<uint32_t>(handles_.size());
    handles_.emplace_back();
  } else {
    h = free_handles_.back();
    free_handles_.pop_back();
  }
  handles_[h] = Handle{slot, 1, 0, Interval{}};
  return h;
}

size_t IdTable::bytes() const {
  return held_ * sizeof(Chunk) + chunks_.capacity() * sizeof(chunks_[0]) +
         handles_.capacity() * sizeof(Handle) + free_handles_.capacity() * sizeof(uint32_t);
}

}  // namespace simcore::detail
