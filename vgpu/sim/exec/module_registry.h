// Modules, libraries, functions, kernels and kernel launches of the sim backend (issue 3).
// OWNER: the launch helper. Entry points (sim/exec/module_api.cpp, sim/exec/launch_api.cpp) validate
// their pointers and call in here; everything returns a CUresult and never throws.
//
// Loading parses the image with vgpu/module (no GPU, nothing executes), for the architecture of
// the virtual device. A launch validates the function, dimensions, shared memory and parameters
// against the device and the image, builds the launch signature (front/launch/launch_signature.h) and
// submits a Work of kind kernel whose duration comes from the kernel-time database
// (front/launch/kernel_time_db.h) or, when it has no entry, the fallback model (front/launch/kernel_time_model.h).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "sim/core/handle_table.h"
#include "sim/core/stream_work.h"
#include "front/driver/cuda_api.h"
#include "front/launch/host_address_space.h"
#include "front/launch/kernel_time_db.h"
#include "front/launch/launch_signature.h"
#include "sim/exec/module_objects.h"
#include "sim/exec/module_resources.h"

namespace vgpu {

class NcclCollectives;
class KernelDbMisses;

class DriverState;
struct LinkState;  // a JIT link in progress (sim/exec/link_api.cpp)

// One kernel launch as the entry points receive it.
struct LaunchRequest {
  CUfunction function = nullptr;  // a CUfunction, or a CUkernel (resolved in the current context)
  LaunchShape shape;
  CUstream stream = nullptr;
  void** kernel_params = nullptr;
  void** extra = nullptr;
  bool cooperative = false;
  std::array<uint32_t, 3> cluster{0, 0, 0};  // 0,0,0: none requested
  int priority = 0;
  const char* api = "cuLaunchKernel";         // for the log line of a refused launch
};

// A validated launch, not yet submitted: what a stream (or a graph's kernel node) needs.
struct PreparedLaunch {
  std::shared_ptr<const Function> function;
  std::vector<uint8_t> params;  // the packed parameter block, a copy
  LaunchSignature signature;
  double duration_s = 0;
  bool from_database = false;
  // An NCCL kernel (is_nccl_kernel_name), decided once per launch: its name is scanned (a
  // PyTorch name is 200-300 bytes) by the database's accounting, the work's overlap rule and the
  // collective model, which read this instead.
  bool collective = false;

  Work to_work() const;
};

// What the module tables hold now, and what parsing cost over the run (VGPU_SIM_MEMORY_REPORT).
struct ModuleStats {
  uint64_t images_parsed = 0;         // over the run
  uint64_t decompressed_bytes = 0;    // over the run: fat binary entries decompressed (freed after)
  uint64_t largest_decompressed = 0;  // the largest of them (the parse's peak allocation)
  size_t libraries = 0, modules = 0, kernels = 0, functions = 0;  // live handles
  uint64_t table_bytes = 0;           // the live images' tables (an estimate, module_objects.h)
};

class ModuleManager {
 public:
  explicit ModuleManager(DriverState& driver);
  ~ModuleManager();

  // ---- modules (in the current context) ----
  CUresult load_file(const char* path, CUmodule* out);
  CUresult load_data(const void* image, CUmodule* out);
  CUresult unload(CUmodule module);
  CUresult get_function(CUmodule module, const char* name, CUfunction* out);
  CUresult function_count(CUmodule module, unsigned int* count);
  CUresult enumerate_functions(CUmodule module, CUfunction* out, unsigned int n);
  CUresult get_global(CUmodule module, const char* name, CUdeviceptr* ptr, size_t* bytes);

  // A context is being destroyed (or a primary context reset): unload its modules, free their
  // globals, and drop the per-device modules that libraries materialised in it (a library
  // kernel used again later materialises a fresh one). Called by the context manager before
  // the memory manager frees the context's remaining allocations.
  void context_destroyed(CUcontext ctx);

  // ---- libraries (context-independent) ----
  CUresult library_load_data(const void* image, CUlibrary* out);
  CUresult library_load_file(const char* path, CUlibrary* out);
  CUresult library_unload(CUlibrary library);
  CUresult library_get_kernel(CUlibrary library, const char* name, CUkernel* out);
  CUresult library_kernel_count(CUlibrary library, unsigned int* count);
  CUresult library_enumerate_kernels(CUlibrary library, CUkernel* out, unsigned int n);
  CUresult library_get_module(CUlibrary library, CUmodule* out);  // current context's device
  CUresult library_get_global(CUlibrary library, const char* name, bool managed, CUdeviceptr* ptr,
                              size_t* bytes);
  CUresult kernel_get_function(CUkernel kernel, CUfunction* out);  // current context's device
  CUresult kernel_get_library(CUkernel kernel, CUlibrary* out);
  CUresult kernel_get_name(CUkernel kernel, const char** name);
  CUresult kernel_param_info(CUkernel kernel, size_t index, size_t* offset, size_t* size);
  CUresult kernel_get_attribute(CUkernel kernel, CUfunction_attribute attr, int device, int* value);
  CUresult kernel_set_attribute(CUkernel kernel, CUfunction_attribute attr, int device, int value);
  CUresult kernel_set_cache_config(CUkernel kernel, CUfunc_cache config, int device);

  // ---- functions ----
  // A live CUfunction, or a CUkernel resolved for the current context. INVALID_HANDLE otherwise
  // (INVALID_CONTEXT for a CUkernel with no current context).
  CUresult resolve_function(CUfunction f, std::shared_ptr<const Function>* out);
  CUresult function_attribute(CUfunction f, CUfunction_attribute attr, int* value);
  CUresult set_function_attribute(CUfunction f, CUfunction_attribute attr, int value);
  CUresult set_cache_config(CUfunction f, CUfunc_cache config);
  CUresult set_shared_mem_config(CUfunction f, CUsharedconfig config);
  CUresult function_name(CUfunction f, const char** name);
  CUresult function_param_info(CUfunction f, size_t index, size_t* offset, size_t* size);
  CUresult function_module(CUfunction f, CUmodule* out);

  // ---- occupancy (sim/exec/module_occupancy.cpp) ----
  CUresult max_active_blocks(CUfunction f, int block_size, size_t dynamic_shared, int* blocks);
  CUresult max_potential_block_size(CUfunction f, CUoccupancyB2DSize shared_of_block,
                                    size_t dynamic_shared, int block_limit, int* min_grid,
                                    int* block_size);
  CUresult available_dynamic_shared(CUfunction f, int blocks, int block_size, size_t* bytes);
  // Thread-block clusters (cuOccupancyMaxActiveClusters / MaxPotentialClusterSize).
  CUresult max_active_clusters(CUfunction f, const CUlaunchConfig& config, int* clusters);
  CUresult max_potential_cluster_size(CUfunction f, const CUlaunchConfig& config, int* size);

  // ---- launches (sim/exec/launch.cpp) ----
  // Validates and prepares a launch on the stream's device (nothing is submitted).
  CUresult prepare_launch(const LaunchRequest& request, bool per_thread, PreparedLaunch* out);
  // prepare_launch() then submit to the stream.
  CUresult launch(const LaunchRequest& request, bool per_thread);

  // The virtual duration of a launch signature on this cluster's GPU model: the database's, else
  // the fallback model's (with what the launch path knows beyond the signature). `from_database`
  // tells which. `collective`: an NCCL kernel, whose time the collective model gives at submission
  // (nccl_collectives.h): counted as such in the misses' report, never listed as a miss.
  double kernel_duration(const LaunchSignature& signature, bool* from_database = nullptr,
                         const LaunchHints& hints = {}, bool collective = false);
  KernelTimeDb& kernel_times() { return *kernel_times_; }
  NcclCollectives& nccl() { return *nccl_; }
  ModuleStats stats() const;
  // At exit: the signatures the database lacked, for vgpu-run --kernel-db (front/launch/kernel_db_misses.h).
  void write_kernel_db_misses();
  // The JIT linker's states by CUlinkState handle (sim/exec/link_api.cpp).
  HandleTable<LinkState>& link_states() { return link_states_; }

 private:
  CUresult current_device(int* device) const;
  // resolve_function() for a CUkernel materialised on `device` (-1: the current context's).
  CUresult resolve_on(CUfunction f, int device, std::shared_ptr<const Function>* out);
  CUresult kernel_function_on(CUkernel kernel, int device, CUfunction* out);
  CUresult parse(const void* image, const char* path, const char* api,
                 std::shared_ptr<const LoadedImage>* out) const;
  CUresult make_module(std::shared_ptr<const LoadedImage> image, int device, CUlibrary library,
                       CUkernel const* kernels, CUmodule* out);
  CUresult make_library(std::shared_ptr<const LoadedImage> image, CUlibrary* out);
  void destroy_module(const std::shared_ptr<Module>& module);
  CUresult library_module(const std::shared_ptr<Library>& library, int device,
                          std::shared_ptr<Module>* out);
  int default_max_dynamic_shared(const module::KernelInfo& info, int device) const;
  int device_attribute(int device, CUdevice_attribute attr, int fallback) const;

  DriverState& driver_;
  int sm_arch_ = 0;
  std::unique_ptr<KernelTimeDb> kernel_times_;
  HostAddressSpace host_addresses_;  // masked in launch signatures (front/launch/launch_signature.h)
  std::unique_ptr<NcclCollectives> nccl_;  // NCCL kernels timed by the collective model
  std::unique_ptr<KernelDbMisses> misses_;  // signatures the database lacked (VGPU_KERNEL_DB_MISSES)
  // What each device offers a launch, by ordinal, read once (module_resources.h); never shrinks,
  // so references stay valid.
  const DeviceFigures& device_figures(int device);
  std::shared_mutex figures_mu_;
  std::vector<std::unique_ptr<const DeviceFigures>> figures_;
  mutable std::atomic<uint64_t> images_parsed_{0}, decompressed_bytes_{0}, largest_decompressed_{0};
  HandleTable<Module> modules_;
  HandleTable<Function> functions_;
  HandleTable<Library> libraries_;
  HandleTable<Kernel> kernels_;
  HandleTable<LinkState> link_states_;
};

}  // namespace vgpu
