// Which GPU of the virtual cluster a rank process's local CUDA device is: one answer for every
// library that needs it (the NCCL plugin placing the rank's transfers, the passthrough timing its
// NCCL kernels and naming its timeline's GPUs).
//
// VGPU_GLOBAL_RANK_GPU, when set, names the GPU outright (a launcher that knows it); otherwise
// the rank's node (VGPU_NODE_INDEX, default 0) times the GPUs per node, plus the local device.
// Both are checked against the cluster: a GPU the cluster does not have is an error naming the
// setting that gave it, never a silent GPU 0.
#pragma once

#include <string>

#include "simcore/cluster_spec.h"

namespace simcore {

struct RankGpu {
  int gpu = -1;        // the cluster's GPU, -1 on error
  std::string error;   // why not, naming the setting at fault
  const char* origin = "";  // which setting or rule gave it (no allocation: asked per NCCL launch)
};

// From explicit values (tests, callers with their own source): `global_rank_gpu` < 0: unset.
RankGpu rank_gpu(const ClusterSpec& cluster, int local_device, long global_rank_gpu, long node_index);
// From the settings (VGPU_GLOBAL_RANK_GPU, VGPU_NODE_INDEX).
RankGpu rank_gpu(const ClusterSpec& cluster, int local_device);

}  // namespace simcore
