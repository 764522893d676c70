// PyTorch's multi-tensor-apply kernels (the `_foreach_*` ops, foreach and fused optimizers, FSDP2's
// copy-in) take one struct by value that lists the tensors of a launch: every tensor's addresses
// and element count, then which tensor and chunk each block works on. The host fills only the
// entries the launch uses and leaves the rest as they were: on the first launch stack garbage,
// later the previous launch's values. The kernel reads no entry past them, but a launch signature
// keeps every by-value byte, so these launches never repeated a signature: FSDP2's copy-in was
// measured on every step of a 2-rank job (2026-11-27, 316 of its first 441 words varied between
// launches of the same work), and on a shared GPU its durations (10-75 us for one work) never
// agreed well enough for signature_settling.h to learn which words do not matter.
//
// The struct's layout is PyTorch's (ATen/native/cuda/MultiTensorApply.cuh), per depth n (the
// tensor lists of the op, 1-5) and per configuration (the 4 KiB kernel-argument limit, or the
// large one of CUDA 12.1 and later: more tensors and blocks, block indices of two bytes):
//
//   TensorListMetadata<n>:              addresses[n][T] (8 bytes each), numel_for_tensor[T]
//                                       (8), block_to_tensor[B] (1 or 2), block_to_chunk[B] (4),
//                                       start_tensor_this_launch (4)
//   FusedOptimizerTensorListMetadata<n>: the same with state_steps_addresses[Ts] (8) after
//                                       numel_for_tensor
//
// T, Ts and B: {110, 64, 48, 36, 30}, {96, 64, 48, 36, 30} and 320 (small), {770, 448, 336,
// 252, 210}, {672, 448, 336, 252, 210} and 2240 (large), by depth. The launch's grid has one
// block per used entry of block_to_tensor, and the tensors used are those the used blocks name.
// A struct is recognised by the kernel's name (multi_tensor_apply_kernel with the struct's
// template in it) and its exact size for that depth; anything else is left as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vgpu {

// Whether a by-value parameter of `size` bytes can be one of the structs above (any depth,
// either configuration): a test on the size alone, so that the signature of every other launch
// costs no look at the kernel's name.
bool may_be_tensor_list(size_t size);

// Zeroes, in `bytes` (one by-value parameter of `size` bytes, as the signature copied it), the
// entries of a multi-tensor-apply struct that the launch does not use, when `function_name`
// and `size` say it is one; `grid_x`: the launch's blocks. Returns whether it was one.
bool zero_unused_tensor_list_entries(std::string_view function_name, uint32_t grid_x, char* bytes, size_t size);

}  // namespace vgpu
