// The objects behind CUmodule, CUfunction, CUlibrary and CUkernel handles in the sim backend.
// ModuleManager (sim/exec/module_registry.h) owns them through its handle tables.
//
// A module is an image loaded for one virtual device (the current context's, at load time):
// its functions, and its globals in that device's memory. A library is context-independent: it
// holds the parsed image and its kernels, and materialises one module per device on first use
// (cuKernelGetFunction, cuLibraryGetModule, cuLibraryGetGlobal in a context of that device).
// Image data is shared (immutable) between a library, its kernels and its per-device modules.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "front/driver/cuda_api.h"
#include "front/launch/launch_signature.h"
#include "module/image.h"

namespace vgpu {

// The function attributes a program may change (cuFuncSetAttribute, cuKernelSetAttribute).
// One object per (kernel, device): the CUfunction of a library kernel on a device shares it with
// the CUkernel's per-device setting, so either API sees the other's change.
struct FuncSettings {
  std::atomic<int> max_dynamic_shared{0};
  std::atomic<int> carveout{-1};
  std::atomic<int> cluster_w{0}, cluster_h{0}, cluster_d{0};
  std::atomic<int> non_portable_cluster{0};
  std::atomic<int> cluster_scheduling{0};
  std::atomic<int> cache_config{CU_FUNC_CACHE_PREFER_NONE};
  std::atomic<int> shared_config{CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE};
};

// What the image says about one kernel, prepared once for the launch path. The name is the
// image's own (a CUDA library's mangled names are most of its kernel tables: one copy, not three;
// issue 23, host memory per rank).
struct KernelDesc {
  std::vector<ParamSlot> params;
  uint32_t param_bytes = 0;   // end of the last parameter (what a packed buffer must hold)
  const module::KernelInfo* info = nullptr;  // points into the shared image

  const std::string& name() const { return info->name; }
};

struct LoadedImage {
  module::ModuleImage image;
  std::vector<KernelDesc> kernels;  // parallel to image.kernels
  // name -> index; the keys view image.kernels' names (never changed once prepared).
  std::unordered_map<std::string_view, size_t> kernel_index;
  uint64_t const_bytes = 0;         // total size of __constant__ globals
  uint64_t table_bytes = 0;         // what the above hold, estimated (VGPU_SIM_MEMORY_REPORT)
};

struct Function {
  CUfunction handle = nullptr;
  CUmodule module = nullptr;
  CUkernel kernel = nullptr;  // the library kernel it materialises, if any
  int device = 0;
  std::shared_ptr<const LoadedImage> image;
  size_t index = 0;
  std::shared_ptr<FuncSettings> settings;

  const KernelDesc& desc() const { return image->kernels[index]; }
  const module::KernelInfo& info() const { return *desc().info; }
};

struct Module {
  CUmodule handle = nullptr;
  CUlibrary library = nullptr;  // the library it materialises, if any
  int device = 0;
  // The context it was loaded in (null when none of `device` was current, as for a library
  // kernel resolved for another device's stream): it is unloaded when that context goes.
  CUcontext ctx = nullptr;
  std::shared_ptr<const LoadedImage> image;
  std::vector<CUfunction> functions;  // parallel to image->kernels
  struct Global {
    CUdeviceptr ptr = 0;
    size_t size = 0;
    bool managed = false;
  };
  std::unordered_map<std::string, Global> globals;  // never changed once published
};

struct Kernel {
  CUkernel handle = nullptr;
  CUlibrary library = nullptr;
  std::shared_ptr<const LoadedImage> image;
  size_t index = 0;

  std::mutex mu;
  std::map<int, std::shared_ptr<FuncSettings>> settings;  // per device, made on first use
  std::shared_ptr<FuncSettings> settings_for(int device, int default_max_dynamic_shared);
};

struct Library {
  CUlibrary handle = nullptr;
  std::shared_ptr<const LoadedImage> image;
  std::vector<CUkernel> kernels;  // parallel to image->kernels

  std::mutex mu;  // guards `modules`
  std::map<int, CUmodule> modules;  // per device, materialised on use
};

}  // namespace vgpu
