// Kernel launches of the sim backend: validation against the device and the image, the packed
// parameter block, the launch signature and the virtual duration; then a Work on the stream.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "front/launch/kernel_db_misses.h"
#include "front/launch/kernel_time_model.h"
#include "sim/exec/module_registry.h"
#include "sim/exec/graph.h"
#include "sim/exec/module_resources.h"
#include "sim/exec/nccl_collectives.h"
#include "sim/exec/stream.h"
#include "sim/memory/memory.h"

namespace vgpu {
namespace {

// The most entries of an `extra` array we read before deciding it has no CU_LAUNCH_PARAM_END.
constexpr int kMaxExtraEntries = 64;

// Copies the parameters into one packed block, from kernelParams (one pointer per parameter) or
// from extra (one buffer). Returns INVALID_VALUE for a missing or short source.
CUresult pack_params(const LaunchRequest& r, const KernelDesc& k, std::vector<uint8_t>* out) {
  out->assign(k.param_bytes, 0);
  if (r.kernel_params && r.extra) {
    log::warn("{}: both kernelParams and extra are given", r.api);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (r.kernel_params) {
    for (size_t i = 0; i < k.params.size(); ++i) {
      const void* src = r.kernel_params[i];
      if (!src) {
        log::warn("{}: kernelParams[{}] of '{}' is NULL", r.api, i, k.name());
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (k.params[i].size) std::memcpy(out->data() + k.params[i].offset, src, k.params[i].size);
    }
    return CUDA_SUCCESS;
  }
  if (r.extra) {
    const void* buffer = nullptr;
    const size_t* size = nullptr;
    int i = 0;
    for (; i < kMaxExtraEntries && r.extra[i] != CU_LAUNCH_PARAM_END; ++i) {
      if (r.extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = r.extra[++i];
      } else if (r.extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = static_cast<const size_t*>(r.extra[++i]);
      } else {
        log::warn("{}: unknown entry {} in extra", r.api, r.extra[i]);
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (i >= kMaxExtraEntries) {
      log::warn("{}: extra is not terminated by CU_LAUNCH_PARAM_END", r.api);
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (k.param_bytes == 0) return CUDA_SUCCESS;
    if (!buffer || !size) {
      log::warn("{}: extra must give the parameter buffer and its size for '{}'", r.api, k.name());
      return CUDA_ERROR_INVALID_VALUE;
    }
    // A buffer shorter than the declared parameters is accepted, as the real driver does: NCCL
    // declares 4 KiB of kernel arguments and passes only the bytes its collective uses.
    const size_t n = std::min<size_t>(*size, k.param_bytes);
    std::memcpy(out->data(), buffer, n);
    std::memset(out->data() + n, 0, k.param_bytes - n);
    return CUDA_SUCCESS;
  }
  if (!k.params.empty()) {
    log::warn("{}: '{}' takes {} parameters but neither kernelParams nor extra is given", r.api,
              k.name(), k.params.size());
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace

Work PreparedLaunch::to_work() const {
  Work w;
  w.kind = Work::Kind::kernel;
  w.label = function ? function->desc().name() : std::string("kernel");
  w.duration_s = duration_s;  // nothing executes in the sim backend
  w.collective = collective;
  return w;
}

double ModuleManager::kernel_duration(const LaunchSignature& signature, bool* from_database,
                                      const LaunchHints& hints, bool collective) {
  const auto& m = driver_.cluster().model;
  const GpuFigures figures{m.memory_bw, m.fp32_flops, m.tf32_tensor_flops, m.bf16_tensor_flops};
  bool found = false;
  KernelDbLevel level = KernelDbLevel::none;
  const double d = recorded_or_estimated(*kernel_times_, figures, signature, &found, hints, &level);
  if (misses_ && collective) {
    misses_->count_collective();
  } else if (misses_) {
    misses_->count(level);  // what each level of the database answered
  }
  if (level == KernelDbLevel::none && !collective && misses_ && misses_->enabled()) {
    // Listed by the words that key it, with why the database lacked it.
    LaunchSignature keyed;
    std::string detail;
    const SettlingSignatures::Uncovered why = kernel_times_->explain_miss(signature, &keyed, &detail);
    misses_->note(keyed, d, KernelDbMisses::cause_name(why), detail);
  }
  if (from_database) *from_database = found;
  return d;
}

const DeviceFigures& ModuleManager::device_figures(int device) {
  {
    std::shared_lock l(figures_mu_);
    if (device >= 0 && static_cast<size_t>(device) < figures_.size() && figures_[device]) return *figures_[device];
  }
  auto f = std::make_unique<DeviceFigures>(DeviceFigures::of(driver_, device));
  std::unique_lock l(figures_mu_);
  if (device < 0) {  // not a device: nothing to keep (the stream's device is always one)
    static thread_local DeviceFigures scratch;
    scratch = *f;
    return scratch;
  }
  if (static_cast<size_t>(device) >= figures_.size()) figures_.resize(static_cast<size_t>(device) + 1);
  if (!figures_[device]) figures_[device] = std::move(f);
  return *figures_[device];
}

CUresult ModuleManager::prepare_launch(const LaunchRequest& r, bool per_thread, PreparedLaunch* out) {
  int device = 0;
  if (CUresult rc = driver_.streams().device_of(r.stream, per_thread, &device); rc != CUDA_SUCCESS) {
    log::warn("{}: stream {} is not usable", r.api, static_cast<const void*>(r.stream));
    return rc;
  }
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_on(r.function, device, &fn); rc != CUDA_SUCCESS) {
    log::warn("{}: {} is not a loaded function or kernel", r.api, static_cast<const void*>(r.function));
    return rc;
  }
  if (fn->device != device) {
    log::warn("{}: '{}' was loaded on device {} but the stream runs on device {}", r.api,
              fn->desc().name(), fn->device, device);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const KernelDesc& k = fn->desc();
  const module::KernelInfo& info = fn->info();
  const LaunchShape& s = r.shape;

  const DeviceFigures& figures = device_figures(device);
  for (int i = 0; i < 3; ++i) {
    if (s.grid[i] == 0 || s.grid[i] > figures.grid_max[i] || s.block[i] == 0 || s.block[i] > figures.block_max[i]) {
      log::warn("{}: '{}' grid ({}, {}, {}) block ({}, {}, {}) is outside the device's limits", r.api,
                k.name(), s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2]);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  const KernelResources res(figures, info);
  const uint64_t threads = s.threads_per_block();
  const uint64_t declared_max = std::min<uint64_t>(static_cast<uint64_t>(figures.max_threads_block),
                                                   info.max_threads ? info.max_threads : UINT32_MAX);
  if (threads > declared_max) {
    log::warn("{}: '{}' allows {} threads per block, launched with {}", r.api, k.name(), declared_max,
              threads);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (info.req_ntid[0] != 0 &&
      (s.block[0] != info.req_ntid[0] || s.block[1] != std::max(1u, info.req_ntid[1]) ||
       s.block[2] != std::max(1u, info.req_ntid[2]))) {
    log::warn("{}: '{}' requires a block of ({}, {}, {})", r.api, k.name(), info.req_ntid[0],
              info.req_ntid[1], info.req_ntid[2]);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (threads > static_cast<uint64_t>(res.max_threads_per_block())) {
    log::warn("{}: '{}' needs {} registers per thread: {} threads per block do not fit", r.api,
              k.name(), res.registers(), threads);
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  if (s.dynamic_shared > static_cast<uint32_t>(std::max(0, fn->settings->max_dynamic_shared.load())) ||
      uint64_t{info.shared_bytes} + s.dynamic_shared > static_cast<uint64_t>(res.optin_shared())) {
    log::warn("{}: '{}' asks for {} bytes of dynamic shared memory; its limit is {} "
              "(MAX_DYNAMIC_SHARED_SIZE_BYTES) and the device's {} bytes with {} static",
              r.api, k.name(), s.dynamic_shared, fn->settings->max_dynamic_shared.load(),
              res.optin_shared(), info.shared_bytes);
    return CUDA_ERROR_INVALID_VALUE;
  }

  // Thread block clusters: requested at launch, or compiled in (__cluster_dims__).
  std::array<uint32_t, 3> cluster = r.cluster;
  if (cluster[0] == 0 && info.cluster_dims[0] != 0) cluster = info.cluster_dims;
  if (cluster[0] == 0 && fn->settings->cluster_w > 0)
    cluster = {static_cast<uint32_t>(fn->settings->cluster_w.load()),
               static_cast<uint32_t>(std::max(1, fn->settings->cluster_h.load())),
               static_cast<uint32_t>(std::max(1, fn->settings->cluster_d.load()))};
  if (cluster[0] != 0) {
    for (auto& c : cluster) c = std::max(c, 1u);
    const uint64_t size = uint64_t{cluster[0]} * cluster[1] * cluster[2];
    const uint64_t max_size = fn->settings->non_portable_cluster ? 16 : 8;
    if (size > max_size || s.grid[0] % cluster[0] || s.grid[1] % cluster[1] || s.grid[2] % cluster[2]) {
      log::warn("{}: cluster ({}, {}, {}) does not fit grid ({}, {}, {}) or exceeds {} blocks", r.api,
                cluster[0], cluster[1], cluster[2], s.grid[0], s.grid[1], s.grid[2], max_size);
      return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
  }
  if (r.cooperative) {
    const uint64_t resident = uint64_t(res.blocks_per_sm(static_cast<int>(threads), s.dynamic_shared)) *
                              res.sm_count();
    if (s.blocks() > resident) {
      log::warn("{}: cooperative '{}' of {} blocks; at most {} can be resident", r.api, k.name(),
                s.blocks(), resident);
      return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
  }

  PreparedLaunch p;
  if (CUresult rc = pack_params(r, k, &p.params); rc != CUDA_SUCCESS) return rc;
  const MemoryManager& memory = driver_.memory();
  std::vector<uint64_t> pointers;  // for the fallback model: what the buffers can hold
  p.signature = build_launch_signature(k.name(), s, k.params, p.params, [&memory, &pointers, this](uint64_t v) {
    if (v == 0) return false;
    const bool device = memory.resolve(static_cast<CUdeviceptr>(v), 1).has_value();
    if (device && pointers.size() < 16) pointers.push_back(v);
    return device || host_addresses_.contains(v);
  });
  LaunchHints hints;
  hints.fits_in_a_buffer = [&memory, &pointers](uint64_t bytes) {
    return std::any_of(pointers.begin(), pointers.end(), [&](uint64_t v) {
      return memory.resolve(static_cast<CUdeviceptr>(v), bytes).has_value();
    });
  };
  hints.unmasked = [&] {
    return build_launch_signature(k.name(), s, k.params, p.params, [&memory](uint64_t v) {
      return v != 0 && memory.resolve(static_cast<CUdeviceptr>(v), 1).has_value();
    });
  };
  p.collective = is_nccl_kernel_name(k.name());
  p.duration_s = kernel_duration(p.signature, &p.from_database, hints, p.collective);
  p.function = std::move(fn);
  *out = std::move(p);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::launch(const LaunchRequest& request, bool per_thread) {
  PreparedLaunch p;
  if (CUresult rc = prepare_launch(request, per_thread, &p); rc != CUDA_SUCCESS) return rc;
  // What a kernel node recorded from this launch by a stream capture keeps (cuGraphKernelNodeGetParams).
  const KernelLaunchView view{request.function, &request.shape, p.params, p.function->desc().params};
  const KernelLaunchScope scope(&view);
  CUresult rc = CUDA_SUCCESS;
  if (nccl_ && nccl_->submit(request.stream, per_thread, p, &rc)) return rc;
  return driver_.streams().submit(request.stream, p.to_work(), per_thread);
}

}  // namespace vgpu
