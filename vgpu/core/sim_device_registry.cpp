// The sim backend's answers to core/device_registry.h: the devices of DriverState.
#include "core/device_registry.h"
#include "core/driver_state.h"

namespace vgpu {
namespace {

class SimRegistry final : public DeviceRegistry {
 public:
  explicit SimRegistry(const DriverState& d) : d_(d) {}
  int device_count() const override { return d_.device_count(); }
  Device* device(int ordinal) const override { return d_.device(ordinal); }
  bool nvlink() const override { return d_.cluster().nvlink.present; }

 private:
  const DriverState& d_;
};

}  // namespace

const DeviceRegistry* device_registry() {
  const DriverState* d = DriverState::get();
  if (d == nullptr) return nullptr;
  static const SimRegistry registry(*d);  // DriverState is created once and never replaced
  return &registry;
}

CUresult backend_initialize(unsigned int flags) { return DriverState::initialize(flags); }

int backend_driver_version() { return CUDA_VERSION; }  // the toolkit vgpu was built against

}  // namespace vgpu
