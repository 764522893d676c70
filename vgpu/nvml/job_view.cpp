#include "nvml/job_view.h"

#include <cstdio>
#include <map>

#include "front/device/device.h"
#include "simcore/cluster_config.h"
#include "simcore/gpu_catalog.h"

namespace vgpu::inspect {
namespace {

// Nodes and local positions follow from the PCI domains (vgpu::Device gives each virtual node
// its own domain), so a region alone tells which devices share a node.
// Also spells every bus id as NVML and nvidia-smi do ("00000000:18:00.0", upper-case hex).
void assign_nodes(std::vector<DeviceFacts>& devices) {
  std::map<unsigned, int> next_local;
  for (DeviceFacts& d : devices) {
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%08X:%02X:%02X.0", d.pci_domain, d.pci_bus, d.pci_device);
    d.pci_bus_id = bus_id;
    d.node = static_cast<int>(d.pci_domain);
    d.local = next_local[d.pci_domain]++;
  }
}

// NVLink settings of the configured cluster; the defaults of ClusterSpec when it cannot load
// (a job's region must stay readable even if the reader's environment is odd).
simcore::NvlinkSpec configured_nvlink() {
  simcore::ConfigResult config = simcore::load_cluster_config();
  return config.ok() ? config.cluster->nvlink : simcore::NvlinkSpec{};
}

}  // namespace

bool parse_pci_bus_id(const std::string& text, unsigned* domain, unsigned* bus, unsigned* device) {
  unsigned dom = 0, b = 0, dev = 0, fn = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &dom, &b, &dev, &fn, &tail) != 4) {
    dom = 0;
    if (std::sscanf(text.c_str(), "%x:%x.%x%c", &b, &dev, &fn, &tail) != 3) return false;
  }
  *domain = dom;
  *bus = b;
  *device = dev;
  return true;
}

// The answer of a view that threw (out of memory, mostly): false and the reason, never an
// exception into NVML's C callers or vgpu-smi.
static bool view_failed(const char* what, std::string* error) noexcept {
  try {
    if (error) *error = what;
  } catch (...) {
  }
  return false;
}

bool configured_view(JobView* out, std::string* error) noexcept try {
  simcore::ConfigResult config = simcore::load_cluster_config();
  if (!config.ok()) {
    if (error) *error = "cluster configuration rejected: " + config.error.to_string();
    return false;
  }
  const simcore::ClusterSpec& cluster = *config.cluster;
  JobView view;
  view.nvlink = cluster.nvlink;
  for (int i = 0; i < cluster.total_gpus(); ++i) {
    Device d(cluster, i, nullptr);
    DeviceFacts f;
    f.index = i;
    f.name = d.name();
    f.uuid = uuid_string(d.uuid());
    f.pci_domain = static_cast<unsigned>(d.pci().domain);
    f.pci_bus = static_cast<unsigned>(d.pci().bus);
    f.pci_device = static_cast<unsigned>(d.pci().device);
    f.capacity = d.capacity();
    f.model = simcore::find_gpu_model(cluster.model.id);
    view.devices.push_back(std::move(f));
  }
  assign_nodes(view.devices);
  view.activity.resize(view.devices.size());
  *out = std::move(view);
  return true;
} catch (const std::exception& e) {
  return view_failed(e.what(), error);
} catch (...) {
  return view_failed("unknown error", error);
}

bool job_view(uid_t uid, const std::string& job, JobView* out, std::string* error) noexcept try {
  status::Snapshot snap;
  if (!status::read_snapshot(uid, job, &snap, error)) return false;
  JobView view;
  view.job = snap.job.empty() ? job : snap.job;
  view.backend = snap.backend;
  view.nvlink = configured_nvlink();
  for (size_t i = 0; i < snap.devices.size(); ++i) {
    const status::DeviceSnapshot& s = snap.devices[i];
    DeviceFacts f;
    f.index = static_cast<int>(i);
    f.name = s.info.model;
    f.uuid = s.info.uuid;
    f.pci_bus_id = s.info.pci_bus_id;
    parse_pci_bus_id(f.pci_bus_id, &f.pci_domain, &f.pci_bus, &f.pci_device);
    f.capacity = s.info.capacity;
    f.model = simcore::find_gpu_model(f.name);
    view.devices.push_back(std::move(f));
    view.activity.push_back(activity_of(s));
  }
  assign_nodes(view.devices);
  view.processes = std::move(snap.processes);
  *out = std::move(view);
  return true;
} catch (const std::exception& e) {
  return view_failed(e.what(), error);
} catch (...) {
  return view_failed("unknown error", error);
}

DeviceActivity activity_of(const status::DeviceSnapshot& s) {
  DeviceActivity a;
  a.used = s.used, a.physical = s.physical, a.kernels = s.kernels;
  a.busy_s = s.busy_s, a.clock_s = s.clock_s, a.utilization = s.utilization();
  a.util_gpu = s.util_gpu, a.util_memory = s.util_memory, a.sm_clock_mhz = s.sm_clock_mhz;
  return a;
}

std::optional<size_t> find_device(const status::Snapshot& snapshot, const std::string& uuid) {
  for (size_t i = 0; i < snapshot.devices.size(); ++i)
    if (snapshot.devices[i].info.uuid == uuid) return i;
  return std::nullopt;
}

}  // namespace vgpu::inspect
