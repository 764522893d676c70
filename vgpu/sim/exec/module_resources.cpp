#include "sim/exec/module_resources.h"

#include <algorithm>

#include "sim/core/driver_state.h"

namespace vgpu {
namespace {

constexpr int kRegisterUnit = 256;  // registers are allocated per warp in units of this
constexpr int kSubPartitions = 4;
constexpr int kSharedUnit = 128;     // shared memory allocation granularity, bytes

int round_up(long long v, long long unit) { return static_cast<int>((v + unit - 1) / unit * unit); }

int attr(const DriverState& driver, int device, CUdevice_attribute a, int fallback) {
  const Device* d = driver.device(device);
  int v = 0;
  return d && d->attribute(a, &v) == CUDA_SUCCESS && v > 0 ? v : fallback;
}

}  // namespace

DeviceFigures DeviceFigures::of(const DriverState& driver, int device) {
  DeviceFigures f{};
  f.max_threads_block = attr(driver, device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
  f.max_threads_sm = attr(driver, device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048);
  f.max_blocks_sm = attr(driver, device, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32);
  f.regs_sm = attr(driver, device, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536);
  f.regs_block = attr(driver, device, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536);
  f.shared_sm = attr(driver, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472);
  f.optin_shared = attr(driver, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448);
  f.reserved_shared = attr(driver, device, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 0);
  f.warp_size = attr(driver, device, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32);
  f.sm_count = attr(driver, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1);
  static constexpr CUdevice_attribute grid_attr[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                                      CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                                      CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  static constexpr CUdevice_attribute block_attr[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                                       CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                                       CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
  static constexpr int grid_default[3] = {2147483647, 65535, 65535};
  static constexpr int block_default[3] = {1024, 1024, 64};
  for (int i = 0; i < 3; ++i) {
    f.grid_max[i] = static_cast<uint32_t>(attr(driver, device, grid_attr[i], grid_default[i]));
    f.block_max[i] = static_cast<uint32_t>(attr(driver, device, block_attr[i], block_default[i]));
  }
  return f;
}

KernelResources::KernelResources(const DriverState& driver, int device, const module::KernelInfo& k)
    : KernelResources(DeviceFigures::of(driver, device), k) {}

KernelResources::KernelResources(const DeviceFigures& d, const module::KernelInfo& k)
    : info(&k),
      max_threads_block_(d.max_threads_block),
      max_threads_sm_(d.max_threads_sm),
      max_blocks_sm_(d.max_blocks_sm),
      regs_sm_(d.regs_sm),
      regs_block_(d.regs_block),
      shared_sm_(d.shared_sm),
      optin_shared_(d.optin_shared),
      reserved_shared_(d.reserved_shared),
      warp_size_(d.warp_size),
      sm_count_(d.sm_count) {}

int KernelResources::registers() const {
  return info->registers >= 0 ? info->registers : kAssumedPtxRegisters;
}

int KernelResources::max_threads_per_block() const {
  int limit = max_threads_block_;
  if (info->max_threads > 0) limit = std::min<int>(limit, static_cast<int>(info->max_threads));
  const int regs = registers();
  if (regs > 0) {
    const int regs_per_warp = round_up(static_cast<long long>(regs) * warp_size_, kRegisterUnit);
    const int warps = regs_block_ / regs_per_warp;
    limit = std::min(limit, warps * warp_size_);
  }
  return std::max(limit, 0);
}

int KernelResources::blocks_by_threads_and_registers(int block_size) const {
  if (block_size <= 0 || block_size > max_threads_per_block()) return 0;
  const int warps_per_block = (block_size + warp_size_ - 1) / warp_size_;
  int blocks = std::min(max_blocks_sm_, max_threads_sm_ / (warps_per_block * warp_size_));
  const int regs = registers();
  if (regs > 0) {
    const int regs_per_warp = round_up(static_cast<long long>(regs) * warp_size_, kRegisterUnit);
    const int warps_per_partition = regs_sm_ / kSubPartitions / regs_per_warp;
    blocks = std::min(blocks, warps_per_partition * kSubPartitions / warps_per_block);
  }
  return std::max(blocks, 0);
}

int KernelResources::blocks_per_sm(int block_size, size_t dynamic_shared) const {
  int blocks = blocks_by_threads_and_registers(block_size);
  const size_t shared = info->shared_bytes + dynamic_shared;
  if (shared > static_cast<size_t>(optin_shared_)) return 0;
  const int per_block = round_up(static_cast<long long>(shared) + reserved_shared_, kSharedUnit);
  if (per_block > 0) blocks = std::min(blocks, shared_sm_ / per_block);
  return blocks;
}

size_t KernelResources::dynamic_shared_for(int blocks, int block_size) const {
  if (blocks <= 0 || blocks_by_threads_and_registers(block_size) < blocks) return 0;
  // The SM's shared memory split evenly, WITHOUT the per-block reserved part taken off: an H200
  // (driver 580.159.04, 2026-11-26) answered 116736 for 2 blocks (233472 / 2), not 115712.
  const int per_block = shared_sm_ / blocks / kSharedUnit * kSharedUnit;
  const int available = std::min(per_block, optin_shared_) - static_cast<int>(info->shared_bytes);
  return available > 0 ? static_cast<size_t>(available) : 0;
}

}  // namespace vgpu
