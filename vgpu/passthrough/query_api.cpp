// The query entry points the passthrough forwards to the real driver as they are (function
// attributes, the occupancy calculator, cluster queries, context limits, module and library
// loads and name lookups), defined here only so that VGPU_QUERY_TRACE records what the REAL
// driver answered, in the words the sim backend uses for its own answers
// (front/driver/query_lines.h). With the trace off each costs one predictable branch over the
// forwarder it replaces (forward_entries.cpp); no launch or copy passes through here.
#include "common/log.h"
#include "front/driver/cuda_api.h"
#include "front/driver/query_lines.h"
#include "passthrough/passthrough_state.h"

namespace q = vgpu::query_trace;
using vgpu::pt::physical_device;

namespace {

// The name the trace shows for a CUfunction, or a CUkernel passed as one (cudart does).
const char* function_name(CUfunction f) {
  const char* name = nullptr;
  if (VGPU_REAL("cuFuncGetName", CUresult (*)(const char**, CUfunction))(&name, f) == CUDA_SUCCESS) return name;
  if (VGPU_REAL("cuKernelGetName", CUresult (*)(const char**, CUkernel))(&name, reinterpret_cast<CUkernel>(f)) ==
      CUDA_SUCCESS)
    return name;
  return nullptr;
}

const char* kernel_name(CUkernel k) {
  const char* name = nullptr;
  return VGPU_REAL("cuKernelGetName", CUresult (*)(const char**, CUkernel))(&name, k) == CUDA_SUCCESS ? name
                                                                                                     : nullptr;
}

}  // namespace

// ---- function and kernel attributes ----

VGPU_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  const CUresult r = VGPU_REAL("cuFuncGetAttribute", CUresult (*)(int*, CUfunction_attribute, CUfunction))(
      pi, attrib, hfunc);
  if (q::enabled()) q::function_attribute("cuFuncGetAttribute", function_name(hfunc), -1, attrib, r, pi);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  const CUresult r = VGPU_REAL("cuFuncSetAttribute", CUresult (*)(CUfunction, CUfunction_attribute, int))(
      hfunc, attrib, value);
  if (q::enabled()) q::set_function_attribute("cuFuncSetAttribute", function_name(hfunc), -1, attrib, value, r);
  return r;
}

// The trace shows the virtual ordinal the program passed; the real driver gets the physical one.
VGPU_EXPORT CUresult CUDAAPI cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel,
                                                  CUdevice dev) {
  const CUresult r = VGPU_REAL("cuKernelGetAttribute", CUresult (*)(int*, CUfunction_attribute, CUkernel, CUdevice))(
      pi, attrib, kernel, physical_device(dev));
  if (q::enabled()) q::function_attribute("cuKernelGetAttribute", kernel_name(kernel), dev, attrib, r, pi);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                                  CUdevice dev) {
  const CUresult r = VGPU_REAL("cuKernelSetAttribute", CUresult (*)(CUfunction_attribute, int, CUkernel, CUdevice))(
      attrib, val, kernel, physical_device(dev));
  if (q::enabled()) q::set_function_attribute("cuKernelSetAttribute", kernel_name(kernel), dev, attrib, val, r);
  return r;
}

// ---- the occupancy calculator and cluster queries ----

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func,
                                                                         int blockSize, size_t dynamicSMemSize) {
  const CUresult r = VGPU_REAL("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                               CUresult (*)(int*, CUfunction, int, size_t))(numBlocks, func, blockSize, dynamicSMemSize);
  if (q::enabled())
    q::max_active_blocks("cuOccupancyMaxActiveBlocksPerMultiprocessor", function_name(func), blockSize,
                         dynamicSMemSize, 0, r, numBlocks);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  const CUresult r = VGPU_REAL("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
                               CUresult (*)(int*, CUfunction, int, size_t, unsigned))(numBlocks, func, blockSize,
                                                                                      dynamicSMemSize, flags);
  if (q::enabled())
    q::max_active_blocks("cuOccupancyMaxActiveBlocksPerMultiprocessor", function_name(func), blockSize,
                         dynamicSMemSize, flags, r, numBlocks);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize, CUfunction func,
                                                              CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                              size_t dynamicSMemSize, int blockSizeLimit) {
  const CUresult r = VGPU_REAL("cuOccupancyMaxPotentialBlockSize",
                               CUresult (*)(int*, int*, CUfunction, CUoccupancyB2DSize, size_t, int))(
      minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit);
  if (q::enabled())
    q::max_potential_block_size("cuOccupancyMaxPotentialBlockSize", function_name(func),
                                blockSizeToDynamicSMemSize != nullptr, dynamicSMemSize, blockSizeLimit, 0, r,
                                minGridSize, blockSize);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize,
    size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags) {
  const CUresult r = VGPU_REAL("cuOccupancyMaxPotentialBlockSizeWithFlags",
                               CUresult (*)(int*, int*, CUfunction, CUoccupancyB2DSize, size_t, int, unsigned))(
      minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit, flags);
  if (q::enabled())
    q::max_potential_block_size("cuOccupancyMaxPotentialBlockSize", function_name(func),
                                blockSizeToDynamicSMemSize != nullptr, dynamicSMemSize, blockSizeLimit, flags, r,
                                minGridSize, blockSize);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, CUfunction func,
                                                                     int numBlocks, int blockSize) {
  const CUresult r = VGPU_REAL("cuOccupancyAvailableDynamicSMemPerBlock",
                               CUresult (*)(size_t*, CUfunction, int, int))(dynamicSmemSize, func, numBlocks,
                                                                            blockSize);
  if (q::enabled()) q::available_dynamic_smem(function_name(func), numBlocks, blockSize, r, dynamicSmemSize);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* numClusters, CUfunction func,
                                                          const CUlaunchConfig* config) {
  const CUresult r = VGPU_REAL("cuOccupancyMaxActiveClusters",
                               CUresult (*)(int*, CUfunction, const CUlaunchConfig*))(numClusters, func, config);
  if (q::enabled()) q::cluster_query("cuOccupancyMaxActiveClusters", function_name(func), config, r, numClusters);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int* clusterSize, CUfunction func,
                                                                const CUlaunchConfig* config) {
  const CUresult r = VGPU_REAL("cuOccupancyMaxPotentialClusterSize",
                               CUresult (*)(int*, CUfunction, const CUlaunchConfig*))(clusterSize, func, config);
  if (q::enabled())
    q::cluster_query("cuOccupancyMaxPotentialClusterSize", function_name(func), config, r, clusterSize);
  return r;
}

// ---- context limits ----

VGPU_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  const CUresult r = VGPU_REAL("cuCtxGetLimit", CUresult (*)(size_t*, CUlimit))(pvalue, limit);
  if (q::enabled()) q::context_limit(limit, r, pvalue);
  return r;
}

// ---- module and library loads, name lookups: whether the real driver took them ----

VGPU_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) {
  const CUresult r = VGPU_REAL("cuModuleLoad", CUresult (*)(CUmodule*, const char*))(module, fname);
  if (q::enabled()) q::load("cuModuleLoad", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  const CUresult r = VGPU_REAL("cuModuleLoadData", CUresult (*)(CUmodule*, const void*))(module, image);
  if (q::enabled()) q::load("cuModuleLoadData", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                                                CUjit_option* options, void** optionValues) {
  const CUresult r = VGPU_REAL("cuModuleLoadDataEx",
                               CUresult (*)(CUmodule*, const void*, unsigned, CUjit_option*, void**))(
      module, image, numOptions, options, optionValues);
  if (q::enabled()) q::load("cuModuleLoadDataEx", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  const CUresult r = VGPU_REAL("cuModuleLoadFatBinary", CUresult (*)(CUmodule*, const void*))(module, fatCubin);
  if (q::enabled()) q::load("cuModuleLoadFatBinary", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                                               void** jitOptionsValues, unsigned int numJitOptions,
                                               CUlibraryOption* libraryOptions, void** libraryOptionValues,
                                               unsigned int numLibraryOptions) {
  const CUresult r = VGPU_REAL("cuLibraryLoadData",
                               CUresult (*)(CUlibrary*, const void*, CUjit_option*, void**, unsigned,
                                            CUlibraryOption*, void**, unsigned))(
      library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
      numLibraryOptions);
  if (q::enabled()) q::load("cuLibraryLoadData", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                                                   void** jitOptionsValues, unsigned int numJitOptions,
                                                   CUlibraryOption* libraryOptions, void** libraryOptionValues,
                                                   unsigned int numLibraryOptions) {
  const CUresult r = VGPU_REAL("cuLibraryLoadFromFile",
                               CUresult (*)(CUlibrary*, const char*, CUjit_option*, void**, unsigned,
                                            CUlibraryOption*, void**, unsigned))(
      library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
      numLibraryOptions);
  if (q::enabled()) q::load("cuLibraryLoadFromFile", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  const CUresult r =
      VGPU_REAL("cuModuleGetFunction", CUresult (*)(CUfunction*, CUmodule, const char*))(hfunc, hmod, name);
  if (q::enabled()) q::lookup("cuModuleGetFunction", name, r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  const CUresult r =
      VGPU_REAL("cuLibraryGetKernel", CUresult (*)(CUkernel*, CUlibrary, const char*))(pKernel, library, name);
  if (q::enabled()) q::lookup("cuLibraryGetKernel", name, r);
  return r;
}
