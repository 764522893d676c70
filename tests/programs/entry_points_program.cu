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

}  // namespace

int main() {
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::printf("FAIL no device\n");
    return 1;
  }
  profiler_range();
  texture_and_surface_objects();
  stream_attach_managed_memory();
  jit_link();
  std::printf("%d check(s) failed\n", g_failures);
  return g_failures > 255 ? 255 : g_failures;
}
