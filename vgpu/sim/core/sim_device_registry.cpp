// The sim backend's answers to front/device/device_registry.h: the devices of DriverState.
#include "front/device/device_registry.h"
#include "sim/core/driver_state.h"
#include "sim/core/thread_state.h"
#include "sim/core/virtual_clock.h"
#include "timing/thread_clock.h"

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

// A thread has a virtual clock from its first submission of work, when it becomes a rank of the
// engine (vclock::earliest_start), until it exits: that is when the clock starts to mean the
// simulated cluster's time (before, it only counted CPU time). Threads that never submit
// (NCCL's watchdog, a rendezvous thread, the driver's own workers) answer false and keep real
// time. Not bracketed like a driver call: the reading costs one CPU-time read (a system call,
// 0.2-2 us), where a bracket costs two and may take the engine's lock to renew the floor; the
// CPU time of the read is the program's own and is charged to its clock like any other.
// The thread's state is only looked at, never created here: this runs inside the caller's
// clock_gettime, possibly in an allocator or in a thread being torn down.
bool backend_thread_virtual_now(double* seconds) {
  ThreadState* t = this_thread_if_any();
  if (t == nullptr || t->rank <= ThreadState::kNoRank) return false;  // never submitted, or exiting
  *seconds = vclock::now();
  return true;
}

// Moving the clock forward keeps the thread's promise to the engine (a floor is a lower bound);
// the next call renews it. Only threads that are ranks have a clock to move.
bool backend_thread_handoff(double seconds) {
  ThreadState* t = this_thread_if_any();
  if (t == nullptr || t->rank <= ThreadState::kNoRank) return false;
  timing::this_thread_clock().advance_to(seconds, timing::ClockTally::handoff);
  return true;
}

bool backend_thread_in_call() { return vclock::in_call(); }

}  // namespace vgpu
