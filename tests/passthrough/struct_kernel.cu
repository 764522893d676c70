// A kernel that takes its sizes inside a struct passed by value, followed by entries the host
// fills only in part, as PyTorch's TensorIterator kernels and cuBLAS do. Its name says "gemm" so
// that the stand-in GPU (the sim backend's fallback model) times it by the M, N, K it reads from
// the struct: a size change changes its duration, garbage in the tail does not.
#include <cstdint>

struct GemmArgs {
  int m, n, k;
  uint32_t tail[13];
};

extern "C" __global__ void struct_gemm(GemmArgs a, float* c) {
  c[threadIdx.x] = static_cast<float>(a.m + a.n + a.k + a.tail[threadIdx.x % 13]);
}
