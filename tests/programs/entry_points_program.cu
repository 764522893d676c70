// Driver entry points that real programs reach beyond what PyTorch uses (issue 24), exercised
// by an unmodified nvcc-built program on the sim backend: the profiler range calls
// (cudaProfilerStart aborted every program that made it), texture and surface objects, stream
// attachment of managed memory, the JIT linker (two PTX inputs linked, loaded, launched), and
// more as they are implemented.
//
// Each check prints one line; the exit status is the number of failed checks.
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

void check_cu(CUresult r, CUresult want, const std::string& what) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  check(r == want, what + " -> " + (name ? name : std::to_string(r)));
}

void profiler_range() {
  check(cudaProfilerStart() == cudaSuccess, "cudaProfilerStart");
  check(cudaProfilerStop() == cudaSuccess, "cudaProfilerStop");
  check_cu(cuProfilerStart(), CUDA_SUCCESS, "cuProfilerStart");
  check_cu(cuProfilerStop(), CUDA_SUCCESS, "cuProfilerStop");
  // No current context on a fresh thread's driver-API view: the real driver refuses.
  CUcontext saved = nullptr;
  cuCtxPopCurrent(&saved);
  CUcontext none = nullptr;
  cuCtxGetCurrent(&none);
  if (none == nullptr) check_cu(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT, "cuProfilerStart without a context");
  if (saved) cuCtxPushCurrent(saved);
}

void texture_and_surface_objects() {
  // A texture over linear device memory, read back through the descriptor queries.
  float* buf = nullptr;
  check(cudaMalloc(&buf, 1 << 20) == cudaSuccess, "cudaMalloc for the texture");
  cudaResourceDesc res{};
  res.resType = cudaResourceTypeLinear;
  res.res.linear.devPtr = buf;
  res.res.linear.desc = cudaCreateChannelDesc<float>();
  res.res.linear.sizeInBytes = 1 << 20;
  cudaTextureDesc tex{};
  tex.readMode = cudaReadModeElementType;
  tex.addressMode[0] = cudaAddressModeClamp;
  cudaTextureObject_t t = 0;
  check(cudaCreateTextureObject(&t, &res, &tex, nullptr) == cudaSuccess && t != 0, "cudaCreateTextureObject (linear)");
  cudaResourceDesc back{};
  check(cudaGetTextureObjectResourceDesc(&back, t) == cudaSuccess && back.resType == cudaResourceTypeLinear &&
            back.res.linear.devPtr == buf && back.res.linear.sizeInBytes == (1u << 20),
        "cudaGetTextureObjectResourceDesc gives the resource back");
  cudaTextureDesc tback{};
  check(cudaGetTextureObjectTextureDesc(&tback, t) == cudaSuccess && tback.addressMode[0] == cudaAddressModeClamp,
        "cudaGetTextureObjectTextureDesc gives the descriptor back");
  check(cudaDestroyTextureObject(t) == cudaSuccess, "cudaDestroyTextureObject");
  check_cu(cuTexObjectDestroy(t), CUDA_ERROR_INVALID_VALUE, "destroying it twice");
  res.res.linear.devPtr = reinterpret_cast<void*>(0x1234);
  check(cudaCreateTextureObject(&t, &res, &tex, nullptr) != cudaSuccess, "a texture over memory that is not the device's is refused");
  cudaGetLastError();

  // A surface over an array created for surface load/store; refused over a plain array.
  cudaChannelFormatDesc ch = cudaCreateChannelDesc<float>();
  cudaArray_t surf_array = nullptr, plain = nullptr;
  check(cudaMallocArray(&surf_array, &ch, 64, 64, cudaArraySurfaceLoadStore) == cudaSuccess, "cudaMallocArray (surface)");
  check(cudaMallocArray(&plain, &ch, 64, 64) == cudaSuccess, "cudaMallocArray (plain)");
  cudaResourceDesc sres{};
  sres.resType = cudaResourceTypeArray;
  sres.res.array.array = surf_array;
  cudaSurfaceObject_t sobj = 0;
  check(cudaCreateSurfaceObject(&sobj, &sres) == cudaSuccess && sobj != 0, "cudaCreateSurfaceObject");
  cudaResourceDesc sback{};
  check(cudaGetSurfaceObjectResourceDesc(&sback, sobj) == cudaSuccess && sback.res.array.array == surf_array,
        "cudaGetSurfaceObjectResourceDesc");
  check(cudaDestroySurfaceObject(sobj) == cudaSuccess, "cudaDestroySurfaceObject");
  sres.res.array.array = plain;
  check(cudaCreateSurfaceObject(&sobj, &sres) != cudaSuccess, "a surface over an array without SurfaceLoadStore is refused");
  cudaGetLastError();
  // A texture over an array.
  cudaResourceDesc ares{};
  ares.resType = cudaResourceTypeArray;
  ares.res.array.array = plain;
  check(cudaCreateTextureObject(&t, &ares, &tex, nullptr) == cudaSuccess, "cudaCreateTextureObject (array)");
  check(cudaDestroyTextureObject(t) == cudaSuccess, "cudaDestroyTextureObject (array)");
  cudaFreeArray(surf_array);
  cudaFreeArray(plain);
  cudaFree(buf);
}

void stream_attach_managed_memory() {
  float* m = nullptr;
  check(cudaMallocManaged(&m, 4096) == cudaSuccess, "cudaMallocManaged");
  cudaStream_t s;
  cudaStreamCreate(&s);
  check(cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachSingle) == cudaSuccess, "cudaStreamAttachMemAsync single");
  check(cudaStreamAttachMemAsync(s, m, 4096, cudaMemAttachGlobal) == cudaSuccess, "cudaStreamAttachMemAsync global");
  check(cudaStreamSynchronize(s) == cudaSuccess, "the stream runs past the attachment");
  check(cudaStreamAttachMemAsync(s, m, 100, cudaMemAttachGlobal) != cudaSuccess, "a partial length is refused");
  cudaGetLastError();
  float* d = nullptr;
  cudaMalloc(&d, 4096);
  check(cudaStreamAttachMemAsync(s, d, 0, cudaMemAttachGlobal) != cudaSuccess, "device memory is refused");
  cudaGetLastError();
  cudaFree(d);
  cudaStreamDestroy(s);
  cudaFree(m);
}

// Two PTX modules as NVRTC would hand them over: one kernel each.
constexpr const char* kPtxA = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry scale_a(.param .u64 scale_a_param_0, .param .f32 scale_a_param_1)
{
	ret;
}
)";
constexpr const char* kPtxB = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry add_b(.param .u64 add_b_param_0, .param .u64 add_b_param_1, .param .u32 add_b_param_2)
{
	ret;
}
)";

void jit_link() {
  char info[256] = "untouched", error[256] = "untouched";
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {info, reinterpret_cast<void*>(sizeof info), error, reinterpret_cast<void*>(sizeof error)};
  CUlinkState link = nullptr;
  check_cu(cuLinkCreate(4, opts, vals, &link), CUDA_SUCCESS, "cuLinkCreate");
  check_cu(cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char*>(kPtxA), std::strlen(kPtxA) + 1, "a.ptx", 0, nullptr,
                         nullptr),
           CUDA_SUCCESS, "cuLinkAddData (PTX a)");
  check_cu(cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char*>(kPtxB), std::strlen(kPtxB), "b.ptx", 0, nullptr,
                         nullptr),
           CUDA_SUCCESS, "cuLinkAddData (PTX b, size without the NUL)");
  const char* junk = "this is not PTX";
  check_cu(cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char*>(junk), std::strlen(junk) + 1, "junk", 0, nullptr,
                         nullptr),
           CUDA_ERROR_INVALID_PTX, "cuLinkAddData refuses what is not PTX");
  check_cu(cuLinkAddFile(link, CU_JIT_INPUT_CUBIN, "/nonexistent/x.cubin", 0, nullptr, nullptr),
           CUDA_ERROR_FILE_NOT_FOUND, "cuLinkAddFile of a missing file");
  void* image = nullptr;
  size_t size = 0;
  check_cu(cuLinkComplete(link, &image, &size), CUDA_SUCCESS, "cuLinkComplete");
  check(image != nullptr && size > 0 && info[0] == '\0' && error[0] == '\0', "a linked image, empty logs");
  CUmodule mod = nullptr;
  check_cu(cuModuleLoadData(&mod, image), CUDA_SUCCESS, "cuModuleLoadData of the linked image");
  CUfunction fa = nullptr, fb = nullptr;
  check_cu(cuModuleGetFunction(&fa, mod, "scale_a"), CUDA_SUCCESS, "the first input's kernel is in it");
  check_cu(cuModuleGetFunction(&fb, mod, "add_b"), CUDA_SUCCESS, "the second input's kernel is in it");
  size_t offset = 0, psize = 0;
  check_cu(cuFuncGetParamInfo(fb, 2, &offset, &psize), CUDA_SUCCESS, "cuFuncGetParamInfo");
  check(offset == 16 && psize == 4, "add_b's third parameter at 16, 4 bytes");
  void* p0 = nullptr;
  unsigned n = 4;
  void* args[] = {&p0, &p0, &n};
  check_cu(cuLaunchKernel(fb, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), CUDA_SUCCESS, "launch a linked kernel");
  check_cu(cuCtxSynchronize(), CUDA_SUCCESS, "it completes");
  check_cu(cuModuleUnload(mod), CUDA_SUCCESS, "cuModuleUnload");
  check_cu(cuLinkDestroy(link), CUDA_SUCCESS, "cuLinkDestroy");
  check_cu(cuLinkDestroy(link), CUDA_ERROR_INVALID_HANDLE, "cuLinkDestroy twice");
  check_cu(cuLinkComplete(link, &image, &size), CUDA_ERROR_INVALID_HANDLE, "cuLinkComplete after destroy");

  // A single cubin input comes out as itself; the ptxjit pattern with one PTX as well.
  check_cu(cuLinkCreate(0, nullptr, nullptr, &link), CUDA_SUCCESS, "cuLinkCreate without options");
  check_cu(cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char*>(kPtxA), std::strlen(kPtxA) + 1, "a.ptx", 0,
                         nullptr, nullptr),
           CUDA_SUCCESS, "one PTX input");
  check_cu(cuLinkComplete(link, &image, &size), CUDA_SUCCESS, "cuLinkComplete of one input");
  check(size == std::strlen(kPtxA) + 1 && std::memcmp(image, kPtxA, size) == 0, "one input links to itself");
  cuLinkDestroy(link);
  check_cu(cuLinkCreate(0, nullptr, nullptr, &link), CUDA_SUCCESS, "cuLinkCreate (empty)");
  check_cu(cuLinkComplete(link, &image, &size), CUDA_ERROR_INVALID_VALUE, "linking nothing is refused");
  cuLinkDestroy(link);
}

__global__ void fill(int* out, int v) {
  if (out) out[threadIdx.x] = v;
}

void graphs() {
  cudaStream_t s;
  cudaStreamCreate(&s);
  // A graph of two kernels, cloned; the clone has the same shape.
  cudaGraph_t g = nullptr, copy = nullptr;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  fill<<<1, 32, 0, s>>>(nullptr, 1);
  fill<<<1, 32, 0, s>>>(nullptr, 2);
  check(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
  check(cudaGraphClone(&copy, g) == cudaSuccess && copy != nullptr && copy != g, "cudaGraphClone");
  size_t n0 = 0, n1 = 0, e0 = 0, e1 = 0;
  cudaGraphGetNodes(g, nullptr, &n0);
  cudaGraphGetNodes(copy, nullptr, &n1);
  cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &e0);
  cudaGraphGetEdges(copy, nullptr, nullptr, nullptr, &e1);
  check(n0 == 2 && n1 == 2 && e0 == 1 && e1 == 1, "the clone has the original's nodes and edges");

  // Updating a kernel node of an instantiated graph.
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, copy, 0) == cudaSuccess, "instantiate the clone");
  cudaGraphNode_t nodes[2];
  size_t count = 2;
  cudaGraphGetNodes(copy, nodes, &count);
  int* out = nullptr;
  int v = 7;
  void* args[] = {&out, &v};
  cudaKernelNodeParams kp{};
  kp.func = reinterpret_cast<void*>(fill);
  kp.gridDim = dim3(2);
  kp.blockDim = dim3(64);
  kp.kernelParams = args;
  check(cudaGraphExecKernelNodeSetParams(exec, nodes[0], &kp) == cudaSuccess, "cudaGraphExecKernelNodeSetParams");
  kp.blockDim = dim3(4096);  // more threads than a block may have
  check(cudaGraphExecKernelNodeSetParams(exec, nodes[0], &kp) != cudaSuccess, "an invalid launch is refused");
  cudaGetLastError();
  check(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess, "launch the updated graph");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(copy);
  cudaGraphDestroy(g);

  // Memory allocation and free nodes: the address is fixed when the node is made.
  cudaGraph_t mg = nullptr;
  cudaGraphCreate(&mg, 0);
  cudaMemAllocNodeParams ap{};
  ap.poolProps.allocType = cudaMemAllocationTypePinned;
  ap.poolProps.location.type = cudaMemLocationTypeDevice;
  ap.poolProps.location.id = 0;
  ap.bytesize = 1 << 20;
  cudaGraphNode_t alloc = nullptr, freen = nullptr;
  check(cudaGraphAddMemAllocNode(&alloc, mg, nullptr, 0, &ap) == cudaSuccess && ap.dptr != nullptr,
        "cudaGraphAddMemAllocNode gives an address");
  check(cudaGraphAddMemFreeNode(&freen, mg, &alloc, 1, ap.dptr) == cudaSuccess, "cudaGraphAddMemFreeNode");
  cudaGraphNodeType type;
  cudaGraphNodeGetType(alloc, &type);
  check(type == cudaGraphNodeTypeMemAlloc, "the node is a memory allocation node");
  ap.bytesize = size_t(1) << 40;  // a terabyte: more than the device holds
  check(cudaGraphAddMemAllocNode(&alloc, mg, nullptr, 0, &ap) == cudaErrorMemoryAllocation,
        "an allocation node past the capacity is refused");
  cudaGetLastError();
  check(cudaGraphInstantiate(&exec, mg, 0) == cudaSuccess && cudaGraphLaunch(exec, s) == cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess,
        "a graph with memory nodes runs");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(mg);

  // A stream forked into a capture and joined back may be destroyed before the capture ends.
  cudaStream_t fork;
  cudaStreamCreate(&fork);
  cudaEvent_t forked, joined;
  cudaEventCreateWithFlags(&forked, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&joined, cudaEventDisableTiming);
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture (fork)");
  cudaEventRecord(forked, s);
  cudaStreamWaitEvent(fork, forked, 0);
  fill<<<1, 32, 0, fork>>>(nullptr, 3);
  cudaEventRecord(joined, fork);
  cudaStreamWaitEvent(s, joined, 0);
  check(cudaStreamDestroy(fork) == cudaSuccess, "destroy the joined fork stream during the capture");
  fill<<<1, 32, 0, s>>>(nullptr, 4);
  g = nullptr;
  check(cudaStreamEndCapture(s, &g) == cudaSuccess && g != nullptr, "the capture is still valid");
  count = 0;
  cudaGraphGetNodes(g, nullptr, &count);
  check(count == 2, "both kernels are in the graph");
  cudaGraphDestroy(g);

  // Conditional nodes: an IF whose condition defaults to 1 runs its body (a memset the host can
  // see), a SWITCH with value 1 runs its second body only.
  int* flag = nullptr;
  cudaMalloc(&flag, 2 * sizeof(int));
  cudaMemset(flag, 0, 2 * sizeof(int));
  cudaGraph_t cg = nullptr;
  cudaGraphCreate(&cg, 0);
  cudaGraphConditionalHandle hif = 0, hsw = 0;
  check(cudaGraphConditionalHandleCreate(&hif, cg, 1, cudaGraphCondAssignDefault) == cudaSuccess,
        "cudaGraphConditionalHandleCreate");
  cudaGraphConditionalHandleCreate(&hsw, cg, 1, cudaGraphCondAssignDefault);
  cudaGraphNodeParams cp{};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = hif;
  cp.conditional.type = cudaGraphCondTypeIf;
  cp.conditional.size = 1;
  cudaGraphNode_t cnode = nullptr;
  check(cudaGraphAddNode(&cnode, cg, nullptr, nullptr, 0, &cp) == cudaSuccess && cp.conditional.phGraph_out != nullptr,
        "cudaGraphAddNode (IF) gives a body graph");
  cudaGraph_t body = cp.conditional.phGraph_out[0];
  cudaMemsetParams mp{};
  mp.dst = flag;
  mp.value = 7;
  mp.elementSize = 4;
  mp.width = 1;
  mp.height = 1;
  cudaGraphNode_t mnode = nullptr;
  check(cudaGraphAddMemsetNode(&mnode, body, nullptr, 0, &mp) == cudaSuccess, "a memset in the IF body");
  cudaGraphNodeParams sp{};
  sp.type = cudaGraphNodeTypeConditional;
  sp.conditional.handle = hsw;
  sp.conditional.type = cudaGraphCondTypeSwitch;
  sp.conditional.size = 2;
  check(cudaGraphAddNode(&cnode, cg, &cnode, nullptr, 1, &sp) == cudaSuccess, "cudaGraphAddNode (SWITCH, after the IF)");
  mp.dst = flag + 1;
  mp.value = 10;
  cudaGraphAddMemsetNode(&mnode, sp.conditional.phGraph_out[0], nullptr, 0, &mp);
  mp.value = 11;
  cudaGraphAddMemsetNode(&mnode, sp.conditional.phGraph_out[1], nullptr, 0, &mp);
  check(cudaGraphInstantiate(&exec, cg, 0) == cudaSuccess && cudaGraphLaunch(exec, s) == cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess,
        "a graph with conditional nodes runs");
  int got[2] = {0, 0};
  cudaMemcpy(got, flag, sizeof got, cudaMemcpyDeviceToHost);
  check(got[0] == 7 && got[1] == 11, "the IF body ran, and the SWITCH's body 1 only");
  cudaGraphExecDestroy(exec);
  // A clone carries the conditional nodes with their bodies.
  cudaMemset(flag, 0, 2 * sizeof(int));
  cudaGraph_t cclone = nullptr;
  check(cudaGraphClone(&cclone, cg) == cudaSuccess && cudaGraphInstantiate(&exec, cclone, 0) == cudaSuccess &&
            cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess,
        "a clone of the conditional graph runs");
  cudaMemcpy(got, flag, sizeof got, cudaMemcpyDeviceToHost);
  check(got[0] == 7 && got[1] == 11, "the clone's conditional bodies ran as the original's");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(cclone);
  cudaGraphDestroy(cg);
  cudaFree(flag);
  cudaStreamDestroy(s);
}

std::string hex_of(const void* p, size_t n) {
  std::string out;
  char b[3];
  for (size_t i = 0; i < n; ++i) std::snprintf(b, sizeof b, "%02x", static_cast<const unsigned char*>(p)[i]), out += b;
  return out;
}

// The child of ipc(): opens the parent's buffer, checks what the parent wrote, writes its own.
// `ordinal` >= 0: the device the child must see the buffer on (it runs under CUDA_VISIBLE_DEVICES).
int ipc_child(const char* hex, int ordinal = -1) {
  cudaIpcMemHandle_t h{};
  for (size_t i = 0; i < sizeof h; ++i) std::sscanf(hex + 2 * i, "%2hhx", reinterpret_cast<unsigned char*>(&h) + i);
  void* p = nullptr;
  check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess && p != nullptr,
        "child: cudaIpcOpenMemHandle");
  if (ordinal >= 0) {
    int cu = -1;
    check(cuPointerGetAttribute(&cu, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, reinterpret_cast<CUdeviceptr>(p)) ==
                  CUDA_SUCCESS && cu == ordinal,
          "child: the buffer is on the exporter's GPU, as this process numbers it (device " + std::to_string(cu) + ")");
  }
  std::vector<unsigned char> host(1 << 20);
  check(cudaMemcpy(host.data(), p, host.size(), cudaMemcpyDeviceToHost) == cudaSuccess, "child: read the buffer");
  check(host[0] == 0x5a && host[host.size() - 1] == 0x5a, "child: sees the parent's bytes");
  check(cudaMemset(p, 0xa5, host.size()) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess,
        "child: writes the buffer");
  check(cudaIpcCloseMemHandle(p) == cudaSuccess, "child: cudaIpcCloseMemHandle");
  return g_failures;
}

// Maps a VMM allocation handle at a fresh address of device 0, readable and writable.
CUdeviceptr map_vmm(CUmemGenericAllocationHandle h, size_t size) {
  CUdeviceptr p = 0;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (cuMemAddressReserve(&p, size, 0, 0, 0) != CUDA_SUCCESS || cuMemMap(p, size, 0, h, 0) != CUDA_SUCCESS ||
      cuMemSetAccess(p, size, &access, 1) != CUDA_SUCCESS)
    return 0;
  return p;
}

// The child of vmm_share(): imports the allocation from the inherited descriptor.
int vmm_child(const char* fd_text, const char* size_text) {
  const int fd = std::atoi(fd_text);
  const size_t size = std::strtoull(size_text, nullptr, 10);
  CUmemGenericAllocationHandle h = 0;
  check_cu(cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
           CUDA_SUCCESS, "child: cuMemImportFromShareableHandle");
  close(fd);
  const CUdeviceptr p = map_vmm(h, size);
  check(p != 0, "child: maps the imported allocation");
  unsigned char b = 0;
  cuMemcpyDtoH(&b, p + size - 1, 1);
  check(b == 0x33, "child: sees the parent's bytes");
  check_cu(cuMemsetD8(p, 0x44, size), CUDA_SUCCESS, "child: writes them");
  cuCtxSynchronize();
  cuMemUnmap(p, size);
  cuMemAddressFree(p, size);
  check_cu(cuMemRelease(h), CUDA_SUCCESS, "child: cuMemRelease");
  return g_failures;
}

void vmm_share(const char* self) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  const size_t size = 4 * gran;
  CUmemGenericAllocationHandle h = 0;
  check_cu(cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS, "parent: cuMemCreate (shareable)");
  const CUdeviceptr p = map_vmm(h, size);
  check(p != 0 && cuMemsetD8(p, 0x33, size) == CUDA_SUCCESS, "parent: maps and fills it");
  int fd = -1;
  check_cu(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS,
           "parent: cuMemExportToShareableHandle");
  const std::string fd_text = std::to_string(fd), size_text = std::to_string(size);
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("vmm-child"), const_cast<char*>(fd_text.c_str()),
                  const_cast<char*>(size_text.c_str()), nullptr};
  pid_t pid = 0;
  int status = -1;
  check(posix_spawn(&pid, self, nullptr, nullptr, argv, environ) == 0 && waitpid(pid, &status, 0) == pid &&
            WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child process imported, read and wrote the allocation");
  close(fd);
  unsigned char b = 0;
  cuMemcpyDtoH(&b, p, 1);
  check(b == 0x44, "parent: sees the child's bytes");
  CUmemGenericAllocationHandle plain = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  cuMemCreate(&plain, gran, &prop, 0);
  check_cu(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_INVALID_VALUE, "an allocation not made shareable cannot be exported");
  cuMemRelease(plain);
  cuMemUnmap(p, size);
  cuMemAddressFree(p, size);
  cuMemRelease(h);
}

// The child of pool_share(): imports the pool from the inherited descriptor, then the pointer.
int pool_child(const char* fd_text, const char* hex) {
  cudaMemPool_t pool = nullptr;
  const int fd = std::atoi(fd_text);
  check(cudaMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                             cudaMemHandleTypePosixFileDescriptor, 0) == cudaSuccess,
        "child: cudaMemPoolImportFromShareableHandle");
  close(fd);
  cudaMemPoolPtrExportData data{};
  for (size_t i = 0; i < sizeof data; ++i) std::sscanf(hex + 2 * i, "%2hhx", reinterpret_cast<unsigned char*>(&data) + i);
  void* p = nullptr;
  check(cudaMemPoolImportPointer(&p, pool, &data) == cudaSuccess && p != nullptr, "child: cudaMemPoolImportPointer");
  unsigned char b = 0;
  cudaMemcpy(&b, p, 1, cudaMemcpyDeviceToHost);
  check(b == 0x61, "child: sees the parent's bytes");
  cudaMemset(p, 0x62, 4096);
  cudaDeviceSynchronize();
  check(cudaFree(p) == cudaSuccess, "child: frees the imported pointer");
  void* q = nullptr;
  check(cudaMallocFromPoolAsync(&q, 64, pool, nullptr) != cudaSuccess, "child: no allocation from an imported pool");
  cudaGetLastError();
  return g_failures;
}

void pool_share(const char* self) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  check(cudaMemPoolCreate(&pool, &props) == cudaSuccess, "parent: a shareable pool");
  void* p = nullptr;
  cudaStream_t s;
  cudaStreamCreate(&s);
  check(cudaMallocFromPoolAsync(&p, 4096, pool, s) == cudaSuccess && cudaMemsetAsync(p, 0x61, 4096, s) == cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess,
        "parent: an allocation from it, filled");
  int fd = -1;
  check(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0) == cudaSuccess,
        "parent: cudaMemPoolExportToShareableHandle");
  cudaMemPoolPtrExportData data{};
  check(cudaMemPoolExportPointer(&data, p) == cudaSuccess, "parent: cudaMemPoolExportPointer");
  const std::string fd_text = std::to_string(fd), hex = hex_of(&data, sizeof data);
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("pool-child"), const_cast<char*>(fd_text.c_str()),
                  const_cast<char*>(hex.c_str()), nullptr};
  pid_t pid = 0;
  int status = -1;
  check(posix_spawn(&pid, self, nullptr, nullptr, argv, environ) == 0 && waitpid(pid, &status, 0) == pid &&
            WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child process imported the pool's pointer, read and wrote it");
  close(fd);
  unsigned char b = 0;
  cudaMemcpy(&b, p, 1, cudaMemcpyDeviceToHost);
  check(b == 0x62, "parent: sees the child's bytes");
  cudaFreeAsync(p, s);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  cudaMemPoolDestroy(pool);
}

void ipc(const char* self) {
  void* buf = nullptr;
  const size_t n = 1 << 20;
  check(cudaMalloc(&buf, n) == cudaSuccess && cudaMemset(buf, 0x5a, n) == cudaSuccess, "parent: a buffer");
  cudaIpcMemHandle_t h{};
  check(cudaIpcGetMemHandle(&h, buf) == cudaSuccess, "parent: cudaIpcGetMemHandle");
  void* same = nullptr;
  check(cudaIpcOpenMemHandle(&same, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess,
        "opening a handle in the process that made it is refused");
  cudaGetLastError();
  // Another process of the same job (a fresh program, as torch.multiprocessing spawns).
  const std::string hex = hex_of(&h, sizeof h);
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("ipc-child"), const_cast<char*>(hex.c_str()), nullptr};
  pid_t pid = 0;
  int status = -1;
  check(posix_spawn(&pid, self, nullptr, nullptr, argv, environ) == 0 && waitpid(pid, &status, 0) == pid &&
            WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child process opened, read and wrote the buffer");
  if (std::getenv("VGPU_REAL_LIBCUDA") == nullptr) {  // the sim backend (the passthrough's is underneath)
    // A child that numbers the GPUs otherwise (CUDA_VISIBLE_DEVICES=1,0): the parent's device 0
    // is its device 1. The handle names the cluster's GPU, not the exporter's ordinal.
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env_text.push_back(*e);
    env_text.push_back("CUDA_VISIBLE_DEVICES=1,0");
    std::vector<char*> env;
    for (std::string& e : env_text) env.push_back(e.data());
    env.push_back(nullptr);
    cudaMemset(buf, 0x5a, n);  // the bytes the child checks (the first child wrote its own)
    cudaDeviceSynchronize();
    char* argv2[] = {const_cast<char*>(self), const_cast<char*>("ipc-child"), const_cast<char*>(hex.c_str()),
                     const_cast<char*>("1"), nullptr};
    check(posix_spawn(&pid, self, nullptr, nullptr, argv2, env.data()) == 0 && waitpid(pid, &status, 0) == pid &&
              WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a child under CUDA_VISIBLE_DEVICES=1,0 sees the buffer on its device 1");
  }
  std::vector<unsigned char> host(n);
  cudaMemcpy(host.data(), buf, n, cudaMemcpyDeviceToHost);
  check(host[0] == 0xa5 && host[n - 1] == 0xa5, "parent: sees the child's bytes");
  check(cudaFree(buf) == cudaSuccess, "parent: frees the exported buffer");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "pool-child") == 0) {
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) return 1;
    return pool_child(argv[2], argv[3]);
  }
  if (argc == 4 && std::strcmp(argv[1], "vmm-child") == 0) {
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) return 1;
    return vmm_child(argv[2], argv[3]);
  }
  if ((argc == 3 || argc == 4) && std::strcmp(argv[1], "ipc-child") == 0) {
    if (cudaSetDevice(0) != cudaSuccess) return 1;
    return ipc_child(argv[2], argc == 4 ? std::atoi(argv[3]) : -1);
  }
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::printf("FAIL no device\n");
    return 1;
  }
  profiler_range();
  texture_and_surface_objects();
  stream_attach_managed_memory();
  jit_link();
  graphs();
  ipc("/proc/self/exe");
  vmm_share("/proc/self/exe");
  pool_share("/proc/self/exe");
  std::printf("%d check(s) failed\n", g_failures);
  return g_failures > 255 ? 255 : g_failures;
}
