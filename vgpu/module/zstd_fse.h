// Finite State Entropy tables (RFC 8878 section 4.1): reading a table description, building
// the decoding table from normalized counts, and stepping a decoder state.
#pragma once

#include "module/zstd_bits.h"

#include <cstdint>
#include <span>
#include <vector>

namespace vgpu::module::zstd_detail {

struct FseCell {
  uint16_t baseline = 0;
  uint8_t symbol = 0;
  uint8_t bits = 0;
};

struct FseTable {
  int accuracy_log = 0;
  std::vector<FseCell> cells;  // 1 << accuracy_log of them
};

// Builds the decoding table for normalized counts (-1 = "less than one"), which must sum to
// 1 << accuracy_log.
void build_fse_table(std::span<const int16_t> counts, int accuracy_log, FseTable& out);

// A table that always yields `symbol` and reads no bits (the RLE mode of sequences).
void build_rle_table(uint8_t symbol, FseTable& out);

// Reads a table description from the start of `src` (accuracy log at most `max_accuracy_log`,
// symbols 0..max_symbol) and builds it. Returns the bytes the description used.
size_t read_fse_table(std::span<const uint8_t> src, int max_accuracy_log, int max_symbol, FseTable& out);

class FseState {
 public:
  void init(const FseTable& table, BackwardBits& bits) {
    table_ = &table;
    state_ = bits.read(table.accuracy_log);
  }
  uint8_t symbol() const { return table_->cells[state_].symbol; }
  void update(BackwardBits& bits) {
    const FseCell& c = table_->cells[state_];
    state_ = c.baseline + bits.read(c.bits);  // < table size by construction of the table
  }

 private:
  const FseTable* table_ = nullptr;
  uint32_t state_ = 0;
};

}  // namespace vgpu::module::zstd_detail
