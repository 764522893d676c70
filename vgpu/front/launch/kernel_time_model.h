// The fallback kernel-time model: the duration of a launch whose signature the kernel-time
// database does not hold, estimated from the virtual GPU's figures. It cannot know what a kernel
// does, so it assumes a simple elementwise kernel (one item per thread, or per element of a
// grid-stride loop, a few bytes moved and a few FLOPs each) and never answers less than the
// launch floor. Every answer is a roofline bound of the work it infers: never shorter than
// flops / peak compute nor bytes / memory bandwidth, so no fallback duration beats the hardware.
//
//   items    = max(threads, n)   threads = grid.x*grid.y*grid.z * block.x*block.y*block.z;
//                                n = the largest integer parameter that the launch's buffers can
//                                hold as elements of at least one byte (LaunchHints), below
//                                kMaxElementCount (a float scalar reads as more): the
//                                element count of a grid-stride loop, which runs far fewer
//                                threads than elements
//   duration = max(kLaunchFloorS,
//                  items * kBytesPerThread / memory_bw,
//                  items * kFlopsPerThread / fp32_flops)
//
// GEMM refinement: when the kernel name contains "gemm", "matmul", "wmma" or "hmma" (any case)
// and the launch has at least three positive non-pointer integer parameters (4 or 8 bytes) no
// larger than kMaxGemmDim, the first three are taken as M, N, K and
//
//   flops    = 2*M*N*K,   bytes = elem * (M*K + K*N + M*N)
//   duration = max(kLaunchFloorS, flops / (rate * kGemmEfficiency), bytes / memory_bw)
//
// where rate/elem are bf16_tensor_flops/2 bytes when the name mentions bf16, fp16, half, hgemm,
// wmma or hmma (tensor-core fragments); tf32_tensor_flops/4 when it mentions tf32;
// fp32_flops/4 otherwise.
// FFT refinement: a cuFFT kernel (its mangled name carries EPT<n>, the elements each thread
// handles) moves threads * n complex elements in and out: threads * n * 16 bytes (32 in double
// precision) at the memory bandwidth, or its FLOPs at 32 a element, or the floor.
// Sizes found in a parameter struct count only where at least two of the GEMM's three matrices
// fit in the launch's buffers (LaunchHints::fits_in_a_buffer; see struct_gemm_volume).
// A figure of the model that is 0 (unknown) drops its term.
#pragma once

#include <cstdint>
#include <functional>

#include "front/launch/launch_signature.h"

namespace vgpu {

struct GpuFigures {
  double memory_bw = 0;          // bytes/s
  double fp32_flops = 0;         // FLOP/s
  double tf32_tensor_flops = 0;  // FLOP/s
  double bf16_tensor_flops = 0;  // FLOP/s
};

// What the launch path knows beyond the signature (which leaves pointers out).
struct LaunchHints {
  // Whether `bytes` bytes from one of the launch's pointer parameters on lie inside one
  // allocation. Empty: no integer parameter is taken as an element count.
  std::function<bool(uint64_t bytes)> fits_in_a_buffer;
  // The launch's signature with only device pointers left out: what its parameters hold. The
  // signature proper also masks whatever looks like a host address, and two 32-bit sizes side
  // by side can (a sanitizer's shadow memory covers such values): the sizes of a library GEMM's
  // parameter struct are read from this one. Empty: from the signature.
  std::function<LaunchSignature()> unmasked;
};

struct KernelTimeModel {
  static constexpr double kLaunchFloorS = 2.5e-6;  // a launch of an empty kernel, end to end
  static constexpr double kBytesPerThread = 16;     // one 8-byte load and one 8-byte store
  static constexpr double kFlopsPerThread = 32;
  static constexpr double kGemmEfficiency = 0.7;    // fraction of peak a good GEMM reaches
  static constexpr int64_t kMaxGemmDim = int64_t{1} << 20;
  // The signature's integers include float scalars read as integers: every float of magnitude
  // 5e-10 to 1e10 (1.0f is 1,065,353,216) reads as 805,306,368 or more, so no larger value is
  // taken as an element count.
  static constexpr int64_t kMaxElementCount = 0x30000000;

  // The estimate in seconds.
  static double estimate(const GpuFigures& gpu, const LaunchSignature& signature,
                         const LaunchHints& hints = {});
};

}  // namespace vgpu
