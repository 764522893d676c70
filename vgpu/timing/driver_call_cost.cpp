#include "timing/driver_call_cost.h"

#include <string>

#include "common/settings.h"

namespace vgpu::timing {

bool charge_driver_time(Backend backend) {
  static const std::string mode = settings::text(settings::Id::driver_time);
  if (mode == "table") return true;
  if (mode == "none") return false;
  return backend == Backend::sim;
}

}  // namespace vgpu::timing
