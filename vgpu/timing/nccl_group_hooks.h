// The driver's side of NCCL's host cost model (ThreadClock::nccl_group_*, issue 18), one set for
// both backends: the four hooks the NCCL plugin calls (contracts/nccl_plugin.h, nccl_group_begin
// and the rest) on the thread that calls NCCL, over that thread's clock. `Costs` is the backend's
// function answering its cluster configuration's figures ([collectives.host]).
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
