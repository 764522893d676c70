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

// Made once, out of line: inlined, its string work made the asking function save five registers
// on every call.
__attribute__((noinline)) const Charging& charging() {
  static const Charging c;
  return c;
}
}  // namespace

bool charge_driver_time(Backend backend) {
  static const Charging* const c = &charging();
  return backend == Backend::sim ? c->sim : c->passthrough;
}

}  // namespace vgpu::timing
