// Entry points: modules, libraries, kernels and functions (cuModule*, cuLibrary*, cuKernel*,
// cuFunc*). Each validates its pointers and hands over to ModuleManager.
#include <cstdlib>
#include <cstring>

#include "front/driver/query_lines.h"
#include "sim/exec/module_api_util.h"

using vgpu::ModuleManager;
namespace q = vgpu::query_trace;

namespace {

// cuModuleLoadDataEx / cuLibraryLoad*: JIT options are accepted and ignored (nothing is
// compiled); the log buffers the program hands in are left as empty strings.
CUresult clear_jit_logs(const char* call, unsigned int n, const CUjit_option* options, void** values) {
  if (n == 0) return CUDA_SUCCESS;
  if (!options || !values) {
    vgpu::log::warn("{}: {} JIT options but no option array", call, n);
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto size_of = [&](CUjit_option which) -> size_t {
    for (unsigned int i = 0; i < n; ++i)
      if (options[i] == which) return static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
    return 0;
  };
  for (unsigned int i = 0; i < n; ++i) {
    if (options[i] == CU_JIT_INFO_LOG_BUFFER && values[i] && size_of(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES))
      static_cast<char*>(values[i])[0] = '\0';
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER && values[i] && size_of(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES))
      static_cast<char*>(values[i])[0] = '\0';
  }
  return CUDA_SUCCESS;
}

// Library options need a value array only for an option that takes a value: cuDNN passes
// CU_LIBRARY_BINARY_IS_PRESERVED, a flag, with a null value array, which the real driver accepts.
bool library_options_ok(unsigned int n, const CUlibraryOption* options, void* const* values) {
  if (n == 0) return true;
  if (options == nullptr) return false;
  for (unsigned int i = 0; i < n; ++i)
    if (options[i] != CU_LIBRARY_BINARY_IS_PRESERVED && values == nullptr) return false;
  return true;
}

}  // namespace

// ---- modules ----

VGPU_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleLoad", module, fname);
  const CUresult r = m->load_file(fname, module);
  if (q::enabled()) q::load("cuModuleLoad", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleLoadData", module, image);
  const CUresult r = m->load_data(image, module);
  if (q::enabled()) q::load("cuModuleLoadData", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image,
                                                unsigned int numOptions, CUjit_option* options,
                                                void** optionValues) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleLoadDataEx", module, image);
  if (CUresult rc = clear_jit_logs("cuModuleLoadDataEx", numOptions, options, optionValues);
      rc != CUDA_SUCCESS)
    return rc;
  const CUresult r = m->load_data(image, module);
  if (q::enabled()) q::load("cuModuleLoadDataEx", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleLoadFatBinary", module, fatCubin);
  const CUresult r = m->load_data(fatCubin, module);
  if (q::enabled()) q::load("cuModuleLoadFatBinary", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleUnload");
  return m->unload(hmod);
}

VGPU_EXPORT CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleGetLoadingMode", mode);
  // As the real driver: lazy unless CUDA_MODULE_LOADING=EAGER.
  const char* env = std::getenv("CUDA_MODULE_LOADING");
  *mode = env && std::strcmp(env, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleGetFunction", hfunc, name);
  const CUresult r = m->get_function(hmod, name, hfunc);
  if (q::enabled()) q::lookup("cuModuleGetFunction", name, r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int* count, CUmodule hmod) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleGetFunctionCount", count);
  return m->function_count(hmod, count);
}

VGPU_EXPORT CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction* functions, unsigned int numFunctions,
                                                        CUmodule mod) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleEnumerateFunctions", functions);
  return m->enumerate_functions(mod, functions, numFunctions);
}

VGPU_EXPORT CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr_v2* dptr, size_t* bytes, CUmodule hmod,
                                                  const char* name) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuModuleGetGlobal", name);
  return m->get_global(hmod, name, dptr, bytes);
}

VGPU_EXPORT CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr_v1* dptr, unsigned int* bytes, CUmodule hmod,
                                               const char* name) {
  VGPU_CALL_SCOPE();
  CUdeviceptr_v2 p = 0;
  size_t b = 0;
  CUresult rc = cuModuleGetGlobal_v2(&p, &b, hmod, name);
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr) *dptr = static_cast<CUdeviceptr_v1>(p);
  if (bytes) *bytes = static_cast<unsigned int>(b);
  return CUDA_SUCCESS;
}

// ---- libraries ----

VGPU_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code,
                                               CUjit_option* jitOptions, void** jitOptionsValues,
                                               unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                                               void** libraryOptionValues, unsigned int numLibraryOptions) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryLoadData", library, code);
  if (!library_options_ok(numLibraryOptions, libraryOptions, libraryOptionValues)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = clear_jit_logs("cuLibraryLoadData", numJitOptions, jitOptions, jitOptionsValues);
      rc != CUDA_SUCCESS)
    return rc;
  const CUresult r = m->library_load_data(code, library);  // the image is parsed now: nothing to preserve
  if (q::enabled()) q::load("cuLibraryLoadData", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary* library, const char* fileName,
                                                   CUjit_option* jitOptions, void** jitOptionsValues,
                                                   unsigned int numJitOptions,
                                                   CUlibraryOption* libraryOptions,
                                                   void** libraryOptionValues,
                                                   unsigned int numLibraryOptions) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryLoadFromFile", library, fileName);
  if (!library_options_ok(numLibraryOptions, libraryOptions, libraryOptionValues)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = clear_jit_logs("cuLibraryLoadFromFile", numJitOptions, jitOptions, jitOptionsValues);
      rc != CUDA_SUCCESS)
    return rc;
  const CUresult r = m->library_load_file(fileName, library);
  if (q::enabled()) q::load("cuLibraryLoadFromFile", r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryUnload");
  return m->library_unload(library);
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryGetKernel", pKernel, name);
  const CUresult r = m->library_get_kernel(library, name, pKernel);
  if (q::enabled()) q::lookup("cuLibraryGetKernel", name, r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int* count, CUlibrary lib) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryGetKernelCount", count);
  return m->library_kernel_count(lib, count);
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int numKernels,
                                                       CUlibrary lib) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryEnumerateKernels", kernels);
  return m->library_enumerate_kernels(lib, kernels, numKernels);
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryGetModule", pMod);
  return m->library_get_module(library, pMod);
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                                const char* name) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryGetGlobal", name);
  return m->library_get_global(library, name, false, dptr, bytes);
}

VGPU_EXPORT CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                                 const char* name) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuLibraryGetManaged", name);
  return m->library_get_global(library, name, true, dptr, bytes);
}

// ---- kernels ----

VGPU_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuKernelGetFunction", pFunc);
  return m->kernel_get_function(kernel, pFunc);
}

VGPU_EXPORT CUresult CUDAAPI cuKernelGetLibrary(CUlibrary* pLib, CUkernel kernel) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuKernelGetLibrary", pLib);
  return m->kernel_get_library(kernel, pLib);
}

VGPU_EXPORT CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel hfunc) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuKernelGetName", name);
  return m->kernel_get_name(hfunc, name);
}

VGPU_EXPORT CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex,
                                                  size_t* paramOffset, size_t* paramSize) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuKernelGetParamInfo");
  return m->kernel_param_info(kernel, paramIndex, paramOffset, paramSize);
}

VGPU_EXPORT CUresult CUDAAPI cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel,
                                                  CUdevice dev) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuKernelGetAttribute", pi);
  const CUresult r = m->kernel_get_attribute(kernel, attrib, dev, pi);
  if (q::enabled()) q::function_attribute("cuKernelGetAttribute", vgpu::traced_kernel_name(m, kernel), dev, attrib, r, pi);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                                  CUdevice dev) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuKernelSetAttribute");
  const CUresult r = m->kernel_set_attribute(kernel, attrib, dev, val);
  if (q::enabled()) q::set_function_attribute("cuKernelSetAttribute", vgpu::traced_kernel_name(m, kernel), dev, attrib, val, r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuKernelSetCacheConfig");
  return m->kernel_set_cache_config(kernel, config, dev);
}

// ---- functions ----

VGPU_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncGetAttribute", pi);
  const CUresult r = m->function_attribute(hfunc, attrib, pi);
  if (q::enabled()) q::function_attribute("cuFuncGetAttribute", vgpu::traced_name(m, hfunc), -1, attrib, r, pi);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncSetAttribute");
  const CUresult r = m->set_function_attribute(hfunc, attrib, value);
  if (q::enabled()) q::set_function_attribute("cuFuncSetAttribute", vgpu::traced_name(m, hfunc), -1, attrib, value, r);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncSetCacheConfig");
  return m->set_cache_config(hfunc, config);
}

VGPU_EXPORT CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncSetSharedMemConfig");
  return m->set_shared_mem_config(hfunc, config);
}

VGPU_EXPORT CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncGetName", name);
  return m->function_name(hfunc, name);
}

VGPU_EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset,
                                                size_t* paramSize) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncGetParamInfo");
  return m->function_param_info(func, paramIndex, paramOffset, paramSize);
}

VGPU_EXPORT CUresult CUDAAPI cuFuncGetModule(CUmodule* hmod, CUfunction hfunc) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncGetModule", hmod);
  return m->function_module(hfunc, hmod);
}

VGPU_EXPORT CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction hfunc) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncIsLoaded", state);
  std::shared_ptr<const vgpu::Function> fn;
  if (CUresult rc = m->resolve_function(hfunc, &fn); rc != CUDA_SUCCESS) return rc;
  *state = CU_FUNCTION_LOADING_STATE_LOADED;  // parsed at load time: always loaded
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuFuncLoad(CUfunction hfunc) {
  VGPU_CALL_SCOPE();
  VGPU_MODULE_CALL("cuFuncLoad");
  std::shared_ptr<const vgpu::Function> fn;
  return m->resolve_function(hfunc, &fn);
}
