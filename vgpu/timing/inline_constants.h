// Floating-point constants that hot paths take from the instruction stream, not from memory.
//
// Why: GCC reads a double constant (an addition's 4 us, std::isfinite's bounds) from .rodata,
// where each one can sit on a cache line of its own; between two driver calls a framework's work
// and the real driver's call evict those lines, and every timed call read one to three of them
// again (an event record missed ~27 lines, issue 21). Used by the thread clock's common path
// (outside_cpu_time.h) and the passthrough's. Here the constant's bits are an immediate
// operand moved into a register (two instructions, no load), and the finiteness test works on
// the bits.
#pragma once

#include <bit>
#include <cstdint>

namespace vgpu {

// `v`, built from an immediate: the empty asm hides the value from the optimizer, which would
// otherwise fold it back into a .rodata load.
[[gnu::always_inline]] inline double immediate(double v) {
  uint64_t bits = std::bit_cast<uint64_t>(v);
  asm("" : "+r"(bits));
  return std::bit_cast<double>(bits);
}

// `v` when finite, else 0 (std::isfinite(v) ? v : 0.0 without a constant from memory).
[[gnu::always_inline]] inline double finite_or_zero(double v) {
  constexpr uint64_t kExponent = 0x7ff0000000000000ull;  // all ones: infinity or NaN
  return (std::bit_cast<uint64_t>(v) & kExponent) != kExponent ? v : 0.0;
}

}  // namespace vgpu
