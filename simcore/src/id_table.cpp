#include "id_table.h"

#include <new>

namespace simcore::detail {

EventId IdTable::add(uint32_t slot) {
  const EventId id = last_ + 1;
  if (index(id) == 0) {
    chunks_.push_back(Held{new (chunk_pool_.allocate()) Chunk});  // (its slots left unwritten)
  }
  last_ = id;
  Chunk* c = chunk_of(id);
  c->slot[index(id)] = slot;
  return id;
}

void IdTable::retire(EventId id, const Interval& final_interval) {
  Chunk* c = chunk_of(id);
  if (c == nullptr) return;
  uint32_t& s = c->slot[index(id)];
  if (s == kRetired) return;
  if (is_handle(s)) {
    if (handles_[s & ~kHandleBit].slot == kRetired) return;  // retired with its group
    unbind(s, id);
  }
  s = kRetired;
  if (c->result == nullptr) c->result = static_cast<Result*>(result_pool_.allocate());
  c->result[index(id)] = Result{final_interval.start, final_interval.finish};
  // Only a chunk whose count just reached full can be freed: testing the counters after every
  // increment read the two 4-byte counts as one 8-byte word right after the 4-byte store, a
  // store-forwarding stall per retired id (4% of a 4096-GPU ring).
  if (++held_of(id).retired == kChunk) all_retired(id);
}

void IdTable::retire_handle(uint32_t handle, const Interval& final_interval) {
  Handle& h = handles_[handle];
  h.slot = kRetired;
  h.result = final_interval;
  for (int k = 0; k < kHandleChunks; ++k) {
    if (h.count[k] == 0) continue;
    const EventId any = (uint64_t{h.first_chunk} + static_cast<uint64_t>(k)) * kChunk + 1;
    Held& c = held_of(any);  // held: it holds live ids until now
    c.retired += h.count[k];
    if (c.retired == kChunk) all_retired(any);
  }
}

void IdTable::release(EventId id) {
  Chunk* c = chunk_of(id);
  if (c == nullptr) return;
  uint64_t& word = c->released_bits[index(id) / 64];
  const uint64_t bit = uint64_t{1} << (index(id) % 64);
  if (word & bit) return;
  word |= bit;
  if (++held_of(id).released == kChunk) maybe_free(id);
}

void IdTable::all_retired(EventId id) {
  Chunk* c = chunk_of(id);
  if (c == nullptr) return;
  if (c->member != nullptr) {
    member_pool_.deallocate(c->member);
    c->member = nullptr;
  }
  maybe_free(id);
}

void IdTable::maybe_free(EventId id) {
  Chunk* c = chunk_of(id);
  // Only a full chunk: ids still to come would land in a freed one.
  if (c == nullptr) return;
  Held& held = held_of(id);
  if (held.retired != kChunk || held.released != kChunk) return;
  // Its ids retired with their group let go of the group's handle.
  for (uint32_t k = 0; k < kChunk; ++k)
    if (is_handle(c->slot[k])) drop_ref(c->slot[k] & ~kHandleBit);
  if (c->result != nullptr) result_pool_.deallocate(c->result);
  if (c->member != nullptr) member_pool_.deallocate(c->member);
  chunk_pool_.deallocate(c);
  held.chunk = nullptr;
  while (front_ < chunks_.size() && chunks_[front_].chunk == nullptr) {
    ++front_;
    first_ += kChunk;
  }
  if (front_ >= 64 && 2 * front_ >= chunks_.size()) {
    chunks_.erase(chunks_.begin(), chunks_.begin() + static_cast<long>(front_));
    front_ = 0;
  }
}

uint32_t IdTable::open_handle(uint32_t slot, EventId first) {
  uint32_t h;
  if (free_handles_.empty()) {
    h = static_cast<uint32_t>(handles_.size());
    handles_.emplace_back();
  } else {
    h = free_handles_.back();
    free_handles_.pop_back();
  }
  // Field by field: `= Handle{}` built the entry on the stack and copied it over, two
  // overlapping 16-byte moves whose load waited on the store before it.
  Handle& e = handles_[h];
  e.slot = slot;
  e.refs = 1;
  e.result = Interval{};
  e.first_chunk = static_cast<uint32_t>(chunk_number(first));  // (can_share(): it fits)
  for (uint16_t& n : e.count) n = 0;
  // The handle the next group takes (a freed one, last written when its chunk went long ago,
  // or a fresh one past the end), fetched for writing a group ahead: writing it cold was most
  // of this function on a 4096-GPU ring.
  const Handle* next = !free_handles_.empty()                  ? &handles_[free_handles_.back()]
                       : handles_.size() < handles_.capacity() ? &handles_[handles_.size()]
                                                               : nullptr;
  if (next != nullptr) {
    __builtin_prefetch(next, 1);
    __builtin_prefetch(reinterpret_cast<const char*>(next) + sizeof(Handle) - 1, 1);
  }
  return h;
}

// What the pools have written (blocks in use and freed ones kept for reuse) and the tables.
size_t IdTable::bytes() const {
  return chunk_pool_.blocks_made() * chunk_pool_.block_bytes() +
         member_pool_.blocks_made() * member_pool_.block_bytes() +
         result_pool_.blocks_made() * result_pool_.block_bytes() + chunks_.capacity() * sizeof(chunks_[0]) +
         handles_.capacity() * sizeof(Handle) + free_handles_.capacity() * sizeof(uint32_t);
}

}  // namespace simcore::detail
