// Kernel launches of the sim backend against libcuda.so.1: validation, kernelParams and extra,
// CUkernel handles, cuLaunchKernelEx attributes, and durations in virtual time: a launch whose
// signature the kernel-time database holds takes exactly the recorded duration (seen through
// cuEventElapsedTime), pointers are left out of the signature, other parameters are not.
#include <cuda.h>
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "front/launch/kernel_time_db.h"
#include "front/launch/kernel_time_model.h"
#include "front/launch/launch_signature.h"

// The per-thread-default-stream forms, which cuda.h declares only for its own build.
extern "C" {
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra);
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                       void** extra);
CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX,
                                                unsigned int blockDimY, unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream,
                                                void** kernelParams);
}

namespace {

// The driver reads VGPU_KERNEL_DB once, at cuInit: set it before main() runs.
std::string db_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("vgpu_launch_test_" + std::to_string(::getpid()) + ".sqlite"))
          .string();
  return path;
}
const bool kDbSet = [] {
  std::filesystem::remove(db_path());
  ::setenv("VGPU_KERNEL_DB", db_path().c_str(), 1);
  return true;
}();

std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

struct AxpyArgs {
  float a = 2.0f;
  CUdeviceptr x = 0, y = 0;
  int n = 1000;
  void* params[4] = {&a, &x, &y, &n};

  AxpyArgs() = default;
  AxpyArgs(const AxpyArgs& o) : a(o.a), x(o.x), y(o.y), n(o.n) {}  // params point at our own fields
  AxpyArgs& operator=(const AxpyArgs&) = delete;
};

class Launch : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kDbSet);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    const auto image = read_file(KERNELS_FATBIN);
    ASSERT_GT(image.size(), 1000u);
    ASSERT_EQ(cuModuleLoadData(&module_, image.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&axpy_, module_, "axpy"), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc_v2(&args_.x, 4096), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc_v2(&args_.y, 4096), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSynchronize();
    cuMemFree_v2(args_.x);
    cuMemFree_v2(args_.y);
    cuModuleUnload(module_);
    cuDevicePrimaryCtxRelease(0);
  }

  CUresult launch_axpy(AxpyArgs& a, unsigned grid = 64, unsigned block = 256, CUstream s = nullptr) {
    return cuLaunchKernel(axpy_, grid, 1, 1, block, 1, 1, 0, s, a.params, nullptr);
  }

  // The virtual duration of `op` on `stream` (one or more launches on it): the stream is first
  // made busy for seconds (a huge launch), so the op starts exactly when the event before it
  // completes and the events measure nothing but the op.
  template <class Op>
  float measure_op_ms(CUstream stream, Op op) {
    AxpyArgs busy = args_;
    busy.n = 7;
    EXPECT_EQ(launch_axpy(busy, 1u << 30, 1024, stream), CUDA_SUCCESS);
    CUevent e0 = nullptr, e1 = nullptr;
    EXPECT_EQ(cuEventCreate(&e0, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    EXPECT_EQ(cuEventCreate(&e1, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    EXPECT_EQ(cuEventRecord(e0, stream), CUDA_SUCCESS);
    EXPECT_EQ(op(), CUDA_SUCCESS);
    EXPECT_EQ(cuEventRecord(e1, stream), CUDA_SUCCESS);
    EXPECT_EQ(cuEventSynchronize(e1), CUDA_SUCCESS);
    float ms = -1;
    EXPECT_EQ(cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
    cuEventDestroy_v2(e0);
    cuEventDestroy_v2(e1);
    return ms;
  }
  // The virtual duration of launching `axpy` with `a` (grid `grid`, block 256) on `stream`.
  float measure_ms(AxpyArgs& a, CUstream stream, unsigned grid = 64) {
    return measure_op_ms(stream, [&] { return launch_axpy(a, grid, 256, stream); });
  }

  // Records `ns` in the kernel-time database for axpy(grid 64, block 256, a.a, a.n), any
  // pointers: what the passthrough backend does on a GPU. Must come before the driver first
  // looks that signature up (it caches misses too).
  void record_axpy(const AxpyArgs& a, uint64_t ns) {
    vgpu::LaunchShape shape;
    shape.grid = {64, 1, 1};
    shape.block = {256, 1, 1};
    size_t off[4], size[4];
    std::vector<vgpu::ParamSlot> slots;
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_EQ(cuFuncGetParamInfo(axpy_, i, &off[i], &size[i]), CUDA_SUCCESS);
      slots.push_back({static_cast<uint32_t>(off[i]), static_cast<uint32_t>(size[i])});
    }
    std::vector<uint8_t> packed(28);
    for (size_t i = 0; i < 4; ++i) std::memcpy(packed.data() + off[i], a.params[i], size[i]);
    const CUdeviceptr x = a.x, y = a.y;
    const auto sig = vgpu::build_launch_signature("axpy", shape, slots, packed,
                                                  [&](uint64_t v) { return v == x || v == y; });
    char name[256] = {};
    ASSERT_EQ(cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
    vgpu::KernelTimeDb recorder(db_path(), name);
    ASSERT_TRUE(recorder.record(sig, ns));
  }

  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction axpy_ = nullptr;
  AxpyArgs args_;
};

TEST_F(Launch, KernelParamsAndExtra) {
  EXPECT_EQ(launch_axpy(args_), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel_ptsz(axpy_, 1, 1, 1, 32, 1, 1, 0, nullptr, args_.params, nullptr), CUDA_SUCCESS);
  // One packed buffer, laid out as cuFuncGetParamInfo says.
  alignas(8) unsigned char buf[28] = {};
  std::memcpy(buf, &args_.a, 4);
  std::memcpy(buf + 8, &args_.x, 8);
  std::memcpy(buf + 16, &args_.y, 8);
  std::memcpy(buf + 24, &args_.n, 4);
  size_t size = sizeof buf;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(axpy_, 4, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  // Shorter than the declared parameters: accepted as the real driver accepts it (NCCL declares
  // 4 KiB of kernel arguments and passes only what a collective uses); the rest reads as zero.
  size = 20;
  EXPECT_EQ(cuLaunchKernel(axpy_, 4, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  void* no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(axpy_, 4, 1, 1, 128, 1, 1, 0, nullptr, nullptr, no_size), CUDA_ERROR_INVALID_VALUE);
  size = sizeof buf;
  EXPECT_EQ(cuLaunchKernel(axpy_, 4, 1, 1, 128, 1, 1, 0, nullptr, args_.params, extra), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(axpy_, 4, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  void* with_null[4] = {&args_.a, nullptr, &args_.y, &args_.n};
  EXPECT_EQ(cuLaunchKernel(axpy_, 4, 1, 1, 128, 1, 1, 0, nullptr, with_null, nullptr), CUDA_ERROR_INVALID_VALUE);
  // A kernel without parameters needs neither.
  CUfunction none = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&none, module_, "no_params"), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  // A struct by value.
  CUfunction by_struct = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&by_struct, module_, "by_struct"), CUDA_SUCCESS);
  struct { int a; float b; double c; char tag[12]; } p{1, 2, 3, "hello"};
  void* sp[2] = {&p, &args_.y};
  EXPECT_EQ(cuLaunchKernel(by_struct, 1, 1, 1, 32, 1, 1, 0, nullptr, sp, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST_F(Launch, DimensionsAndSharedMemoryAreValidated) {
  EXPECT_EQ(launch_axpy(args_, 0, 256), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(launch_axpy(args_, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(launch_axpy(args_, 1, 2048), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(axpy_, 1, 65536, 1, 32, 1, 1, 0, nullptr, args_.params, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(axpy_, 1, 1, 1, 32, 1, 65, 0, nullptr, args_.params, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(axpy_, 2147483647u, 1, 1, 32, 1, 1, 0, nullptr, args_.params, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(axpy_, 1, 65535, 65535, 1, 1, 64, 0, nullptr, args_.params, nullptr), CUDA_SUCCESS);
  CUfunction bounded = nullptr, dyn = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&bounded, module_, "bounded"), CUDA_SUCCESS);
  void* bp[1] = {&args_.y};
  EXPECT_EQ(cuLaunchKernel(bounded, 1, 1, 1, 128, 1, 1, 0, nullptr, bp, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(bounded, 1, 1, 1, 129, 1, 1, 0, nullptr, bp, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuModuleGetFunction(&dyn, module_, "dynamic_shared"), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(dyn, 1, 1, 1, 128, 1, 1, 49152, nullptr, bp, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(dyn, 1, 1, 1, 128, 1, 1, 65536, nullptr, bp, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuFuncSetAttribute(dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200000), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(dyn, 1, 1, 1, 128, 1, 1, 65536, nullptr, bp, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(dyn, 1, 1, 1, 128, 1, 1, 200001, nullptr, bp, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Launch, BadHandlesAreErrorsNotCrashes) {
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(0xdeadbeef), 1, 1, 1, 1, 1, 1, 0, nullptr, args_.params,
                           nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, args_.params, nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunchKernel(axpy_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(0x5555), args_.params, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  // A function of an unloaded module.
  CUmodule m = nullptr;
  CUfunction f = nullptr;
  const auto image = read_file(KERNELS_CUBIN);
  ASSERT_EQ(cuModuleLoadData(&m, image.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&f, m, "axpy"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args_.params, nullptr), CUDA_ERROR_INVALID_HANDLE);
  // A function of device 0 launched in device 1's context.
  CUcontext ctx1 = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx1, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(axpy_, 1, 1, 1, 1, 1, 1, 0, nullptr, args_.params, nullptr), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  cuDevicePrimaryCtxRelease(1);
}

TEST_F(Launch, LaunchKernelExAttributesAndCooperative) {
  CUlaunchAttribute attrs[2] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[0].value.clusterDim.x = 2;
  attrs[0].value.clusterDim.y = 1;
  attrs[0].value.clusterDim.z = 1;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[1].value.priority = -1;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = 4, cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = 128, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  EXPECT_EQ(cuLaunchKernelEx(&cfg, axpy_, args_.params, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernelEx_ptsz(&cfg, axpy_, args_.params, nullptr), CUDA_SUCCESS);
  attrs[0].value.clusterDim.x = 3;  // does not divide the grid
  EXPECT_EQ(cuLaunchKernelEx(&cfg, axpy_, args_.params, nullptr), CUDA_ERROR_INVALID_CLUSTER_SIZE);
  cfg.attrs = nullptr;
  EXPECT_EQ(cuLaunchKernelEx(&cfg, axpy_, args_.params, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernelEx(nullptr, axpy_, args_.params, nullptr), CUDA_ERROR_INVALID_VALUE);

  // Cooperative: at most (blocks per SM) x (SMs) blocks.
  int per_sm = 0;
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, axpy_, 256, 0), CUDA_SUCCESS);
  const unsigned most = static_cast<unsigned>(per_sm) * 132;
  EXPECT_EQ(cuLaunchCooperativeKernel(axpy_, most, 1, 1, 256, 1, 1, 0, nullptr, args_.params), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchCooperativeKernel(axpy_, most + 1, 1, 1, 256, 1, 1, 0, nullptr, args_.params),
            CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  EXPECT_EQ(cuLaunchCooperativeKernel_ptsz(axpy_, 1, 1, 1, 256, 1, 1, 0, nullptr, args_.params), CUDA_SUCCESS);
  CUlaunchAttribute coop = {};
  coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  coop.value.cooperative = 1;
  cfg.attrs = &coop;
  cfg.numAttrs = 1;
  cfg.gridDimX = most + 1;
  cfg.blockDimX = 256;
  EXPECT_EQ(cuLaunchKernelEx(&cfg, axpy_, args_.params, nullptr), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
}

TEST_F(Launch, KernelHandlesLaunchDirectly) {
  CUlibrary lib = nullptr;
  const auto image = read_file(KERNELS_FATBIN);
  ASSERT_EQ(cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel k = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&k, lib, "axpy"), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(k), 2, 1, 1, 64, 1, 1, 0, nullptr, args_.params, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(k), 2, 1, 1, 64, 1, 1, 0, nullptr, args_.params, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

// The database holds axpy(grid 64, block 256, n = 31337) at 123,456 ns, recorded before any launch
// of that signature (the driver caches misses too). Launches that differ only
// in their pointers take exactly that; one with another n is the same kernel and shape (the
// database's family level: its recorded duration, the model inferring less); another grid takes
// the fallback model's 2.5 us.
TEST_F(Launch, DurationsComeFromTheDatabaseBySignature) {
  args_.n = 31337;
  record_axpy(args_, 123456);
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  EXPECT_NEAR(measure_ms(args_, s), 0.123456, 1e-5);

  AxpyArgs other = args_;  // other buffers, same everything else
  ASSERT_EQ(cuMemAlloc_v2(&other.x, 4096), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc_v2(&other.y, 4096), CUDA_SUCCESS);
  EXPECT_NEAR(measure_ms(other, s), 0.123456, 1e-5);

  AxpyArgs changed = args_;
  changed.n = 31338;  // a value parameter: another signature of the same kernel and shape
  EXPECT_NEAR(measure_ms(changed, s), 0.123456, 1e-5);
  EXPECT_NEAR(measure_ms(changed, s, /*grid=*/32), vgpu::KernelTimeModel::kLaunchFloorS * 1e3, 1e-5);
  cuMemFree_v2(other.x);
  cuMemFree_v2(other.y);
  cuStreamDestroy_v2(s);
}

TEST_F(Launch, ManyThreadsLaunchAtOnce) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      if (cuCtxSetCurrent(ctx_) != CUDA_SUCCESS) {
        ++failures;
        return;
      }
      CUstream s = nullptr;
      if (t % 2 && cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) ++failures;
      AxpyArgs a = args_;
      for (int i = 0; i < 200; ++i) {
        a.n = i;
        if (launch_axpy(a, 1 + i % 8, 128, s) != CUDA_SUCCESS) ++failures;
      }
      if (s) {
        if (cuStreamSynchronize(s) != CUDA_SUCCESS) ++failures;
        cuStreamDestroy_v2(s);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

// A kernel in a graph takes the same virtual time as launched directly: captured from
// cuLaunchKernel and launched twice, and built by hand with cuGraphAddKernelNode. The database
// holds the signature, so every duration is exact.
TEST_F(Launch, GraphKernelNodesTakeTheKernelsDuration) {
  args_.n = 4242;
  record_axpy(args_, 77777);
  const double want_ms = 0.077777;
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  EXPECT_NEAR(measure_ms(args_, s), want_ms, 1e-5);

  // Stream capture of cuLaunchKernel: nothing runs while capturing, one kernel node results.
  CUgraph captured = nullptr;
  ASSERT_EQ(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(launch_axpy(args_, 64, 256, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamEndCapture(s, &captured), CUDA_SUCCESS);
  size_t count = 0;
  ASSERT_EQ(cuGraphGetNodes(captured, nullptr, &count), CUDA_SUCCESS);
  ASSERT_EQ(count, 1u);
  CUgraphNode node = nullptr;
  ASSERT_EQ(cuGraphGetNodes(captured, &node, &count), CUDA_SUCCESS);
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  ASSERT_EQ(cuGraphNodeGetType(node, &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, captured, 0), CUDA_SUCCESS);
  EXPECT_NEAR(measure_op_ms(s, [&] { return cuGraphLaunch(exec, s); }), want_ms, 1e-5);
  // Launched twice in a row: twice the kernel, back to back.
  EXPECT_NEAR(measure_op_ms(s, [&] {
                CUresult r = cuGraphLaunch(exec, s);
                return r == CUDA_SUCCESS ? cuGraphLaunch(exec, s) : r;
              }),
              2 * want_ms, 1e-5);

  // Built by hand: a chain of two kernel nodes takes twice the kernel.
  CUgraph built = nullptr;
  ASSERT_EQ(cuGraphCreate(&built, 0), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS p = {};
  p.func = axpy_;
  p.gridDimX = 64, p.gridDimY = 1, p.gridDimZ = 1;
  p.blockDimX = 256, p.blockDimY = 1, p.blockDimZ = 1;
  p.kernelParams = args_.params;
  CUgraphNode first = nullptr, second = nullptr;
  ASSERT_EQ(cuGraphAddKernelNode(&first, built, nullptr, 0, &p), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphNodeGetType(first, &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
  CUgraphExec one = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&one, built, 0), CUDA_SUCCESS);
  EXPECT_NEAR(measure_op_ms(s, [&] { return cuGraphLaunch(one, s); }), want_ms, 1e-5);
  ASSERT_EQ(cuGraphAddKernelNode(&second, built, &first, 1, &p), CUDA_SUCCESS);
  CUgraphExec two = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&two, built, 0), CUDA_SUCCESS);
  EXPECT_NEAR(measure_op_ms(s, [&] { return cuGraphLaunch(two, s); }), 2 * want_ms, 1e-5);
  // The same two launches directly.
  EXPECT_NEAR(measure_op_ms(s, [&] {
                CUresult r = launch_axpy(args_, 64, 256, s);
                return r == CUDA_SUCCESS ? launch_axpy(args_, 64, 256, s) : r;
              }),
              2 * want_ms, 1e-5);

  // Bad kernel node parameters are refused and add nothing.
  CUgraphNode bad = nullptr;
  CUDA_KERNEL_NODE_PARAMS wrong = p;
  wrong.blockDimX = 4096;
  EXPECT_EQ(cuGraphAddKernelNode(&bad, built, nullptr, 0, &wrong), CUDA_ERROR_INVALID_VALUE);
  wrong = p;
  wrong.func = reinterpret_cast<CUfunction>(0x1234);
  EXPECT_EQ(cuGraphAddKernelNode(&bad, built, nullptr, 0, &wrong), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuGraphAddKernelNode(&bad, built, nullptr, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuGraphGetNodes(built, nullptr, &count), CUDA_SUCCESS);
  EXPECT_EQ(count, 2u);

  EXPECT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  for (CUgraphExec e : {exec, one, two}) EXPECT_EQ(cuGraphExecDestroy(e), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(captured), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(built), CUDA_SUCCESS);
  cuStreamDestroy_v2(s);
}

// A kernel node's launch read back (cuGraphKernelNodeGetParams): the function, shape and a copy of
// the arguments it was captured or added with, on the graph's node and its clone's alike; set again
// on an instantiated graph (cuGraphExecKernelNodeSetParams), the node takes the kernel's time as
// before. Other nodes have no kernel parameters.
TEST_F(Launch, GraphKernelNodeParamsReadBack) {
  args_.n = 4343;
  record_axpy(args_, 66666);
  const double want_ms = 0.066666;
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUgraph captured = nullptr;
  ASSERT_EQ(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(launch_axpy(args_, 64, 256, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8Async(args_.x, 0, 16, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamEndCapture(s, &captured), CUDA_SUCCESS);
  CUgraph clone = nullptr;
  ASSERT_EQ(cuGraphClone(&clone, captured), CUDA_SUCCESS);
  for (CUgraph g : {captured, clone}) {
    size_t count = 2;
    CUgraphNode nodes[2] = {};
    ASSERT_EQ(cuGraphGetNodes(g, nodes, &count), CUDA_SUCCESS);
    ASSERT_EQ(count, 2u);
    CUDA_KERNEL_NODE_PARAMS p = {};
    ASSERT_EQ(cuGraphKernelNodeGetParams_v2(nodes[0], &p), CUDA_SUCCESS);
    EXPECT_EQ(p.func, axpy_);
    EXPECT_EQ(p.gridDimX, 64u);
    EXPECT_EQ(p.gridDimY, 1u);
    EXPECT_EQ(p.blockDimX, 256u);
    EXPECT_EQ(p.sharedMemBytes, 0u);
    ASSERT_NE(p.kernelParams, nullptr);
    EXPECT_EQ(*static_cast<float*>(p.kernelParams[0]), args_.a);
    EXPECT_EQ(*static_cast<CUdeviceptr*>(p.kernelParams[1]), args_.x);
    EXPECT_EQ(*static_cast<CUdeviceptr*>(p.kernelParams[2]), args_.y);
    EXPECT_EQ(*static_cast<int*>(p.kernelParams[3]), 4343);
    EXPECT_EQ(cuGraphKernelNodeGetParams_v2(nodes[1], &p), CUDA_ERROR_INVALID_VALUE);  // the memset
    // The parameters read back, set again: the same kernel, for the same time.
    CUgraphExec exec = nullptr;
    ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphKernelNodeGetParams_v2(nodes[0], &p), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphExecKernelNodeSetParams_v2(exec, nodes[0], &p), CUDA_SUCCESS);
    EXPECT_NEAR(measure_op_ms(s, [&] { return cuGraphLaunch(exec, s); }),
                want_ms + measure_op_ms(s, [&] { return cuMemsetD8Async(args_.x, 0, 16, s); }), 1e-5);
    EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  }
  // A node added by hand reads back what it was given.
  CUgraph built = nullptr;
  ASSERT_EQ(cuGraphCreate(&built, 0), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS given = {};
  given.func = axpy_;
  given.gridDimX = 32, given.gridDimY = 2, given.gridDimZ = 1;
  given.blockDimX = 128, given.blockDimY = 1, given.blockDimZ = 1;
  given.kernelParams = args_.params;
  CUgraphNode added = nullptr;
  ASSERT_EQ(cuGraphAddKernelNode_v2(&added, built, nullptr, 0, &given), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS got = {};
  ASSERT_EQ(cuGraphKernelNodeGetParams_v2(added, &got), CUDA_SUCCESS);
  EXPECT_EQ(got.gridDimX, 32u);
  EXPECT_EQ(got.gridDimY, 2u);
  EXPECT_EQ(got.blockDimX, 128u);
  EXPECT_EQ(*static_cast<int*>(got.kernelParams[3]), 4343);
  EXPECT_NE(got.kernelParams, given.kernelParams);  // the driver's copy
  EXPECT_EQ(cuGraphKernelNodeGetParams_v2(added, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  for (CUgraph g : {captured, clone, built}) EXPECT_EQ(cuGraphDestroy(g), CUDA_SUCCESS);
  cuStreamDestroy_v2(s);
}

// cuGraphExecUpdate: an instantiated graph takes the nodes of a graph of the same topology (its
// kernel, captured with other arguments, then takes the time recorded for those), and refuses one
// whose topology or node types differ, changing nothing.
TEST_F(Launch, GraphExecUpdateTakesTheNewNodes) {
  AxpyArgs other = args_;
  args_.n = 4545;
  other.n = 4646;
  record_axpy(args_, 44444);
  record_axpy(other, 88888);
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  auto capture = [&](auto launches) {
    CUgraph g = nullptr;
    EXPECT_EQ(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    launches();
    EXPECT_EQ(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    return g;
  };
  CUgraph first = capture([&] { EXPECT_EQ(launch_axpy(args_, 64, 256, s), CUDA_SUCCESS); });
  CUgraph second = capture([&] { EXPECT_EQ(launch_axpy(other, 64, 256, s), CUDA_SUCCESS); });
  CUgraph two = capture([&] {
    EXPECT_EQ(launch_axpy(other, 64, 256, s), CUDA_SUCCESS);
    EXPECT_EQ(launch_axpy(other, 64, 256, s), CUDA_SUCCESS);
  });
  CUgraph memset = capture([&] { EXPECT_EQ(cuMemsetD8Async(args_.x, 0, 16, s), CUDA_SUCCESS); });
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, first, 0), CUDA_SUCCESS);
  EXPECT_NEAR(measure_op_ms(s, [&] { return cuGraphLaunch(exec, s); }), 0.044444, 1e-5);
  CUgraphExecUpdateResultInfo info{};
  EXPECT_EQ(cuGraphExecUpdate_v2(exec, two, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  EXPECT_EQ(cuGraphExecUpdate_v2(exec, memset, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  EXPECT_NE(info.errorNode, nullptr);
  EXPECT_NEAR(measure_op_ms(s, [&] { return cuGraphLaunch(exec, s); }), 0.044444, 1e-5);  // unchanged
  EXPECT_EQ(cuGraphExecUpdate_v2(exec, second, &info), CUDA_SUCCESS);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  EXPECT_NEAR(measure_op_ms(s, [&] { return cuGraphLaunch(exec, s); }), 0.088888, 1e-5);
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  for (CUgraph g : {first, second, two, memset}) EXPECT_EQ(cuGraphDestroy(g), CUDA_SUCCESS);
  cuStreamDestroy_v2(s);
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The time vgpu spends inside a call is not charged to the calling thread's virtual clock:
// loading and unloading modules in a loop (CPU work inside the driver, next to nothing outside
// it) moves the clock by far less than the CPU time the loop took.
TEST_F(Launch, TimeInsideTheDriverIsNotCharged) {
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent e0 = nullptr, e1 = nullptr;
  ASSERT_EQ(cuEventCreate(&e0, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&e1, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  const auto image = read_file(KERNELS_FATBIN);
  ASSERT_EQ(cuEventRecord(e0, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(e0), CUDA_SUCCESS);
  const double cpu0 = thread_cpu_s();
  int loads = 0;
  while (thread_cpu_s() - cpu0 < 0.05) {
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    ASSERT_EQ(cuModuleLoadData(&m, image.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&f, m, "axpy"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
    ++loads;
  }
  const double cpu_ms = (thread_cpu_s() - cpu0) * 1e3;
  ASSERT_EQ(cuEventRecord(e1, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(e1), CUDA_SUCCESS);
  float virtual_ms = -1;
  ASSERT_EQ(cuEventElapsedTime(&virtual_ms, e0, e1), CUDA_SUCCESS);
  std::printf("%d module loads: %.2f ms of CPU, %.3f ms of virtual time\n", loads, cpu_ms, virtual_ms);
  EXPECT_GE(virtual_ms, 0.0f);
  EXPECT_LT(virtual_ms, cpu_ms / 4);
  cuEventDestroy_v2(e0);
  cuEventDestroy_v2(e1);
  cuStreamDestroy_v2(s);
}

// The same for the memory entry points: allocating, filling and freeing 64 MiB costs real CPU
// time inside the driver (the copy's page faults, the unmapping at free), while in virtual time
// only the copy takes time (its PCIe transfer). The thread's clock moves by the copies' virtual
// durations alone, not by the CPU time the calls took.
TEST_F(Launch, TimeInsideMemoryCallsIsNotCharged) {
  constexpr size_t kBytes = 64 << 20;
  constexpr int kRounds = 8;
  static std::vector<unsigned char> host(kBytes, 7);
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);  // blocking: ordered with the legacy stream
  CUevent e0 = nullptr, e1 = nullptr;
  ASSERT_EQ(cuEventCreate(&e0, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&e1, CU_EVENT_DEFAULT), CUDA_SUCCESS);

  // One copy's virtual duration, measured alone on the stream: the least of three, since the
  // host's time between the first event and the copy's submission also lies between the events
  // (a loaded machine under TSan once made one read 2.1 ms against 1.3 ms).
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc_v2(&d, kBytes), CUDA_SUCCESS);
  float copy_ms = -1;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cuEventRecord(e0, s), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoDAsync_v2(d, host.data(), kBytes, s), CUDA_SUCCESS);
    ASSERT_EQ(cuEventRecord(e1, s), CUDA_SUCCESS);
    ASSERT_EQ(cuEventSynchronize(e1), CUDA_SUCCESS);
    float one = -1;
    ASSERT_EQ(cuEventElapsedTime(&one, e0, e1), CUDA_SUCCESS);
    copy_ms = copy_ms < 0 ? one : std::min(copy_ms, one);
  }
  ASSERT_EQ(cuMemFree_v2(d), CUDA_SUCCESS);
  ASSERT_GT(copy_ms, 0.5f);  // 64 MiB over PCIe: about a millisecond

  ASSERT_EQ(cuEventRecord(e0, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(e0), CUDA_SUCCESS);
  // CPU time of the calls around the copies: each copy's own work runs inside the stream's
  // submission, but allocating and above all freeing (giving 64 MiB of touched pages back to
  // the kernel) run in the memory entry points alone.
  double around_s = 0;
  for (int i = 0; i < kRounds; ++i) {
    double t = thread_cpu_s();
    ASSERT_EQ(cuMemAlloc_v2(&d, kBytes), CUDA_SUCCESS);
    around_s += thread_cpu_s() - t;
    ASSERT_EQ(cuMemcpyHtoD_v2(d, host.data(), kBytes), CUDA_SUCCESS);  // synchronous
    t = thread_cpu_s();
    ASSERT_EQ(cuMemFree_v2(d), CUDA_SUCCESS);
    around_s += thread_cpu_s() - t;
  }
  ASSERT_EQ(cuEventRecord(e1, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(e1), CUDA_SUCCESS);
  float virtual_ms = -1;
  ASSERT_EQ(cuEventElapsedTime(&virtual_ms, e0, e1), CUDA_SUCCESS);
  const double around_ms = around_s * 1e3;
  const double charged_ms = virtual_ms - kRounds * copy_ms;
  std::printf("%d x (alloc, copy, free) of 64 MiB: copies %.3f ms virtual, alloc+free %.2f ms of "
              "CPU, virtual time %.3f ms: %.3f ms beyond the copies\n",
              kRounds, kRounds * copy_ms, around_ms, virtual_ms, charged_ms);
  EXPECT_GE(charged_ms, -0.01 * kRounds * copy_ms);
  // Without the scopes, the CPU time of alloc and free would be charged in full.
  EXPECT_GT(around_ms, 1.0);  // the check below means something
  EXPECT_LT(charged_ms, around_ms / 4);
  cuEventDestroy_v2(e0);
  cuEventDestroy_v2(e1);
  cuStreamDestroy_v2(s);
}

}  // namespace
