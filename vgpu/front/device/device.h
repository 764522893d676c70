// One virtual GPU: its identity (ordinal, UUID, PCI address, name), its capacity and what is
// charged against it, and its attributes. Immutable after creation except the memory counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "front/driver/cuda_api.h"
#include "simcore/cluster_spec.h"
#include "status/status_region.h"

namespace vgpu::status { class Writer; }

namespace vgpu {

struct PciAddress {
  int domain = 0, bus = 0, device = 0;
  std::string to_string() const;  // "0000:18:00.0", as cuDeviceGetPCIBusId writes it
};

// "GPU-76677075-0000-0000-0000-00018a3f5c21": how nvidia-smi and NVML write a UUID.
std::string uuid_string(const CUuuid& uuid);

class Device {
 public:
  // `status` (may be null) is told about every change of the memory charged to the device.
  // `gpu`: the cluster's GPU (its ordinal when CUDA_VISIBLE_DEVICES is unset).
  Device(const simcore::ClusterSpec& cluster, int gpu, status::Writer* status);

  // The cluster's GPU: the engine's and the status region's index, not the process's ordinal
  // (CUDA_VISIBLE_DEVICES renumbers those; the backend's registry maps one to the other).
  int global_gpu() const { return gpu_; }
  int node() const { return node_; }
  int local_index() const { return local_; }
  const std::string& name() const { return model_->name; }
  const simcore::GpuModel& model() const { return *model_; }
  const CUuuid& uuid() const { return uuid_; }
  const PciAddress& pci() const { return pci_; }
  uint64_t capacity() const { return capacity_; }

  // CUDA_ERROR_INVALID_VALUE for an attribute this model does not know.
  CUresult attribute(int attribute, int* value) const;

  // Memory accounting shared by every allocation path: reserve() refuses what would pass the
  // capacity (the caller returns CUDA_ERROR_OUT_OF_MEMORY), release() gives back.
  bool reserve(uint64_t bytes);
  void release(uint64_t bytes);
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t free_bytes() const { return capacity_ - used(); }

 private:
  int gpu_, node_, local_;
  int host_numa_;  // CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: the socket the GPU hangs off
  const simcore::GpuModel* model_;
  CUuuid uuid_{};
  PciAddress pci_;
  uint64_t capacity_;
  std::atomic<uint64_t> used_{0};
  status::Writer* status_;
};

// The bytes the first context of a device costs on that device (the driver's own reservations:
// local memory, printf fifo, heap, code), as cuMemGetInfo shows them. One figure for both
// backends: the sim charges it, the passthrough reports it for every virtual device.
uint64_t context_overhead_bytes(int sm_count);

// The status region's view of a cluster's devices: what vgpu-smi and NVML show.
std::vector<status::DeviceInfo> status_devices(const simcore::ClusterSpec& cluster);

}  // namespace vgpu
