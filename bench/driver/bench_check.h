// CHECK(call): a driver call of a benchmark that must succeed; the benchmark stops with the
// call, its place and its code otherwise. And the sim benchmarks' common start.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                  \
  do {                                                                               \
    CUresult r_ = (call);                                                            \
    if (r_ != CUDA_SUCCESS) {                                                        \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, r_); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// cuInit, device 0's primary context made current, and `fatbin`'s add_inplace kernel (the sim
// benchmarks' kernel of vgpu/samples).
inline CUfunction start_with_add_inplace(const char* fatbin) {
  CHECK(cuInit(0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
  CHECK(cuCtxSetCurrent(ctx));
  CUmodule module;
  CHECK(cuModuleLoad(&module, fatbin));
  CUfunction add;
  CHECK(cuModuleGetFunction(&add, module, "add_inplace"));
  return add;
}
