#include "front/launch/elementwise_metadata.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace vgpu {
namespace {

constexpr size_t kMaxN = 8;       // the largest LoadWithCast / OffsetCalculator arity looked for
constexpr size_t kMaxDims = 25;   // MAX_DIMS of PyTorch's CUDA OffsetCalculator
constexpr size_t kMaxTail = 64;   // bytes of a closure after the calculator's data pointers: the functor
constexpr size_t kSizesAt = 4;    // after `int dims`
constexpr size_t kDividerBytes = 12;
constexpr size_t kStridesAt = kSizesAt + kMaxDims * kDividerBytes;  // 304

constexpr size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// LoadWithCast<n> / StoreWithCast<n>: n dtypes, padding to 4, n element sizes.
constexpr size_t cast_struct_size(size_t n) { return align_up(n, 4) + 4 * n; }

// A closure that starts with OffsetCalculator<n, uint32_t> and then holds its n data pointers
// and a functor of at most kMaxTail bytes: the sizes it can have. The ranges of successive n do
// not overlap (each n adds 108 bytes), so the size says n.
constexpr size_t closure_data_at(size_t n) { return align_up(kStridesAt + kMaxDims * 4 * n, 8); }
size_t closure_arity(size_t size) {
  for (size_t n = 1; n <= kMaxN; ++n) {
    const size_t least = closure_data_at(n) + 8 * n;
    if (size >= least && size <= least + kMaxTail) return n;
  }
  return 0;
}

uint32_t word(const char* bytes, size_t at) {
  uint32_t v;
  std::memcpy(&v, bytes + at, 4);
  return v;
}

// N in "...<marker><digits>E...", or 0.
size_t template_int_after(std::string_view name, std::string_view marker) {
  const size_t at = name.find(marker);
  if (at == std::string_view::npos) return 0;
  size_t n = 0, i = at + marker.size(), digits = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && digits < 3) n = n * 10 + static_cast<size_t>(name[i++] - '0'), ++digits;
  if (digits == 0 || i >= name.size() || name[i] != 'E' || n > kMaxN) return 0;
  return n;
}

ElementwiseKernel parse(std::string_view function_name) {
  ElementwiseKernel k;
  k.load_n = template_int_after(function_name, "LoadWithCastILi");
  k.store_n = template_int_after(function_name, "StoreWithCastILi");
  constexpr std::string_view kLegacy = "_ZN2at6native18elementwise_kernelIL";  // elementwise_kernel<nt, vt, ...>
  k.closure_offset_calculator = function_name.substr(0, kLegacy.size()) == kLegacy;
  return k;
}

// What IntDivider<unsigned int>'s constructor stores for `divisor`: {m1, shift}.
bool is_int_divider(uint32_t divisor, uint32_t m1, uint32_t shift) {
  if (divisor == 0 || divisor > 0x7fffffffu) return false;
  uint32_t s = 0;
  while (s < 32 && (uint64_t{1} << s) < divisor) ++s;
  const uint64_t magic = ((uint64_t{1} << 32) * ((uint64_t{1} << s) - divisor)) / divisor + 1;
  return shift == s && magic <= 0xffffffffu && m1 == static_cast<uint32_t>(magic);
}

bool zero_cast_padding(size_t n, char* bytes, size_t size) {
  if (n == 0 || size != cast_struct_size(n)) return false;
  const size_t sizes_at = align_up(n, 4);
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<uint8_t>(bytes[i]) >= 64) return false;  // not a ScalarType
    const uint32_t element = word(bytes, sizes_at + 4 * i);
    if (element != 1 && element != 2 && element != 4 && element != 8 && element != 16) return false;
  }
  std::memset(bytes + n, 0, sizes_at - n);
  return sizes_at > n;
}

bool zero_unused_offset_calculator(char* bytes, size_t size) {
  const size_t n = closure_arity(size);
  if (n == 0) return false;
  const uint32_t dims = word(bytes, 0);
  if (dims == 0 || dims > kMaxDims) return false;
  for (size_t d = 0; d < dims; ++d) {
    const size_t at = kSizesAt + d * kDividerBytes;
    if (!is_int_divider(word(bytes, at), word(bytes, at + 4), word(bytes, at + 8))) return false;
  }
  std::memset(bytes + kSizesAt + dims * kDividerBytes, 0, (kMaxDims - dims) * kDividerBytes);
  // The strides' unused rows and the padding up to the data pointers.
  const size_t rows_at = kStridesAt + dims * 4 * n;
  std::memset(bytes + rows_at, 0, closure_data_at(n) - rows_at);
  return true;
}

}  // namespace

bool may_be_elementwise_struct(size_t size) {
  if (size <= cast_struct_size(kMaxN)) {
    for (size_t n = 1; n <= kMaxN; ++n)
      if (size == cast_struct_size(n)) return true;
    return false;
  }
  return closure_arity(size) != 0;
}

ElementwiseKernel elementwise_kernel_of(std::string_view function_name) {
  constexpr std::string_view kNative = "_ZN2at6native";
  if (function_name.substr(0, kNative.size()) != kNative) return {};
  // A thread launches the same few kernels over and over: the last names' answers are kept (a
  // compare of the name costs a third of the two searches: launch_signature_bench).
  struct Memo {
    std::string name;
    ElementwiseKernel kernel;
  };
  thread_local Memo memo[4];
  thread_local unsigned next = 0;
  for (const Memo& m : memo)
    if (m.name == function_name) return m.kernel;
  Memo& m = memo[next++ % 4];
  m.name.assign(function_name);
  m.kernel = parse(function_name);
  return m.kernel;
}

bool zero_unused_elementwise_bytes(const ElementwiseKernel& kernel, char* bytes, size_t size) {
  if (kernel.load_n != 0 && zero_cast_padding(kernel.load_n, bytes, size)) return true;
  if (kernel.store_n != 0 && kernel.store_n != kernel.load_n && zero_cast_padding(kernel.store_n, bytes, size))
    return true;
  return kernel.closure_offset_calculator && zero_unused_offset_calculator(bytes, size);
}

}  // namespace vgpu
