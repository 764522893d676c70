// The body of cuInit both backends share: load the cluster configuration and build the backend's
// root object from it, with nothing leaving as an exception (out of memory for a huge cluster,
// mostly): the program gets an error code and one line, and every later call fails cleanly.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <new>
#include <utility>

#include "common/log.h"
#include "front/driver/cuda_api.h"
#include "simcore/cluster_config.h"

namespace vgpu {

// `build(simcore::ClusterSpec&&)` makes the root from a valid configuration and returns its result.
template <class Build>
CUresult init_from_cluster_config(Build&& build) noexcept {
  try {
    simcore::ConfigResult config = simcore::load_cluster_config();
    if (!config.ok()) {
      // A broken configuration is the user's own explicit setting: say so even when logging is
      // off, once, and fail every call cleanly instead of aborting the program.
      log::always(fmt::format("vgpu: cluster configuration rejected: {}", config.error.to_string()));
      return CUDA_ERROR_INVALID_VALUE;
    }
    return std::forward<Build>(build)(std::move(*config.cluster));
  } catch (const std::exception& e) {
    log::always(fmt::format("vgpu: cuInit failed: {}", e.what()));
    return dynamic_cast<const std::bad_alloc*>(&e) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
  } catch (...) {
    log::always("vgpu: cuInit failed");
    return CUDA_ERROR_UNKNOWN;
  }
}

}  // namespace vgpu
