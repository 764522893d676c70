// CHECK_CUDA / CHECK_NCCL for the NCCL test programs whose functions return an exit status: a
// failed call prints one "FAIL <call> -> <error name>" line (what the run_*.py scripts look for)
// and returns 1 from the calling function.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

#define CHECK_CUDA(x)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("FAIL %s -> %s\n", #x, cudaGetErrorName(e_));                             \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)
#define CHECK_NCCL(x)                                                                       \
  do {                                                                                      \
    ncclResult_t r_ = (x);                                                                  \
    if (r_ != ncclSuccess) {                                                                \
      std::printf("FAIL %s -> %s\n", #x, ncclGetErrorString(r_));                           \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)
