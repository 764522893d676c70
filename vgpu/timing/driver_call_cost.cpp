#include "timing/driver_call_cost.h"

#include <string>

#include "common/settings.h"

namespace vgpu::timing {

namespace {
// Which backends charge, read once: this is asked on every timed driver call.
struct Charging {
  bool sim = false, passthrough = false;
  Charging() {
    const std::string mode = settings::text(settings::Id::driver_time);
    sim = mode == "table" || mode == "auto";
    passthrough = mode == "table";
  }
};
}  // namespace

bool charge_driver_time(Backend backend) {
  static const Charging charging;
  return backend == Backend::sim ? charging.sim : charging.passthrough;
}

}  // namespace vgpu::timing
