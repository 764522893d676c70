// Every refused call says why, in one line: with VGPU_LOG_LEVEL=warn each error return of the
// driver's entry points (NULL pointers, calls before cuInit, bad event / stream / module /
// function / graph handles) writes exactly one log line. And the calls the real driver refuses
// are refused here too, with its codes: a stack limit of SIZE_MAX, a copy with memory type 77,
// an event recorded on another device's stream, 64 TiB of pinned host memory, a launch
// attribute id no toolkit defines (the last two were undefined behaviour under UBSan).
#include <cuda.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

// Captures this process's stderr (where the log goes) into a file for the test's lifetime.
class StderrCapture {
 public:
  StderrCapture() {
    char path[] = "/tmp/vgpu-error-lines-XXXXXX";
    fd_ = mkstemp(path);
    unlink(path);
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fd_, 2);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    close(fd_);
  }
  // Everything written since the last call.
  std::string take() {
    std::fflush(stderr);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = pread(fd_, buf, sizeof buf, offset_)) > 0; offset_ += n) out.append(buf, n);
    return out;
  }

 private:
  int fd_ = -1, saved_ = -1;
  off_t offset_ = 0;
};

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

struct Case {
  const char* what;
  std::function<CUresult()> call;
};

void expect_one_line_each(StderrCapture& err, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    err.take();
    const CUresult r = c.call();
    const std::string out = err.take();
    EXPECT_NE(r, CUDA_SUCCESS) << c.what;
    EXPECT_EQ(lines(out), 1u) << c.what << " returned " << r << " and logged:\n" << out;
  }
}

void* const kBad = reinterpret_cast<void*>(0x1234);
template <class H> H bad() { return reinterpret_cast<H>(kBad); }

TEST(ErrorLines, EveryErrorReturnLogsOneLineAndTheRealDriversRefusalsAreKept) {
  ASSERT_STREQ(std::getenv("VGPU_LOG_LEVEL"), "warn");
  StderrCapture err;
  CUdevice dev;
  int n;
  CUcontext ctx;
  CUdeviceptr p;
  CUevent e;
  CUstream s;
  CUmodule mod;
  expect_one_line_each(err, {
      {"cuDeviceGet before cuInit", [&] { return cuDeviceGet(&dev, 0); }},
      {"cuDeviceGetCount before cuInit", [&] { return cuDeviceGetCount(&n); }},
      {"cuCtxCreate before cuInit", [&] { return cuCtxCreate(&ctx, nullptr, 0, 0); }},
      {"cuMemAlloc before cuInit", [&] { return cuMemAlloc(&p, 16); }},
      {"cuEventCreate before cuInit", [&] { return cuEventCreate(&e, 0); }},
      {"cuStreamCreate before cuInit", [&] { return cuStreamCreate(&s, 0); }},
      {"cuModuleLoadData before cuInit", [&] { return cuModuleLoadData(&mod, "x"); }},
  });
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  ASSERT_GE(n, 2) << "needs two virtual devices (the default cluster has 8)";
  CUcontext ctx0, ctx1;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx1, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
  CUstream stream1;
  ASSERT_EQ(cuStreamCreate(&stream1, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx0), CUDA_SUCCESS);
  CUevent event0;
  ASSERT_EQ(cuEventCreate(&event0, 0), CUDA_SUCCESS);
  err.take();

  CUfunction f;
  CUgraph g;
  CUgraphExec ge;
  int v;
  size_t free_b, total_b;
  float ms;
  expect_one_line_each(err, {
      // NULL pointers
      {"cuDeviceGet(NULL)", [&] { return cuDeviceGet(nullptr, 0); }},
      {"cuDeviceGetCount(NULL)", [&] { return cuDeviceGetCount(nullptr); }},
      {"cuDeviceGetName(NULL)", [&] { return cuDeviceGetName(nullptr, 16, 0); }},
      {"cuCtxGetCurrent(NULL)", [&] { return cuCtxGetCurrent(nullptr); }},
      {"cuMemAlloc(NULL)", [&] { return cuMemAlloc(nullptr, 16); }},
      {"cuMemGetInfo(NULL)", [&] { return cuMemGetInfo(nullptr, &total_b); }},
      {"cuEventCreate(NULL)", [&] { return cuEventCreate(nullptr, 0); }},
      {"cuStreamCreate(NULL)", [&] { return cuStreamCreate(nullptr, 0); }},
      {"cuModuleLoadData(NULL)", [&] { return cuModuleLoadData(&mod, nullptr); }},
      {"cuModuleGetFunction(NULL)", [&] { return cuModuleGetFunction(nullptr, bad<CUmodule>(), "k"); }},
      {"cuEventElapsedTime(NULL)", [&] { return cuEventElapsedTime(nullptr, event0, event0); }},
      {"cuGraphCreate(NULL)", [&] { return cuGraphCreate(nullptr, 0); }},
      // bad handles
      {"cuEventRecord(bad)", [&] { return cuEventRecord(bad<CUevent>(), nullptr); }},
      {"cuEventQuery(bad)", [&] { return cuEventQuery(bad<CUevent>()); }},
      {"cuEventSynchronize(bad)", [&] { return cuEventSynchronize(bad<CUevent>()); }},
      {"cuEventDestroy(bad)", [&] { return cuEventDestroy(bad<CUevent>()); }},
      {"cuEventElapsedTime(bad)", [&] { return cuEventElapsedTime(&ms, bad<CUevent>(), event0); }},
      {"cuStreamSynchronize(bad)", [&] { return cuStreamSynchronize(bad<CUstream>()); }},
      {"cuStreamQuery(bad)", [&] { return cuStreamQuery(bad<CUstream>()); }},
      {"cuStreamDestroy(bad)", [&] { return cuStreamDestroy(bad<CUstream>()); }},
      {"cuModuleUnload(bad)", [&] { return cuModuleUnload(bad<CUmodule>()); }},
      {"cuModuleGetFunction(bad)", [&] { return cuModuleGetFunction(&f, bad<CUmodule>(), "k"); }},
      {"cuFuncGetAttribute(bad)", [&] { return cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, bad<CUfunction>()); }},
      {"cuLaunchKernel(bad)", [&] { return cuLaunchKernel(bad<CUfunction>(), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr); }},
      {"cuGraphInstantiate(bad)", [&] { return cuGraphInstantiate(&ge, bad<CUgraph>(), 0); }},
      {"cuGraphLaunch(bad)", [&] { return cuGraphLaunch(bad<CUgraphExec>(), nullptr); }},
      {"cuGraphDestroy(bad)", [&] { return cuGraphDestroy(bad<CUgraph>()); }},
      {"cuGraphExecDestroy(bad)", [&] { return cuGraphExecDestroy(bad<CUgraphExec>()); }},
      {"cuMemFree(bad)", [&] { return cuMemFree(0x1234); }},
      {"cuCtxDestroy(bad)", [&] { return cuCtxDestroy(bad<CUcontext>()); }},
  });
  (void)free_b;
  (void)g;

  // The real driver's refusals.
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(lines(err.take()), 1u);
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096), CUDA_SUCCESS);

  std::vector<char> host(256), back(256);
  CUdeviceptr dptr;
  ASSERT_EQ(cuMemAlloc(&dptr, 256), CUDA_SUCCESS);
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = host.data();
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dptr;
  c.WidthInBytes = 256;
  c.Height = 1;
  c.Depth = 1;
  ASSERT_EQ(cuMemcpy3D(&c), CUDA_SUCCESS);
  const int bogus = 77;  // stored as the program would: no enum load of 77 on our side
  std::memcpy(&c.srcMemoryType, &bogus, sizeof bogus);
  err.take();
  EXPECT_EQ(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(lines(err.take()), 1u);
  std::memcpy(&c.dstMemoryType, &bogus, sizeof bogus);
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  EXPECT_EQ(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY2D c2{};
  std::memcpy(&c2.srcMemoryType, &bogus, sizeof bogus);
  c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c2.dstDevice = dptr;
  c2.WidthInBytes = 16;
  c2.Height = 1;
  EXPECT_EQ(cuMemcpy2D(&c2), CUDA_ERROR_INVALID_VALUE);
  err.take();

  EXPECT_EQ(cuEventRecord(event0, stream1), CUDA_ERROR_INVALID_HANDLE);  // device 0 event, device 1 stream
  EXPECT_EQ(lines(err.take()), 1u);
  EXPECT_EQ(cuEventRecord(event0, nullptr), CUDA_SUCCESS);  // its own device's stream

  void* pinned = nullptr;
  EXPECT_EQ(cuMemAllocHost(&pinned, size_t{64} << 40), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(lines(err.take()), 1u);
  EXPECT_EQ(cuMemAllocHost(&pinned, 4096), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);

  CUlaunchAttribute attr{};
  const int unknown_id = 12345;
  std::memcpy(&attr.id, &unknown_id, sizeof unknown_id);
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  err.take();
  EXPECT_EQ(cuLaunchKernelEx(&config, bad<CUfunction>(), nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  const std::string said = err.take();
  EXPECT_EQ(lines(said), 1u);
  EXPECT_NE(said.find("12345"), std::string::npos) << said;

  EXPECT_EQ(cuMemFree(dptr), CUDA_SUCCESS);
  // Answers that are not failures stay silent: a query of unfinished work is NOT_READY, unlogged.
  EXPECT_EQ(lines(err.take()), 0u);
}

}  // namespace
