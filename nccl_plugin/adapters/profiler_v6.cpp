// NCCL profiler ABI v6 (NCCL 2.29 and 2.30): v5 plus copy-engine collectives, which move no
// bytes through the net plugin and so are not followed.
#include "abi/profiler_v6.h"

#include "adapters/profiler_common.h"

namespace vgpu::nccl::adapt {
namespace {

ncclResult_t start_v6(void* context, void** handle, ncclProfilerEventDescr_v6_t* d) {
  return start_event(context, handle, d);
}

}  // namespace
}  // namespace vgpu::nccl::adapt

using namespace vgpu::nccl::adapt;

VGPU_NCCL_EXPORT ncclProfiler_v6_t ncclProfiler_v6;
ncclProfiler_v6_t ncclProfiler_v6 = {kProfilerName, profiler_init, start_v6, profiler_stop, profiler_record,
                                     profiler_finalize};
