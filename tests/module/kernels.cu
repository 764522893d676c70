// Test kernels for the module image parser. Every expectation in the tests follows from the
// declarations here (the CUDA ABI places each parameter at its natural alignment).
#include <cstdint>

struct alignas(16) Padded { float a[3]; double d; int i; };  // 32 bytes, align 16
struct Small { char c; short s; };                            // 4 bytes, align 2
struct Arr5 { int v[5]; };                                    // 20 bytes, align 4
struct Huge { char c[20000]; };                               // past the 14-bit KPARAM_INFO size

__constant__ float c_scale[4] = {1.0f, 2.0f, 3.0f, 4.0f};
__constant__ int c_table[64];
__device__ int d_counter = 42;
__device__ double d_table[8];
__device__ unsigned long long d_big[3] = {1ull, 0x1122334455667788ull, 3ull};
__managed__ int m_value = 7;

__device__ __noinline__ int helper(int x) { return x * d_counter + m_value; }

extern "C" __global__ void k_noparams() {}

extern "C" __global__ void k_axpy(float a, const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] * c_scale[i & 3] + y[i] + c_table[i & 63];
}

extern "C" __global__ void k_struct(char c, Padded b, Small s, long long* out) {
  out[0] = c + b.a[0] + b.a[2] + b.d + b.i + s.c + s.s + helper(threadIdx.x) + d_table[3];
}

extern "C" __global__ void k_array(Arr5 a, int* out) { out[0] = a.v[0] + a.v[4] + (int)d_big[1]; }

extern "C" __global__ void k_huge(Huge h, int* out) { out[threadIdx.x] = h.c[threadIdx.x] + h.c[19999]; }

extern "C" __global__ void k_int_types(int8_t a, int16_t b, int64_t c, double d, uint8_t e, long long* out) {
  out[0] = a + b + c + (long long)d + e;
}

template <typename T, int N>
__global__ void k_tmpl(T* p, T v) {
  __shared__ T buf[N];
  buf[threadIdx.x % N] = v;
  __syncthreads();
  p[threadIdx.x] = buf[(threadIdx.x + 1) % N];
}
template __global__ void k_tmpl<float, 64>(float*, float);
template __global__ void k_tmpl<double, 128>(double*, double);

extern "C" __global__ void k_dynshared(int* out) {
  extern __shared__ int dyn[];
  dyn[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void __launch_bounds__(256, 2) k_bounded(float* p) { p[threadIdx.x] *= 2.0f; }
