// A non-negative double in fixed notation with 6 decimals, the digits of printf's "%.6f" (the
// exact binary value rounded to the nearest millionth, ties to even), written without
// std::to_chars, whose precision path cost vgpu-netsim a fifth of its instructions (two numbers
// per event, millions of events). The double m * 2^e times 10^6 is exact in 128 bits for the
// times a trace holds; anything else (negative, not finite, 2^64 millionths or more) goes
// through std::to_chars.
#pragma once

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace simcore::netsim {

// Writes at most 400 characters at `out` (the longest double in fixed notation with 6
// decimals); returns the end.
inline char* write_fixed6(char* out, double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t frac = bits & ((uint64_t{1} << 52) - 1);
  if ((bits >> 63) != 0 || biased == 0x7ff || biased >= 1023 + 44)  // v < 0, inf/nan, v >= 2^44
    return std::to_chars(out, out + 400, v, std::chars_format::fixed, 6).ptr;
  // v = m * 2^e exactly.
  const uint64_t m = biased == 0 ? frac : frac | (uint64_t{1} << 52);
  const int e = (biased == 0 ? 1 : biased) - 1075;
  const unsigned __int128 scaled = static_cast<unsigned __int128>(m) * 1000000u;  // < 2^73
  uint64_t q;  // v * 10^6, rounded
  if (e >= 0) {
    q = static_cast<uint64_t>(scaled << e);  // v < 2^44, so v * 10^6 < 2^64
  } else if (-e >= 127) {
    q = 0;  // v * 10^6 < 2^73 * 2^-127: far below one half
  } else {
    const int s = -e;
    q = static_cast<uint64_t>(scaled >> s);
    const unsigned __int128 rest = scaled & ((static_cast<unsigned __int128>(1) << s) - 1);
    const unsigned __int128 half = static_cast<unsigned __int128>(1) << (s - 1);
    if (rest > half || (rest == half && (q & 1) != 0)) ++q;
  }
  const uint64_t whole = q / 1000000u;
  uint32_t part = static_cast<uint32_t>(q % 1000000u);
  out = std::to_chars(out, out + 24, whole).ptr;
  *out++ = '.';
  for (int i = 5; i >= 0; --i) {
    out[i] = static_cast<char>('0' + part % 10);
    part /= 10;
  }
  return out + 6;
}

}  // namespace simcore::netsim
