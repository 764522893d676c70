// What a job looks like from outside: the virtual devices, their memory, activity and virtual
// clock, and the processes holding memory. One piece of code for vgpu-smi and the virtual NVML,
// so both always show the same thing.
//
// Identities (name, UUID, PCI bus id, capacity) come from the job's status region, which the
// driver filled from vgpu::Device; without a region they are computed by vgpu::Device from the
// configured cluster. Either way there is one UUID/PCI scheme: the driver's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "simcore/cluster_spec.h"
#include "status/status_region.h"

namespace vgpu::inspect {

// The version strings every tool reports; one place for all of them.
inline constexpr const char* kDriverVersion = "580.159.04";  // vgpu's virtual driver version
inline constexpr int kCudaDriverVersion = 13000;             // CUDA 13.0, as cuDriverGetVersion
inline constexpr const char* kNvmlVersion = "13.580.159.04";

struct DeviceFacts {  // fixed for the job's lifetime
  int index = 0;
  std::string name, uuid, pci_bus_id;
  unsigned pci_domain = 0, pci_bus = 0, pci_device = 0;
  uint64_t capacity = 0;
  int node = 0;                               // the PCI domain: one per virtual node
  int local = 0;                              // position among the devices of its node
  const simcore::GpuModel* model = nullptr;   // catalog facts; null if the model is unknown
};

struct DeviceActivity {  // changes while the job runs
  uint64_t used = 0, physical = 0, kernels = 0;
  double busy_s = 0, clock_s = 0;
  double utilization = 0;  // the whole run: busy / clock, 0..1
  // Over the last status::kUtilizationWindow of virtual time (NVML's utilization rates), 0..1.
  double util_gpu = 0, util_memory = 0;
  unsigned sm_clock_mhz = 0;  // 0 without a job: readers then report the idle clock
};

// The activity of one device of a status snapshot.
DeviceActivity activity_of(const status::DeviceSnapshot& s);

struct JobView {
  std::string job;                      // empty when no job region was read
  std::string backend;                  // "sim", "passthrough"; empty without a job
  std::vector<DeviceFacts> devices;
  std::vector<DeviceActivity> activity;  // one per device
  std::vector<status::ProcessSnapshot> processes;
  simcore::NvlinkSpec nvlink;           // from the configured cluster
  bool has_job() const { return !job.empty(); }
};

// The configured cluster (VGPU_CONFIG, environment overrides), nobody running on it.
bool configured_view(JobView* out, std::string* error) noexcept;

// The job's region read now (dead processes reclaimed). False + error when there is no region or
// it cannot be read (another user's: "Permission denied").
bool job_view(uid_t uid, const std::string& job, JobView* out, std::string* error) noexcept;

// The activity of `facts` in `snapshot`, matched by UUID (a region created by a process with
// another device list still lines up); nullopt when the device is not in the snapshot.
std::optional<size_t> find_device(const status::Snapshot& snapshot, const std::string& uuid);

// Parses "domain:bus:device.function" or "bus:device.function" (hex, any case).
bool parse_pci_bus_id(const std::string& text, unsigned* domain, unsigned* bus, unsigned* device);

}  // namespace vgpu::inspect
