#include "nvml/nvml_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/settings.h"
#include "common/visible_devices.h"

namespace vgpu::nvml {

namespace {

// The node whose devices a large cluster's NVML enumerates (nvml_library.h); -1: all.
// `renumbered`: the process's driver numbers its devices by CUDA_VISIBLE_DEVICES (the sim backend;
// the passthrough's virtual devices are not renumbered: CUDA_VISIBLE_DEVICES is the real driver's).
int enumerated_node(const std::vector<nvmlDevice_st>& devices, bool renumbered) {
  if (settings::is_set(settings::Id::node_index)) return static_cast<int>(settings::integer(settings::Id::node_index));
  // The process's CUDA ordinals are those CUDA_VISIBLE_DEVICES lists (the sim backend renumbers
  // them as the real driver does, common/visible_devices.h): ordinal -> the cluster's GPU.
  std::vector<std::string> uuids;
  for (const nvmlDevice_st& d : devices) uuids.push_back(d.facts.uuid);
  const std::optional<VisibleDevices> visible =
      renumbered ? visible_devices_from_env(uuids, "NVML") : std::optional<VisibleDevices>();
  auto global = [&](int ordinal) {
    if (!visible) return ordinal < static_cast<int>(devices.size()) ? ordinal : -1;
    return ordinal < static_cast<int>(visible->gpus.size()) ? visible->gpus[ordinal] : -1;
  };
  // The driver of this process, if loaded: its current device's node.
  if (void* cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY)) {
    using GetDevice = int (*)(int*);
    auto get = reinterpret_cast<GetDevice>(dlsym(cuda, "cuCtxGetDevice"));
    int d = -1;
    const bool ok = get != nullptr && get(&d) == 0 && d >= 0 && global(d) >= 0;
    dlclose(cuda);
    if (ok) return devices[global(d)].facts.node;
  }
  // No current device yet (PyTorch counts devices through NVML before it picks one): the node
  // of the visible GPUs when they are all on one node, as a launcher gives a node's processes.
  if (visible && !visible->gpus.empty()) {
    const int node = devices[visible->gpus[0]].facts.node;
    bool one_node = true;
    for (int g : visible->gpus) one_node = one_node && devices[g].facts.node == node;
    if (one_node) return node;
  }
  return -1;
}

}  // namespace

Library& Library::get() {
  static Library* library = new Library;  // never destroyed: handles outlive static destructors
  return *library;
}

nvmlReturn_t Library::init() noexcept try {
  std::lock_guard lock(mutex_);
  if (!built_) {
    inspect::JobView view;
    std::string job_error, config_error;
    // A job's status region describes its devices only while one of its processes is alive; a
    // region left by finished processes (possibly with another configuration) is not this job.
    const bool live_job = inspect::job_view(getuid(), status::current_job_id(), &view, &job_error) &&
                          !view.processes.empty();
    if (!live_job && !inspect::configured_view(&view, &config_error)) {
      log::always("vgpu NVML: " + config_error);
      return NVML_ERROR_UNKNOWN;
    }
    devices_.reserve(view.devices.size());
    for (inspect::DeviceFacts& f : view.devices) devices_.push_back({std::move(f)});
    nvlink_ = view.nvlink;
    backend_ = view.backend;
    for (unsigned i = 0; i < devices_.size(); ++i) {  // devices are numbered node by node
      const auto node = static_cast<unsigned>(devices_[i].facts.node);
      if (node >= node_first_.size()) node_first_.resize(node + 1, i);
    }
    built_ = true;
    log::info("vgpu NVML: {} virtual devices ({})", devices_.size(),
              view.has_job() ? "job " + view.job : "configured cluster");
  }
  if (devices_.size() > kMaxEnumerated) {
    int node = enumerated_node(devices_, backend_ != "passthrough");
    if (node >= static_cast<int>(node_first_.size())) node = -1;
    if (node != node_.exchange(node))
      log::info("vgpu NVML: {} virtual devices, more than NCCL accepts in one NVML: enumerating {}", devices_.size(),
                node < 0 ? std::string("all (no current device)") : fmt::format("node {}'s", node));
  }
  refs_.fetch_add(1, std::memory_order_acq_rel);
  return NVML_SUCCESS;
} catch (const std::exception& e) {  // out of memory building the devices: fail, never abort
  log::error("vgpu NVML: nvmlInit: {}", e.what());
  return NVML_ERROR_UNKNOWN;
} catch (...) {
  return NVML_ERROR_UNKNOWN;
}

nvmlReturn_t Library::shutdown() {
  std::lock_guard lock(mutex_);
  if (refs_.load(std::memory_order_acquire) == 0) return NVML_ERROR_UNINITIALIZED;
  refs_.fetch_sub(1, std::memory_order_acq_rel);
  return NVML_SUCCESS;
}

nvmlReturn_t Library::check_initialized() const {
  return refs_.load(std::memory_order_acquire) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t Library::check(nvmlDevice_t device) const {
  if (nvmlReturn_t r = check_initialized(); r != NVML_SUCCESS) return r;
  // Compare addresses as integers: the handle may point anywhere, or nowhere.
  const auto p = reinterpret_cast<uintptr_t>(device);
  const auto base = reinterpret_cast<uintptr_t>(devices_.data());
  const uintptr_t size = sizeof(nvmlDevice_st);
  if (device == nullptr || p < base || p >= base + size * devices_.size() || (p - base) % size != 0) {
    log::warn("NVML: invalid device handle {}", static_cast<const void*>(device));
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

unsigned Library::count() const {
  const int node = node_.load(std::memory_order_acquire);
  if (node < 0) return static_cast<unsigned>(devices_.size());
  const unsigned end = node + 1 < static_cast<int>(node_first_.size()) ? node_first_[node + 1]
                                                                     : static_cast<unsigned>(devices_.size());
  return end - node_first_[node];
}

nvmlDevice_t Library::handle(unsigned index) {
  const int node = node_.load(std::memory_order_acquire);
  return &devices_[(node < 0 ? 0 : node_first_[node]) + index];
}

unsigned Library::index_of(const nvmlDevice_st& d) const {
  return static_cast<unsigned>(node_.load(std::memory_order_acquire) < 0 ? d.facts.index : d.facts.local);
}

int Library::devices_on_node(const nvmlDevice_st& d) const {
  int n = 0;
  for (const nvmlDevice_st& other : devices_) n += other.facts.node == d.facts.node;
  return n;
}

LiveDevice Library::live(const nvmlDevice_st& d) const noexcept {
  LiveDevice out;
  try {
    status::Snapshot snap;
    if (!status::read_snapshot(getuid(), status::current_job_id(), &snap, nullptr)) return out;
    const std::optional<size_t> at = inspect::find_device(snap, d.facts.uuid);
    if (!at) return out;
    const status::DeviceSnapshot& s = snap.devices[*at];
    out.activity = inspect::activity_of(s);
    for (const status::ProcessSnapshot& p : snap.processes)
      if (*at < p.memory.size() && p.memory[*at] > 0)
        out.processes.emplace_back(static_cast<unsigned>(p.pid), p.memory[*at]);
  } catch (...) {  // out of memory copying the region: report no activity rather than abort
    out = LiveDevice{};
  }
  return out;
}

nvmlReturn_t copy_string(const std::string& text, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace vgpu::nvml
