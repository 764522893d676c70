// A rank's view of contexts, run on the passthrough with VGPU_LAZY_CONTEXTS=1 by
// lazy_contexts_check.py: cudart asks for the primary context of every device at start-up, and
// the program then works on the devices named on its command line only (one, as a rank of a
// data-parallel job, or two with a peer copy between them). The checker counts the real
// contexts vgpu made (one log line each): one per device used, not one per device.
//
// Every handle the program sees for a device's primary context must be one and the same, from
// whichever call it comes (retain, current, pop, a stream's, a pointer's, a kernel node's), and
// every handle it passes back must work (set current, push, peer copy, synchronize, graph nodes).
// Each check prints one line; the exit status is the number of failed checks. Usage:
// lazy_contexts_program [--results] DEVICE [DEVICE]  (--results: on a GPU, also check what the
// kernels computed).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int g_failures = 0;
bool g_results = false;  // --results: check what kernels computed (a GPU; the sim runs no kernel code)

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

bool rt(cudaError_t e, const std::string& what) {
  check(e == cudaSuccess, what + " -> " + cudaGetErrorName(e));
  return e == cudaSuccess;
}

bool drv(CUresult r, const std::string& what) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  check(r == CUDA_SUCCESS, what + " -> " + (name ? name : std::to_string(r)));
  return r == CUDA_SUCCESS;
}

__global__ void add_one(int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

// One device used as a rank uses it; its primary context's handle, as cudart and the driver
// show it, must be the same everywhere.
CUcontext use_device(int d) {
  const std::string tag = "device " + std::to_string(d) + ": ";
  if (!rt(cudaSetDevice(d), tag + "cudaSetDevice")) return nullptr;
  constexpr int n = 1 << 16;
  int* x = nullptr;
  if (!rt(cudaMalloc(&x, n * sizeof(int)), tag + "cudaMalloc")) return nullptr;
  std::vector<int> host(n, 41);
  rt(cudaMemcpy(x, host.data(), n * sizeof(int), cudaMemcpyHostToDevice), tag + "copy in");
  cudaStream_t s;
  rt(cudaStreamCreate(&s), tag + "cudaStreamCreate");
  add_one<<<n / 256, 256, 0, s>>>(x, n);
  rt(cudaGetLastError(), tag + "launch");
  rt(cudaStreamSynchronize(s), tag + "cudaStreamSynchronize");
  rt(cudaMemcpy(host.data(), x, n * sizeof(int), cudaMemcpyDeviceToHost), tag + "copy out");
  if (g_results) check(host[0] == 42 && host[n - 1] == 42, tag + "the kernel ran");

  CUcontext current = nullptr, retained = nullptr, of_stream = nullptr, of_pointer = nullptr, popped = nullptr;
  drv(cuCtxGetCurrent(&current), tag + "cuCtxGetCurrent");
  drv(cuDevicePrimaryCtxRetain(&retained, d), tag + "cuDevicePrimaryCtxRetain");
  check(current != nullptr && current == retained, tag + "the current context is the device's primary context");
  drv(cuStreamGetCtx(reinterpret_cast<CUstream>(s), &of_stream), tag + "cuStreamGetCtx");
  check(of_stream == retained, tag + "a stream's context is the primary context");
  drv(cuPointerGetAttribute(&of_pointer, CU_POINTER_ATTRIBUTE_CONTEXT, reinterpret_cast<CUdeviceptr>(x)),
      tag + "cuPointerGetAttribute(CONTEXT)");
  check(of_pointer == retained, tag + "an allocation's context is the primary context");
  CUdevice dev = -1;
  drv(cuCtxGetDevice_v2(&dev, retained), tag + "cuCtxGetDevice_v2");
  check(dev == d, tag + "the primary context's device is " + std::to_string(dev));
  unsigned version = 0;
  drv(cuCtxGetApiVersion(retained, &version), tag + "cuCtxGetApiVersion");
  check(version > 0, tag + "the primary context has an API version");
  drv(cuCtxPushCurrent(retained), tag + "cuCtxPushCurrent");
  drv(cuCtxPopCurrent(&popped), tag + "cuCtxPopCurrent");
  check(popped == retained, tag + "the context popped is the one pushed");
  drv(cuCtxSynchronize_v2(retained), tag + "cuCtxSynchronize_v2 of the primary context");
  check(cuCtxDestroy(retained) == CUDA_ERROR_INVALID_CONTEXT, tag + "the primary context is not the program's to destroy");
  drv(cuDevicePrimaryCtxRelease(d), tag + "cuDevicePrimaryCtxRelease");

  // A kernel node naming the context explicitly (graphs keep it).
  CUgraph graph;
  drv(cuGraphCreate(&graph, 0), tag + "cuGraphCreate");
  CUfunction f = nullptr;
  cudaFunction_t rf;
  if (rt(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(&add_one)), tag + "cudaGetFuncBySymbol")) {
    f = reinterpret_cast<CUfunction>(rf);
    int nn = n;
    void* args[] = {&x, &nn};
    CUDA_KERNEL_NODE_PARAMS p = {};
    p.func = f;
    p.gridDimX = n / 256;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    p.ctx = retained;
    CUgraphNode node;
    if (drv(cuGraphAddKernelNode(&node, graph, nullptr, 0, &p), tag + "cuGraphAddKernelNode with the context")) {
      CUDA_KERNEL_NODE_PARAMS back = {};
      const CUresult got = cuGraphKernelNodeGetParams(node, &back);
      if (got != CUDA_ERROR_NOT_SUPPORTED) {  // the sim backend does not answer it
        drv(got, tag + "cuGraphKernelNodeGetParams");
        check(back.ctx == nullptr || back.ctx == retained, tag + "a kernel node gives the program's context back");
      }
      CUgraphExec exec;
      if (drv(cuGraphInstantiate(&exec, graph, 0), tag + "cuGraphInstantiate")) {
        drv(cuGraphLaunch(exec, reinterpret_cast<CUstream>(s)), tag + "cuGraphLaunch");
        rt(cudaStreamSynchronize(s), tag + "the graph ran");
        rt(cudaMemcpy(host.data(), x, sizeof(int), cudaMemcpyDeviceToHost), tag + "copy out after the graph");
        if (g_results) check(host[0] == 43, tag + "the graph's kernel ran (" + std::to_string(host[0]) + ")");
        cuGraphExecDestroy(exec);
      }
    }
  }
  cuGraphDestroy(graph);
  rt(cudaStreamDestroy(s), tag + "cudaStreamDestroy");
  rt(cudaFree(x), tag + "cudaFree");
  return retained;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> devices;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--results") g_results = true;
    else devices.push_back(std::atoi(argv[i]));
  }
  int count = 0;
  rt(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  check(count == 8, "eight devices (" + std::to_string(count) + ")");
  std::vector<CUcontext> contexts;
  for (int d : devices) contexts.push_back(use_device(d));
  if (devices.size() == 2 && contexts[0] != nullptr && contexts[1] != nullptr) {
    // A peer copy naming both contexts, and peer access between them.
    const size_t n = 1 << 20;
    void *a = nullptr, *b = nullptr;
    rt(cudaSetDevice(devices[0]), "cudaSetDevice(first)");
    rt(cudaMalloc(&a, n), "cudaMalloc on the first device");
    rt(cudaMemset(a, 7, n), "cudaMemset on the first device");
    rt(cudaSetDevice(devices[1]), "cudaSetDevice(second)");
    rt(cudaMalloc(&b, n), "cudaMalloc on the second device");
    drv(cuCtxSetCurrent(contexts[1]), "cuCtxSetCurrent(second's primary context)");
    const CUresult enable = cuCtxEnablePeerAccess(contexts[0], 0);
    check(enable == CUDA_SUCCESS || enable == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "cuCtxEnablePeerAccess");
    drv(cuMemcpyPeer(reinterpret_cast<CUdeviceptr>(b), contexts[1], reinterpret_cast<CUdeviceptr>(a), contexts[0], n),
        "cuMemcpyPeer between the two primary contexts");
    unsigned char byte = 0;
    rt(cudaMemcpy(&byte, b, 1, cudaMemcpyDeviceToHost), "copy the peer copy's first byte out");
    check(byte == 7, "the peer copy arrived (" + std::to_string(byte) + ")");
    rt(cudaFree(b), "cudaFree on the second device");
    rt(cudaSetDevice(devices[0]), "cudaSetDevice(first) again");
    rt(cudaFree(a), "cudaFree on the first device");
  }
  std::printf("%d check(s) failed\n", g_failures);
  return g_failures;
}
