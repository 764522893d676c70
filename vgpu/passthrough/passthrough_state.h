// The passthrough backend's process state: the virtual devices (identity, attributes and
// capacity from the cluster config, exactly as the sim backend shows them), which physical GPU
// backs each one, and the side tables from real driver objects back to virtual devices.
//
// A virtual device is one real context on its physical GPU: real contexts of one process on
// one GPU share memory and run concurrently (shared/reference/contexts-on-one-gpu.md), so
// everything a program does on the virtual device is a real driver object of that context,
// and the real context tells which virtual device an object belongs to.
//
// Made at cuInit and owned by the backend's root object (passthrough.h), with the rest of the
// backend's state.
#pragma once

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "front/device/device.h"
#include "front/device/device_registry.h"
#include "front/driver/cuda_api.h"
#include "front/launch/host_address_space.h"
#include "passthrough/context_stubs.h"
#include "passthrough/device_activity.h"
#include "passthrough/device_pools.h"
#include "passthrough/futex_lock.h"
#include "simcore/cluster_spec.h"
#include "simcore/topology.h"

namespace vgpu::status {
class Writer;
}

namespace vgpu::pt {

class RealDriver;
class PassState;
// The root's state as it published it (passthrough.cpp: set once by Passthrough::initialize,
// never cleared), read by PassState::get().
extern std::atomic<PassState*> published_state;

class PassState final : public DeviceRegistry {
 public:
  // cuInit (Passthrough::initialize): the real driver's cuInit, then the cluster config and
  // the device map. The result of the first call is every later call's.
  static CUresult initialize(unsigned int flags);
  // The backend root's (passthrough.h); nullptr before a successful cuInit. Inline: the root
  // publishes its state once, when cuInit made it, where this reads it without the root's lookup
  // (a static's guard and two calls, asked two or three times a launch or a copy: issue 21).
  static PassState* get() { return published_state.load(std::memory_order_acquire); }
  // The virtual devices from the cluster config, on the real driver's GPUs; an error (logged)
  // when the config or the GPU map is refused. Never throws.
  static CUresult create(const RealDriver& real, PassState** out);

  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device* device(int v) const override;
  bool nvlink() const override { return cluster_.nvlink.present; }
  // The real CUdevice behind virtual device `v`; -1 for an ordinal that is not a device (the
  // real driver then answers CUDA_ERROR_INVALID_DEVICE itself).
  int physical(int v) const;
  // The virtual device a physical ordinal the real driver reports stands for: the calling
  // thread's current one when it runs on that GPU, else the first on it (-1: none).
  int virtual_of_physical(int p) const;
  // Whether another virtual device runs on the same physical GPU as `v` (then the kernels of
  // several contexts time-slice it and measurements can be disturbed).
  bool shares_physical(int v) const;
  // The scheduling flags a real context vgpu made was given beyond the program's (the bits to take
  // out of what cuCtxGetFlags reports); 0 for any other context.
  unsigned sched_flags_added(CUcontext real) const;
  const simcore::ClusterSpec& cluster() const { return cluster_; }
  // The virtual cluster's links and routes (copies between virtual devices are priced on them).
  const simcore::Topology& topology() const { return topology_; }
  // Each virtual device's default and current stream-ordered pools (device_pools.h).
  DevicePools& pools() { return pools_; }
  const RealDriver& real() const { return *real_; }

  // ---- contexts ----
  // Two handles per virtual primary context: the real context behind it (the GPU's own primary
  // context for the first virtual device on each GPU, a created one for the others) and the
  // handle the program holds. They are the same unless VGPU_LAZY_CONTEXTS is on: then the real
  // context is made when first used, and until then the program holds a stub for every device
  // but the first of each GPU (context_stubs.h), or for that one the real driver's own inactive
  // primary context handle (what its 6bd5fb6c[2] answers, costing nothing).
  //
  // The real context of virtual device v, made now if it was not (inactive: retains are counted
  // separately).
  CUresult primary_context(int v, CUcontext* out);
  // The handle the program holds for v's primary context, without making a real context where
  // VGPU_LAZY_CONTEXTS lets it wait. `real_handle(p, &h)`, when given, is the real driver's
  // 6bd5fb6c[2]: the inactive handle of physical GPU p's own primary context.
  CUresult primary_handle(int v, CUcontext* out, CUresult (*real_handle)(CUcontext*, CUdevice) = nullptr);
  // cuDevicePrimaryCtxRetain: the real context is made, the program's handle comes back.
  CUresult primary_retain(int v, CUcontext* out);
  // Whether `ctx` (a program's handle or a real context) is a virtual device's primary context.
  bool is_primary(CUcontext ctx) const;
  // A context the program passes: a stub becomes its real context (made now; the error when
  // that fails), anything else is left as it is.
  CUresult real_context(CUcontext* ctx);
  // A context the real driver hands out: the program's handle for it (a stub where the program
  // holds one), anything else as it is.
  CUcontext program_context(CUcontext real) const;
  CUresult primary_release(int v);
  CUresult primary_reset(int v);
  CUresult primary_state(int v, unsigned int* flags, int* active);
  CUresult primary_set_flags(int v, unsigned int flags);
  void add_context(CUcontext real, int v);
  void remove_context(CUcontext real);
  // The virtual device of a context (real or the program's stub); -1 when vgpu did not make it.
  int device_of(CUcontext ctx) const;
  // The virtual device of the calling thread's current context (CUDA_ERROR_INVALID_CONTEXT
  // when none is current), and that context when `ctx` is not null.
  CUresult current_device(int* v, CUcontext* ctx = nullptr) const;

  // ---- memory accounting (capacity is the virtual device's) ----
  // Bytes are charged in whole 2 MiB pages; a size whose rounding would pass 2^64 is refused.
  bool reserve(int v, uint64_t bytes);
  void release(int v, uint64_t bytes);
  // What one allocation holds on its virtual device. `physical`: the bytes of physical GPU
  // memory behind it (its pages under the private policy, none under shared pages), shown per
  // virtual device by vgpu-smi --vgpu. `ctx`: the real context whose destruction frees it
  // (nullptr: it outlives contexts, as stream-ordered pool memory does).
  struct Charge {
    uint64_t bytes = 0;
    int device = -1;
    uint64_t physical = 0;
    CUcontext ctx = nullptr;
  };
  void add_allocation(CUdeviceptr p, uint64_t bytes, int v, uint64_t physical, CUcontext ctx = nullptr);
  // Virtual device v did `busy_s` of work (a kernel or not) finishing at virtual time `finish`:
  // its busy time, kernel count, virtual clock and utilization in the status region
  // (device_activity.h).
  void report_work(int v, double busy_s, bool kernel, double finish);
  // What report_work batched (device_activity.h) goes to the status region now: at every
  // synchronization and at exit.
  void flush_reported_work();
  // Physical memory vgpu itself holds for virtual device v (contexts, shared chunks).
  void add_physical(int v, int64_t bytes);
  // Frees take the record out before the real free (which makes the address another thread's
  // to be given), put it back if the real driver refuses, and give its bytes back once it did.
  bool take_allocation(CUdeviceptr p, Charge* out);
  void put_back_allocation(CUdeviceptr p, const Charge& c);
  void give_back(const Charge& c);
  // Forgets an allocation and gives its bytes back; false when vgpu does not know `p`.
  bool remove_allocation(CUdeviceptr p);
  // A real context was destroyed, and the allocations made in it with it: their bytes go back.
  void allocations_destroyed_with(CUcontext ctx);
  // The virtual device owning the allocation that contains `p`; -1 when unknown.
  int device_of_pointer(CUdeviceptr p) const;
  // Address ranges mapped with cuMemMap (PyTorch's expandable segments live there), with the
  // handle mapped there. A handle's charge stays until it is released and its last mapping is
  // unmapped, as the real driver keeps the memory that long.
  void add_mapping(CUdeviceptr p, uint64_t bytes, unsigned long long handle);
  // Forgets every mapping starting in [p, p + bytes).
  void remove_mapping(CUdeviceptr p, uint64_t bytes);
  // Whether `p` points into device memory the program allocated or mapped: launch signatures
  // leave such parameters out.
  bool is_device_pointer(uint64_t p) const;
  // Bumped whenever the device allocations or mappings change (is_device_pointer's answers may):
  // what a cache of its answers is valid under (launch_facts.cpp).
  uint64_t address_generation() const { return address_generation_.load(std::memory_order_acquire); }
  // The process's host mappings, which launch signatures leave out as well.
  HostAddressSpace& host_addresses() { return host_addresses_; }
  void add_handle(unsigned long long h, uint64_t bytes, int v);
  // cuMemRelease: the handle's record is taken out before the real release (the handle value is
  // then free for reuse) and put back if the real driver refuses.
  struct HandleCharge;
  std::shared_ptr<HandleCharge> take_handle(unsigned long long h);
  void put_back_handle(unsigned long long h, std::shared_ptr<HandleCharge> c);
  // The real release succeeded: the bytes go back now, or with the last unmap.
  void handle_released(const std::shared_ptr<HandleCharge>& c);
  bool remove_handle(unsigned long long h);
  int handle_device(unsigned long long h) const;  // -1 when unknown
  // What cuMemGetInfo shows on virtual device v: its capacity minus the driver's context
  // reservation (as on a real device of the model) minus what the program allocated.
  void memory_info(int v, size_t* free, size_t* total) const;

 private:
  PassState(const RealDriver& real, simcore::ClusterSpec cluster, std::vector<int> physical);
  // device_of_pointer's lookup; with mu_ held.
  int allocation_device(CUdeviceptr p) const;
  struct Primary {
    CUcontext ctx = nullptr;       // the real context; null until made
    CUcontext handle = nullptr;    // the program's (primary_handle); null until asked for
    int refs = 0;
    unsigned int flags = 0;        // the program's (cuDevicePrimaryCtxSetFlags)
    bool blocking_added = false;   // the real context waits blocking although flags say auto
  };
  struct Mapping {
    uint64_t bytes = 0;
    std::shared_ptr<HandleCharge> handle;  // nullptr: a handle vgpu does not charge
  };

  const RealDriver* real_;
  simcore::ClusterSpec cluster_;
  simcore::Topology topology_;
  std::unique_ptr<status::Writer> status_;
  std::unique_ptr<DeviceActivity> activity_;  // reports into status_
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<int> physical_;  // real CUdevice per virtual device
  DevicePools pools_;

  mutable FutexLock mu_;  // futex_lock.h: taken on every copy (is_device_pointer)
  std::vector<Primary> primaries_;
  const bool lazy_;  // VGPU_LAZY_CONTEXTS
  // The real context behind each virtual device's stub, once made (program_context reads it
  // without the lock: cuCtxGetCurrent asks on every call).
  std::unique_ptr<std::atomic<CUcontext>[]> stub_real_;
  std::unordered_map<CUcontext, int> contexts_;
  std::map<CUdeviceptr, Charge> allocations_;  // ordered: pointers inside an allocation
  // The node of the allocation freed last, for the next one: a program that frees and allocates
  // in turn (a caching allocator's misses, the call-overhead bench) allocates no node per call.
  std::map<CUdeviceptr, Charge>::node_type spare_allocation_;
  std::unordered_map<unsigned long long, std::shared_ptr<HandleCharge>> handles_;
  std::map<CUdeviceptr, Mapping> mappings_;
  std::atomic<uint64_t> address_generation_{0};  // see address_generation()
  HostAddressSpace host_addresses_;
};

// A cuMemCreate handle's charge, shared by the handle and its mappings (guarded by mu_).
struct PassState::HandleCharge {
  Charge charge;
  int mappings = 0;
  bool released = false;
};

// cuCtxDestroy: the allocations made in `ctx` went with it (call after the real destroy).
void allocations_destroyed_with(CUcontext ctx);

// A context the program passes to the real driver (VGPU_CTX in entries.inc, and the entry points
// vgpu answers itself): a stub becomes its real context, made now; the error when that fails.
inline CUresult real_context_arg(CUcontext* ctx) {
  if (!context_stubs::is_stub(*ctx)) return CUDA_SUCCESS;
  PassState* s = PassState::get();
  return s != nullptr ? s->real_context(ctx) : CUDA_ERROR_NOT_INITIALIZED;
}
// A context the real driver wrote to `*out` on success, as the program knows it.
inline CUresult program_context_out(CUresult r, CUcontext* out) {
  if (r == CUDA_SUCCESS && out != nullptr && *out != nullptr)
    if (const PassState* s = PassState::get()) *out = s->program_context(*out);
  return r;
}

// The forwarders' translation of a device ordinal argument (VGPU_DEV in entries.inc).
int physical_device(int v);
// What physical_device gives a virtual ordinal that is not a device: no real driver has it.
inline constexpr int kNoPhysicalDevice = 1 << 20;

// The real driver's entry point, or nullptr; logs once when it is missing.
void* real_symbol(const char* name);
// What a call through real_fn reaches when the real driver lacks the entry point (an older
// driver): CUDA_ERROR_NOT_SUPPORTED instead of a jump to null. Every entry point vgpu forwards
// returns CUresult; the stub takes no arguments, which the x86-64 calling convention leaves to
// the caller to clean up.
CUresult CUDAAPI missing_real_entry();
template <class F> F real_fn(const char* name) {
  void* p = real_symbol(name);
  // (Through void*: a function pointer cast to another type is what -Wcast-function-type flags.)
  return reinterpret_cast<F>(p != nullptr ? p : reinterpret_cast<void*>(&missing_real_entry));
}

}  // namespace vgpu::pt

// The real driver's `name` as a function of type F, looked up once per call site (dlsym costs
// more than a forwarded launch).
#define VGPU_REAL(name, ...)                                                          \
  ([]() -> __VA_ARGS__ {                                                              \
    static const auto fn_ = ::vgpu::pt::real_fn<__VA_ARGS__>(name);                   \
    return fn_;                                                                       \
  }())

namespace vgpu::pt {

}  // namespace vgpu::pt
