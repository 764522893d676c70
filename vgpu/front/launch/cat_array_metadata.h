// PyTorch's torch.cat kernels (CatArrayBatchedCopy and its _contig, _aligned16_contig and
// _vectorized forms, ATen/native/cuda/Shape.cu) take the inputs of one batch in a struct passed by
// value that the host fills for the batch's inputs only, on its stack: the entries past them hold
// stack garbage, so the launches of one work never repeated a signature. In the 2-rank replays of
// GPT-2's step on the sim backend (2026-11-28, call 1), CatArrayBatchedCopy_vectorized was the
// only compute kernel the database missed (288 launches a run, each given the fallback's time),
// its words past the batch's three inputs differing on every launch.
//
// The struct's layout is PyTorch's, by its template arguments: the index type I (4 or 8 bytes),
// the batch size n and the stride size k (1 when every input is contiguous, else n):
//
//   CatArrInputTensorMetadata<T, I, n, k>  (aligned to 16 bytes)
//     input[n]        8 bytes each
//     offset[n]       I
//     dimSize[n]      I
//     nElements[n]    I
//     isContiguous[n] 1 byte each
//     tensorStride[k] TensorSizeStride<I, 4>: tensorSize[4] and tensorStride[4], I each
//
// The launch's grid.y is the batch's inputs (blockIdx.y picks the input). The kernel's mangled
// name carries I ('j': unsigned int, 'm': unsigned long, 'i'/'l' their signed forms) and, after the
// element type, the inputs' dimensions D, n and k. A parameter is taken as the struct only where the
// name says it is one and its size is the layout's exactly; anything else is left as it is.
// Besides the batch's entries: the contiguous kernels (_contig, _vectorized) read no stride of
// the inputs, and every kernel reads only the first D sizes and strides of the output's
// TensorSizeStride<I, 4> (the parameter after the struct), whose fourth word held the upper half
// of a host stack address (0x7f..) on 159 of 2,016 launches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vgpu {

// What a cat kernel's name says of its parameters.
struct CatKernel {
  size_t index_bytes = 0;   // I
  size_t dims = 0;          // D
  size_t batch = 0;         // n
  size_t strides = 0;       // k
  bool contiguous = false;  // reads no input stride
};

// Whether a by-value parameter of `size` bytes can be the struct above (its size for a batch of
// 16 to 256 inputs), so that other launches cost no look at the kernel's name.
bool may_be_cat_metadata(size_t size);

// The kernel's template arguments when `function_name` is a cat kernel's.
bool cat_kernel_of(std::string_view function_name, CatKernel* out);

// Zeroes, in `bytes` (one by-value parameter of `size` bytes as the signature copied it), what
// the launch does not read of the inputs' struct: the entries past the batch's inputs (`grid_y`
// of them), the strides where `cat` reads none, sizes and strides past D, and the padding.
// Returns false (nothing changed) where `size` is not the struct's.
bool zero_unused_cat_entries(const CatKernel& cat, uint32_t grid_y, char* bytes, size_t size);
// The same for the output's TensorSizeStride<I, 4>: its sizes and strides past D.
bool zero_unused_cat_output_dims(const CatKernel& cat, char* bytes, size_t size);

}  // namespace vgpu
