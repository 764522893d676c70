// NCCL profiler ABI v5 (NCCL 2.28, 2.29): a thin adapter over the launch tags
// (profiler/launch_tags.h). Profiler v6's table shares every entry but startEvent.
#include "abi/profiler_v5.h"

#include "adapters/profiler_common.h"

namespace vgpu::nccl::adapt {
namespace {

ncclResult_t start_v5(void* context, void** handle, ncclProfilerEventDescr_v5_t* d) {
  return start_event(context, handle, d);
}

}  // namespace
}  // namespace vgpu::nccl::adapt

using namespace vgpu::nccl::adapt;

VGPU_NCCL_EXPORT ncclProfiler_v5_t ncclProfiler_v5;
ncclProfiler_v5_t ncclProfiler_v5 = {kProfilerName, profiler_init, start_v5, profiler_stop, profiler_record,
                                     profiler_finalize};
