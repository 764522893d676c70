// CHECK(call): a driver call of a benchmark that must succeed; the benchmark stops with the
// call, its place and its code otherwise.
#pragma once

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
