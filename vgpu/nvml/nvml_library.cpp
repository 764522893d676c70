#include "nvml/nvml_library.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "common/log.h"

namespace vgpu::nvml {

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
    built_ = true;
    log::info("vgpu NVML: {} virtual devices ({})", devices_.size(),
              view.has_job() ? "job " + view.job : "configured cluster");
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
