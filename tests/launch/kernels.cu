// Kernels for the launch tests: loaded as a cubin, a fat binary and PTX. Nothing executes them
// (the sim backend only reads the image); what matters is their parameter layout, resources and
// globals.
#include <cstdint>

struct Params {
  int a;
  float b;
  double c;
  char tag[12];
};

__device__ int g_counter = 42;
__device__ float g_array[256];
__constant__ float c_table[4] = {1.5f, 2.5f, 3.5f, 4.5f};

extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] + c_table[i & 3] + g_counter;
}

extern "C" __global__ void by_struct(Params p, float* out) {
  out[threadIdx.x] = p.a + p.b + static_cast<float>(p.c) + p.tag[threadIdx.x % 12];
}

extern "C" __global__ void no_params() {}

extern "C" __global__ void __launch_bounds__(128) bounded(int* out) { out[threadIdx.x] = 1; }

extern "C" __global__ void static_shared(float* out, int n) {
  __shared__ float buf[2048];  // 8 KiB
  buf[threadIdx.x] = out[threadIdx.x];
  __syncthreads();
  if (threadIdx.x < n) out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x] + g_array[threadIdx.x];
}

extern "C" __global__ void dynamic_shared(float* out) {
  extern __shared__ float s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void sgemm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  float acc = 0;
  for (int k = 0; k < K; ++k) acc += A[r * K + k] * B[k * N + c];
  C[r * N + c] = acc;
}

extern "C" __global__ void mixed(char c, int64_t big, short s, double d, void* p) {
  if (p) *static_cast<double*>(p) = c + big + s + d;
}

template <typename T>
__global__ void fill(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
template __global__ void fill<float>(float*, float, int);
template __global__ void fill<double>(double*, double, int);
