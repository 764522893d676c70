// The fallback kernel-time model: the duration of a launch whose signature the kernel-time
// database does not hold, estimated from the virtual GPU's figures. It cannot know what a kernel
// does, so it assumes a simple elementwise kernel (one thread per element, a few bytes moved and a
// few FLOPs each) and never answers less than the launch floor:
//
//   threads  = grid.x*grid.y*grid.z * block.x*block.y*block.z
//   duration = max(kLaunchFloorS,
//                  threads * kBytesPerThread / memory_bw,
//                  threads * kFlopsPerThread / fp32_flops)
//
// GEMM refinement: when the kernel name contains "gemm" or "matmul" (any case) and the launch
// has at least three positive non-pointer integer parameters (4 or 8 bytes) no larger than
// kMaxGemmDim, the first three are taken as M, N, K and
//
//   flops    = 2*M*N*K,   bytes = elem * (M*K + K*N + M*N)
//   duration = max(kLaunchFloorS, flops / (rate * kGemmEfficiency), bytes / memory_bw)
//
// where rate/elem are bf16_tensor_flops/2 bytes when the name mentions bf16, fp16, half or
// hgemm; tf32_tensor_flops/4 when it mentions tf32; fp32_flops/4 otherwise.
// A figure of the model that is 0 (unknown) drops its term.
#pragma once

#include <cstdint>

#include "exec/launch_signature.h"

namespace vgpu {

struct GpuFigures {
  double memory_bw = 0;          // bytes/s
  double fp32_flops = 0;         // FLOP/s
  double tf32_tensor_flops = 0;  // FLOP/s
  double bf16_tensor_flops = 0;  // FLOP/s
};

struct KernelTimeModel {
  static constexpr double kLaunchFloorS = 2.5e-6;  // a launch of an empty kernel, end to end
  static constexpr double kBytesPerThread = 16;     // one 8-byte load and one 8-byte store
  static constexpr double kFlopsPerThread = 32;
  static constexpr double kGemmEfficiency = 0.7;    // fraction of peak a good GEMM reaches
  static constexpr int64_t kMaxGemmDim = int64_t{1} << 20;

  // The estimate in seconds.
  static double estimate(const GpuFigures& gpu, const LaunchSignature& signature);
};

}  // namespace vgpu
