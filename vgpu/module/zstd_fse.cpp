#include "module/zstd_fse.h"

#include <bit>

namespace vgpu::module::zstd_detail {

void build_fse_table(std::span<const int16_t> counts, int accuracy_log, FseTable& out) {
  if (accuracy_log < 0 || accuracy_log > 15) fail("zstd: FSE accuracy log {} out of range", accuracy_log);
  if (counts.size() > 256) fail("zstd: FSE table with {} symbols", counts.size());
  const uint32_t size = 1u << accuracy_log;
  uint64_t total = 0;
  for (int16_t c : counts) total += c == -1 ? 1 : static_cast<uint64_t>(c < 0 ? 0 : c);
  for (int16_t c : counts)
    if (c < -1) fail("zstd: negative FSE count {}", c);
  if (total != size) fail("zstd: FSE counts sum to {}, expected {}", total, size);

  out.accuracy_log = accuracy_log;
  out.cells.assign(size, FseCell{});
  std::vector<uint32_t> next(counts.size(), 0);

  // "Less than one" symbols take one cell each at the top of the table.
  uint32_t high = size - 1;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (counts[s] == -1) {
      out.cells[high--].symbol = static_cast<uint8_t>(s);
      next[s] = 1;
    } else {
      next[s] = static_cast<uint32_t>(counts[s]);
    }
  }
  // The others are spread with a fixed odd step, skipping the top cells already taken.
  const uint32_t mask = size - 1;
  const uint32_t step = (size >> 1) + (size >> 3) + 3;
  uint32_t pos = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    for (int i = 0; i < counts[s]; ++i) {
      out.cells[pos].symbol = static_cast<uint8_t>(s);
      do {
        pos = (pos + step) & mask;
      } while (pos > high);
    }
  }
  if (pos != 0) fail("zstd: FSE table spread did not close");

  for (uint32_t u = 0; u < size; ++u) {
    FseCell& c = out.cells[u];
    const uint32_t state = next[c.symbol]++;
    const int bits = accuracy_log - (31 - std::countl_zero(state));
    c.bits = static_cast<uint8_t>(bits);
    c.baseline = static_cast<uint16_t>((state << bits) - size);
  }
}

void build_rle_table(uint8_t symbol, FseTable& out) {
  out.accuracy_log = 0;
  out.cells.assign(1, FseCell{0, symbol, 0});
}

size_t read_fse_table(std::span<const uint8_t> src, int max_accuracy_log, int max_symbol, FseTable& out) {
  ForwardBits in(src);
  const int accuracy_log = static_cast<int>(in.read(4)) + 5;
  if (accuracy_log > max_accuracy_log)
    fail("zstd: FSE accuracy log {} exceeds the maximum {}", accuracy_log, max_accuracy_log);
  std::vector<int16_t> counts;
  int32_t remaining = 1 << accuracy_log;
  while (remaining > 0) {
    if (static_cast<int>(counts.size()) > max_symbol) fail("zstd: FSE table has too many symbols");
    // Values 0..remaining+1 are coded in `bits` or `bits - 1` bits, small values taking fewer.
    const int bits = (31 - std::countl_zero(static_cast<uint32_t>(remaining + 1))) + 1;
    const uint32_t lower_mask = (1u << (bits - 1)) - 1;
    const uint32_t threshold = (1u << bits) - 1 - static_cast<uint32_t>(remaining + 1);
    uint32_t value = in.read(bits);
    if ((value & lower_mask) < threshold) {
      in.unread(1);
      value &= lower_mask;
    } else if (value > lower_mask) {
      value -= threshold;
    }
    const int count = static_cast<int>(value) - 1;
    remaining -= count < 0 ? -count : count;
    counts.push_back(static_cast<int16_t>(count));
    if (count == 0) {
      // A zero count is followed by 2-bit repeat fields giving more zero-count symbols.
      for (;;) {
        const uint32_t repeat = in.read(2);
        for (uint32_t i = 0; i < repeat; ++i) {
          if (static_cast<int>(counts.size()) > max_symbol) fail("zstd: FSE zero-run past the last symbol");
          counts.push_back(0);
        }
        if (repeat != 3) break;
      }
    }
  }
  if (remaining != 0) fail("zstd: FSE counts overshoot the table size");
  build_fse_table(counts, accuracy_log, out);
  return in.bytes_used();
}

}  // namespace vgpu::module::zstd_detail
