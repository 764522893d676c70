// Gated measurements give back what the gate adds (passthrough/gate_latency.h). The "real driver"
// here (late_gate_overrides.cpp over the sim) starts the work behind a stream wait 20 us late (a
// real GPU: about 4 us); a kernel measured alone must still take the duration it has when queued
// behind other work, which the same driver reports exactly.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

float real_ms(CUevent a, CUevent b) {
  using ElapsedFn = CUresult (*)(float*, CUevent, CUevent);
  static ElapsedFn fn = [] {
    void* lib = dlopen(std::getenv("VGPU_REAL_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
    return lib ? reinterpret_cast<ElapsedFn>(dlsym(lib, "cuEventElapsedTime")) : nullptr;
  }();
  float ms = -1;
  EXPECT_NE(fn, nullptr);
  if (fn) EXPECT_EQ(fn(&ms, a, b), CUDA_SUCCESS);
  return ms;
}

TEST(GateLatency, KernelsMeasuredAloneTakeTheirDurationBehindOtherWork) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // The sim standing in for the GPU times the calibration's empty kernels from the host's CPU
  // time between its calls, which a sanitizer on a loaded machine makes 50-100 us (TSan read a
  // calibration of 96.9 us, an empty kernel 18.6 us back to back; CI's ASan run over-corrected
  // the same way): what is checked then is the stand-in, not vgpu. The plain build checks it;
  // the sanitized builds still run the calibration's code in every other passthrough test.
  GTEST_SKIP() << "the stand-in GPU's timing follows the host's CPU time, which sanitizers inflate";
#endif
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  std::ifstream in(KERNELS_FATBIN, std::ios::binary);
  std::vector<char> image{std::istreambuf_iterator<char>(in), {}};
  CUmodule module;
  CUfunction axpy;
  ASSERT_EQ(cuModuleLoadData(&module, image.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&axpy, module, "axpy"), CUDA_SUCCESS);
  CUdeviceptr x, y;
  ASSERT_EQ(cuMemAlloc(&x, 256 << 20), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&y, 256 << 20), CUDA_SUCCESS);
  float a = 2;
  int n = 64 * 256;  // ~3 us in the sim's model
  void* params[] = {&a, &x, &y, &n};
  auto launch = [&] {
    ASSERT_EQ(cuLaunchKernel(axpy, 64, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  };
  for (int i = 0; i < 4; ++i) {  // measured (gated from the second on) until settled
    launch();
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  }
  CUevent e0, e1;
  ASSERT_EQ(cuEventCreate(&e0, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&e1, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  // Busy work ahead (an axpy of 64M elements, ~0.3 ms each in the sim's model, far more than a
  // launch costs the host even under TSan), settled first so that it queues without waiting: the
  // eight launches after e0 then start as their op before ends, not at the host's clock, on both
  // the real and the virtual timeline.
  int big = 1 << 26;
  void* big_params[] = {&a, &x, &y, &big};
  auto launch_big = [&] {
    ASSERT_EQ(cuLaunchKernel(axpy, static_cast<unsigned>(big / 256), 1, 1, 256, 1, 1, 0, nullptr, big_params, nullptr),
              CUDA_SUCCESS);
  };
  for (int i = 0; i < 4; ++i) {
    launch_big();
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  }
  for (int i = 0; i < 40; ++i) launch_big();
  ASSERT_EQ(cuEventRecord(e0, nullptr), CUDA_SUCCESS);
  for (int i = 0; i < 8; ++i) launch();
  ASSERT_EQ(cuEventRecord(e1, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(e1), CUDA_SUCCESS);
  float virtual_ms = -1;
  ASSERT_EQ(cuEventElapsedTime(&virtual_ms, e0, e1), CUDA_SUCCESS);
  const float real = real_ms(e0, e1);  // eight launches queued behind work: no late start in it
  ASSERT_GT(real, 0);
  // Without the calibration each launch would read 20 us long: 0.16 ms over the eight. With it,
  // what is left is the host time the sim lets into a gated measurement (a few us per launch),
  // and never less than the launches take.
  EXPECT_LT(virtual_ms - real, 8 * 0.01f) << "virtual " << virtual_ms << " ms, real " << real << " ms";
  EXPECT_GT(virtual_ms, real * 0.99f) << "virtual " << virtual_ms << " ms, real " << real << " ms";
  cuEventDestroy(e0);
  cuEventDestroy(e1);
  cuMemFree(x);
  cuMemFree(y);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(0);
}

}  // namespace
