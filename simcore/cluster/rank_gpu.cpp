#include "simcore/rank_gpu.h"

#include <fmt/format.h>

#include "common/settings.h"

namespace simcore {

RankGpu rank_gpu(const ClusterSpec& cluster, int local_device, long global_rank_gpu, long node_index) {
  RankGpu r;
  const long total = cluster.total_gpus();
  long gpu = -1;
  if (global_rank_gpu >= 0) {
    gpu = global_rank_gpu;
    r.origin = "VGPU_GLOBAL_RANK_GPU";
  } else {
    if (node_index < 0 || node_index >= cluster.nodes) {
      r.error = fmt::format("VGPU_NODE_INDEX={} but the cluster ({}) has {} node(s): set VGPU_NODES or fix "
                            "VGPU_NODE_INDEX", node_index, cluster.source, cluster.nodes);
      return r;
    }
    if (local_device < 0 || local_device >= cluster.gpus_per_node) {
      r.error = fmt::format("the rank's CUDA device {} is not in the cluster ({} GPUs per node): set "
                            "VGPU_GPUS_PER_NODE / VGPU_DEVICE_COUNT", local_device, cluster.gpus_per_node);
      return r;
    }
    gpu = node_index * cluster.gpus_per_node + local_device;
    r.origin = "VGPU_NODE_INDEX and the current device";
  }
  if (gpu < 0 || gpu >= total) {
    r.error = fmt::format("{} gives GPU {} but the cluster ({}) has {} GPUs: set VGPU_NODES / VGPU_DEVICE_COUNT "
                          "or VGPU_CONFIG to a cluster that has it", r.origin, gpu, cluster.source, total);
    return r;
  }
  r.gpu = static_cast<int>(gpu);
  return r;
}

RankGpu rank_gpu(const ClusterSpec& cluster, int local_device) {
  using vgpu::settings::Id;
  const long global = vgpu::settings::is_set(Id::global_rank_gpu)
                          ? static_cast<long>(vgpu::settings::integer(Id::global_rank_gpu))
                          : -1;
  return rank_gpu(cluster, local_device, global, static_cast<long>(vgpu::settings::integer(Id::node_index)));
}

}  // namespace simcore
