// The passthrough backend's process state: the virtual devices (identity, attributes and
// capacity from the cluster config, exactly as the sim backend shows them), which physical GPU
// backs each one, and the side tables from real driver objects back to virtual devices.
//
// A virtual device is one real context on its physical GPU: real contexts of one process on
// one GPU share memory and run concurrently (shared/reference/contexts-on-one-gpu.md), so
// everything a program does on the virtual device is a real driver object of that context,
// and the real context tells which virtual device an object belongs to.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "core/device_registry.h"
#include "driver/cuda_api.h"
#include "simcore/cluster_spec.h"

namespace vgpu::status {
class Writer;
}

namespace vgpu::pt {

class RealDriver;

class PassState final : public DeviceRegistry {
 public:
  // cuInit: the real driver's cuInit, then the cluster config and the device map. The result
  // of the first call is every later call's.
  static CUresult initialize(unsigned int flags);
  // nullptr before a successful cuInit.
  static PassState* get();

  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device* device(int v) const override;
  bool nvlink() const override { return cluster_.nvlink.present; }
  // The real CUdevice behind virtual device `v`; -1 for an ordinal that is not a device (the
  // real driver then answers CUDA_ERROR_INVALID_DEVICE itself).
  int physical(int v) const;
  const simcore::ClusterSpec& cluster() const { return cluster_; }
  const RealDriver& real() const { return *real_; }

  // ---- contexts ----
  // The real context that is virtual device v's primary context, created on first use
  // (inactive: retains are counted separately).
  CUresult primary_context(int v, CUcontext* out);
  CUresult primary_retain(int v, CUcontext* out);
  CUresult primary_release(int v);
  CUresult primary_reset(int v);
  CUresult primary_state(int v, unsigned int* flags, int* active);
  CUresult primary_set_flags(int v, unsigned int flags);
  void add_context(CUcontext real, int v);
  void remove_context(CUcontext real);
  // The virtual device of a real context; -1 when vgpu did not make it.
  int device_of(CUcontext real) const;
  // The virtual device of the calling thread's current context (CUDA_ERROR_INVALID_CONTEXT
  // when none is current).
  CUresult current_device(int* v) const;

  // ---- memory accounting (capacity is the virtual device's) ----
  bool reserve(int v, uint64_t bytes);
  void release(int v, uint64_t bytes);
  // `physical`: the bytes of physical GPU memory behind it (its pages under the private policy,
  // none under shared pages), shown per virtual device by vgpu-smi --vgpu.
  void add_allocation(CUdeviceptr p, uint64_t bytes, int v, uint64_t physical);
  // Virtual device v did `busy_s` of work (a kernel or not) finishing at virtual time `finish`:
  // its busy time, kernel count and virtual clock in the status region.
  void report_work(int v, double busy_s, bool kernel, double finish);
  // Physical memory vgpu itself holds for virtual device v (contexts, shared chunks).
  void add_physical(int v, int64_t bytes);
  // Forgets an allocation and gives its bytes back; false when vgpu does not know `p`.
  bool remove_allocation(CUdeviceptr p);
  // The virtual device owning the allocation that contains `p`; -1 when unknown.
  int device_of_pointer(CUdeviceptr p) const;
  // Address ranges mapped with cuMemMap (PyTorch's expandable segments live there).
  void add_mapping(CUdeviceptr p, uint64_t bytes);
  void remove_mapping(CUdeviceptr p);
  // Whether `p` points into device memory the program allocated or mapped: launch signatures
  // leave such parameters out.
  bool is_device_pointer(uint64_t p) const;
  void add_handle(unsigned long long h, uint64_t bytes, int v);
  bool remove_handle(unsigned long long h);
  int handle_device(unsigned long long h) const;  // -1 when unknown
  // What cuMemGetInfo shows on virtual device v: its capacity minus the driver's context
  // reservation (as on a real device of the model) minus what the program allocated.
  void memory_info(int v, size_t* free, size_t* total) const;

 private:
  PassState(const RealDriver& real, simcore::ClusterSpec cluster, std::vector<int> physical);
  struct Primary {
    CUcontext ctx = nullptr;
    int refs = 0;
    unsigned int flags = 0;
  };
  struct Allocation {
    uint64_t bytes;
    int device;
    uint64_t physical = 0;
  };

  const RealDriver* real_;
  simcore::ClusterSpec cluster_;
  std::unique_ptr<status::Writer> status_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<int> physical_;  // real CUdevice per virtual device

  mutable std::mutex mu_;
  std::vector<Primary> primaries_;
  std::unordered_map<CUcontext, int> contexts_;
  std::map<CUdeviceptr, Allocation> allocations_;  // ordered: pointers inside an allocation
  std::unordered_map<unsigned long long, Allocation> handles_;
  std::map<CUdeviceptr, uint64_t> mappings_;
};

// The forwarders' translation of a device ordinal argument (VGPU_DEV in entries.inc).
int physical_device(int v);

// The real driver's entry point, or nullptr; logs once when it is missing.
void* real_symbol(const char* name);
template <class F> F real_fn(const char* name) { return reinterpret_cast<F>(real_symbol(name)); }

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
