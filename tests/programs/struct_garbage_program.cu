// Launches whose by-value struct carries different garbage every time, as PyTorch's do (issue 23):
// a kernel named like a GEMM takes M, N, K inside a struct followed by entries the host never
// fills (here: random words, their high bit set as most stack garbage's). Run under
// `vgpu-run --backend passthrough --record DB` and then `vgpu-run --backend sim --kernel-db DB`
// (tests/tools/vgpu_run_test.py), every launch of the replay must be found in DB although its
// garbage differs from every recorded launch's. Prints the launches made; exits 1 on an error.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>

struct GemmArgs {
  int m, n, k;
  uint32_t tail[13];
};

__global__ void struct_garbage_gemm(GemmArgs a, float* c) {
  c[threadIdx.x] = static_cast<float>(a.m + a.n + a.k + a.tail[threadIdx.x % 13]);
}

int main() {
  float* c = nullptr;
  // Large enough for a 4096 x 4096 output: the fallback model takes sizes read from a struct
  // only where the launch's buffers could hold the GEMM's matrices.
  if (cudaMalloc(&c, 64 << 20) != cudaSuccess) return std::printf("FAIL cudaMalloc\n"), 1;
  std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ static_cast<unsigned>(std::time(nullptr)));
  int launches = 0;
  for (int dim : {1024, 4096}) {
    for (int i = 0; i < 20; ++i) {
      GemmArgs a{dim, dim, dim, {}};
      for (uint32_t& w : a.tail) w = static_cast<uint32_t>(rng()) | 0x80000000u;
      struct_garbage_gemm<<<8, 128>>>(a, c);
      if (cudaDeviceSynchronize() != cudaSuccess) return std::printf("FAIL launch %d\n", launches), 1;
      ++launches;
    }
  }
  cudaFree(c);
  std::printf("struct garbage launches: %d\n", launches);
  return 0;
}
