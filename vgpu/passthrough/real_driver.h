// The real NVIDIA driver under the passthrough backend: found on its own, opened from its own
// path beside vgpu (which took the name libcuda.so.1), and asked for entry points by name.
#pragma once

#include <string>
#include <vector>

namespace vgpu::pt {

class RealDriver {
 public:
  // The process's real driver, opened on first use; nullptr (and one log line naming every
  // path tried) when there is none. Never vgpu itself.
  static const RealDriver* get();

  // The real driver's exported entry point `name`; nullptr when it has none.
  void* symbol(const char* name) const;
  template <class F> F fn(const char* name) const { return reinterpret_cast<F>(symbol(name)); }
  const std::string& path() const { return path_; }

 private:
  RealDriver(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

// Where the real driver is looked for, in order: VGPU_REAL_LIBCUDA; the versioned
// libcuda.so.<driver version> in the folder vgpu was loaded from (a container runtime mounts
// vgpu over libcuda.so.1 and leaves the real versioned file beside it); the usual locations.
std::vector<std::string> real_driver_candidates();

}  // namespace vgpu::pt
