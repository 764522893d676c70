// Blocks of one size, carved in address order from 2 MiB-aligned mappings (mapped_region.h) and
// reused last-freed first; nothing goes back to the system before the pool does.
//
// Why: the id table (id_table.h) takes a 17 KB chunk for every 4096 ids and, while they are in
// flow groups, a 16 KB array of positions: from malloc, each was fresh 4 KiB pages to fault in,
// one by one, and their relocations and frees gave pages back to fault in again. Here a block freed (a chunk released, an array of
// positions no longer read) is the next one handed out, still warm.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace simcore::detail {

class BlockPool {
 public:
  // Blocks of `block_bytes` (rounded up to 64), aligned to 64 bytes.
  explicit BlockPool(size_t block_bytes);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool();

  // Uninitialized memory for one block (a freed one if any).
  void* allocate() {
    if (free_.empty()) return carve();
    void* p = free_.back();
    free_.pop_back();
    return p;
  }
  void deallocate(void* p) { free_.push_back(p); }

  // Mappings made from now on are advised for transparent huge pages (EngineOptions::huge_pages).
  void set_huge_pages(bool on) { huge_pages_ = on; }

  size_t block_bytes() const { return block_; }
  // Blocks handed out at least once (in use or free): the memory the pool has written to.
  size_t blocks_made() const { return made_; }

 private:
  void* carve();

  size_t block_;
  size_t per_mapping_;  // blocks in one mapping
  std::vector<std::pair<void*, size_t>> maps_;
  char* next_ = nullptr;
  size_t left_ = 0;  // blocks still to carve from the last mapping
  size_t made_ = 0;
  bool huge_pages_ = false;
  std::vector<void*> free_;
};

}  // namespace simcore::detail
