// Function attributes (cuFuncGetAttribute/cuFuncSetAttribute, and the CUkernel per-device forms)
// answered from the image and the device's figures.
#include <algorithm>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/exec/module_registry.h"
#include "sim/exec/module_resources.h"

namespace vgpu {
namespace {

CUresult read_attribute(const KernelResources& r, const LoadedImage& image, const FuncSettings& s,
                        CUfunction_attribute attr, int* value) {
  const module::KernelInfo& k = *r.info;
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = r.max_threads_per_block(); break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = static_cast<int>(k.shared_bytes); break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *value = static_cast<int>(image.const_bytes); break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *value = static_cast<int>(k.local_bytes); break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = r.registers(); break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *value = image.image.sm_arch; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *value = image.image.sm_arch; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *value = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = s.max_dynamic_shared; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *value = s.carveout; break;
    // 0 even for a kernel compiled with a cluster (.reqnctapercluster): an H200 answered 0
    // (driver 580.159.04, 2026-11-26); what makes it 1 (.explicitcluster?) was not measured.
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *value = 0; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      *value = k.cluster_dims[0] ? static_cast<int>(k.cluster_dims[0]) : s.cluster_w.load();
      break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
      *value = k.cluster_dims[0] ? static_cast<int>(k.cluster_dims[1]) : s.cluster_h.load();
      break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      *value = k.cluster_dims[0] ? static_cast<int>(k.cluster_dims[2]) : s.cluster_d.load();
      break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *value = s.non_portable_cluster; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *value = s.cluster_scheduling; break;
    default:
      log::warn("cuFuncGetAttribute: unknown attribute {}", static_cast<int>(attr));
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult write_attribute(const KernelResources& r, FuncSettings& s, CUfunction_attribute attr,
                         int value) {
  const module::KernelInfo& k = *r.info;
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      if (value < 0 || value > r.optin_shared() - static_cast<int>(k.shared_bytes)) {
        log::warn("cuFuncSetAttribute: MAX_DYNAMIC_SHARED_SIZE_BYTES {} exceeds the {} bytes the "
                  "device allows beside {} static bytes",
                  value, r.optin_shared(), k.shared_bytes);
        return CUDA_ERROR_INVALID_VALUE;
      }
      s.max_dynamic_shared = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
      s.carveout = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      if (k.cluster_dims[0] != 0 || value < 0 || value > 16) return CUDA_ERROR_INVALID_VALUE;
      (attr == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH    ? s.cluster_w
       : attr == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT ? s.cluster_h
                                                            : s.cluster_d) = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      if (value != 0 && value != 1) return CUDA_ERROR_INVALID_VALUE;
      s.non_portable_cluster = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT || value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
        return CUDA_ERROR_INVALID_VALUE;
      s.cluster_scheduling = value;
      return CUDA_SUCCESS;
    default:
      log::warn("cuFuncSetAttribute: attribute {} cannot be set", static_cast<int>(attr));
      return CUDA_ERROR_INVALID_VALUE;
  }
}

bool valid_cache_config(int c) {
  return c == CU_FUNC_CACHE_PREFER_NONE || c == CU_FUNC_CACHE_PREFER_SHARED ||
         c == CU_FUNC_CACHE_PREFER_L1 || c == CU_FUNC_CACHE_PREFER_EQUAL;
}

}  // namespace

CUresult ModuleManager::function_attribute(CUfunction f, CUfunction_attribute attr, int* value) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  return read_attribute(KernelResources(driver_, fn->device, fn->info()), *fn->image, *fn->settings,
                        attr, value);
}

CUresult ModuleManager::set_function_attribute(CUfunction f, CUfunction_attribute attr, int value) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  return write_attribute(KernelResources(driver_, fn->device, fn->info()), *fn->settings, attr, value);
}

CUresult ModuleManager::set_cache_config(CUfunction f, CUfunc_cache config) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  if (!valid_cache_config(config)) return CUDA_ERROR_INVALID_VALUE;
  fn->settings->cache_config = config;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::set_shared_mem_config(CUfunction f, CUsharedconfig config) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  if (config != CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE &&
      config != CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE &&
      config != CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
    return CUDA_ERROR_INVALID_VALUE;
  fn->settings->shared_config = config;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::kernel_get_attribute(CUkernel kernel, CUfunction_attribute attr, int device,
                                             int* value) {
  auto k = kernels_.find(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (!driver_.device(device)) return CUDA_ERROR_INVALID_DEVICE;
  const module::KernelInfo& info = *k->image->kernels[k->index].info;
  auto s = k->settings_for(device, default_max_dynamic_shared(info, device));
  return read_attribute(KernelResources(driver_, device, info), *k->image, *s, attr, value);
}

CUresult ModuleManager::kernel_set_attribute(CUkernel kernel, CUfunction_attribute attr, int device,
                                             int value) {
  auto k = kernels_.find(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (!driver_.device(device)) return CUDA_ERROR_INVALID_DEVICE;
  const module::KernelInfo& info = *k->image->kernels[k->index].info;
  auto s = k->settings_for(device, default_max_dynamic_shared(info, device));
  return write_attribute(KernelResources(driver_, device, info), *s, attr, value);
}

CUresult ModuleManager::kernel_set_cache_config(CUkernel kernel, CUfunc_cache config, int device) {
  auto k = kernels_.find(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (!driver_.device(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!valid_cache_config(config)) return CUDA_ERROR_INVALID_VALUE;
  const module::KernelInfo& info = *k->image->kernels[k->index].info;
  k->settings_for(device, default_max_dynamic_shared(info, device))->cache_config = config;
  return CUDA_SUCCESS;
}

}  // namespace vgpu
