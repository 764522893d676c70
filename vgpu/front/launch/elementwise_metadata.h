// PyTorch's elementwise kernels (ATen/native/cuda/Loops.cuh, CUDALoops.cuh) take structs by value
// whose unused bytes the host leaves as its stack held them, so launches of one work keep new
// signatures and the database recorded by one process misses them in another:
//
// - memory::LoadWithCast<N> and memory::StoreWithCast<N> (the loader and storer of a kernel that
//   casts as it copies): N one-byte ScalarTypes, padding up to 4 bytes, N uint32 element sizes.
//   The padding held stack bytes: GPT-2's logits cast (unrolled_elementwise_kernel of
//   direct_copy_kernel_cuda, 411.7 M elements, 1.37 ms of fallback a launch) missed 23 times a
//   2-rank replay, 2026-11-28, on those three bytes alone.
// - OffsetCalculator<NARGS, uint32_t>, captured first by the lambda of gpu_kernel_impl's legacy
//   elementwise_kernel: `int dims`, IntDivider<uint32_t> sizes_[25] ({divisor, m1, shift}),
//   uint32_t strides_[25][NARGS]. The host fills the first `dims` entries of each; the kernel
//   reads no others (OffsetCalculator::get stops at dims), and the rest were stack garbage
//   (CUDAFunctor_add's 648-byte closure, ~20 words differing between launches of one work).
//
// A struct is cleaned only where the kernel's name says it is there and its bytes read as one:
// the dtypes are ScalarTypes and the element sizes powers of two up to 16; the offset calculator's
// every used divider has exactly the magic number and shift IntDivider computes for it. Anything
// else is left as it is.
#pragma once

#include <cstddef>
#include <string_view>

namespace vgpu {

// What a kernel's name says of its elementwise structs.
struct ElementwiseKernel {
  size_t load_n = 0;   // LoadWithCast<N>'s N; 0: none
  size_t store_n = 0;  // StoreWithCast<N>'s N; 0: none
  bool closure_offset_calculator = false;  // a legacy elementwise_kernel: its lambda may start with one
  bool any() const { return load_n != 0 || store_n != 0 || closure_offset_calculator; }
};

// Whether a by-value parameter of `size` bytes can be one of the structs above, so that other
// launches cost no look at the kernel's name.
bool may_be_elementwise_struct(size_t size);

// The structs `function_name` (mangled) names; all zero for other kernels (a 13-byte compare for
// a kernel outside at::native).
ElementwiseKernel elementwise_kernel_of(std::string_view function_name);

// Zeroes, in `bytes` (one by-value parameter of `size` bytes as the signature copied it), what
// the kernel does not read of the struct it holds; false (nothing changed) where it holds none.
bool zero_unused_elementwise_bytes(const ElementwiseKernel& kernel, char* bytes, size_t size);

}  // namespace vgpu
