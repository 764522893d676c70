// The driver's side of NCCL's host cost model (ThreadClock::nccl_group_*, issue 18), one set for
// both backends: the four hooks the NCCL plugin calls (contracts/nccl_plugin.h, nccl_group_begin
// and the rest) on the thread that calls NCCL, over that thread's clock. `Costs` is the backend's
// function answering its cluster configuration's figures ([collectives.host]);
// `NcclGroupHooks<&nccl_group_costs_of<State>>` for a backend's state.
#pragma once

#include <cstdint>

#include "timing/thread_clock.h"

namespace vgpu::timing {

// The model's figures from a cluster configuration's (simcore::NcclHostCosts; a template so that
// this layer does not depend on simcore).
template <class HostCosts>
NcclGroupCosts nccl_group_costs(const HostCosts& h) {
  return NcclGroupCosts{h.group_s, h.communicator_s, h.all_reduce_communicator_s, h.operation_s, h.enabled};
}

// The hooks over a backend's state (PassState, DriverState: `State::get()`, null before the
// driver's initialization, and its `cluster()`), whose configuration's figures are read once, at
// the first group (a group before any state is charged as measured, and so are all after it).
template <class State>
const NcclGroupCosts& nccl_group_costs_of() {
  static const NcclGroupCosts costs = [] {
    const State* s = State::get();
    return s != nullptr ? nccl_group_costs(s->cluster().collectives.host) : NcclGroupCosts{};
  }();
  return costs;
}

template <const NcclGroupCosts& (*Costs)()>
struct NcclGroupHooks {
  static void begin() { this_thread_clock().nccl_group_begin(Costs()); }
  static void operation(std::uint64_t communicator, int all_reduce) {
    this_thread_clock().nccl_group_operation(communicator, all_reduce != 0);
  }
  static void launch() { this_thread_clock().nccl_group_launch(); }
  static void end() { this_thread_clock().nccl_group_end(); }
};

}  // namespace vgpu::timing
