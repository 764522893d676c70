// What one kernel needs per block (registers, shared memory, threads) against what one SM of a
// virtual device offers: the figures behind cuFuncGetAttribute(MAX_THREADS_PER_BLOCK), the
// occupancy calculator and launch validation, computed in one place.
//
// The rules are those of NVIDIA's occupancy calculator for sm_70 and newer: registers are
// allocated per warp in units of 256 and split over 4 SM sub-partitions; shared memory is
// allocated in units of 128 bytes and each block also takes the driver's reserved shared memory
// (RESERVED_SHARED_MEMORY_PER_BLOCK). The shared-memory carveout is taken as the largest the SM
// allows (the driver picks the carveout a launch needs).
#pragma once

#include <cstddef>
#include <cstdint>

#include "module/image.h"

namespace vgpu {

class DriverState;

// What a device offers a launch, read from its attributes once: a launch is checked against it
// and its kernel's resources computed from it (ModuleManager keeps one per device, since every
// attribute lookup is a map search and a launch needs sixteen of them).
struct DeviceFigures {
  int max_threads_block, max_threads_sm, max_blocks_sm, regs_sm, regs_block;
  int shared_sm, optin_shared, reserved_shared, warp_size, sm_count;
  uint32_t grid_max[3], block_max[3];

  static DeviceFigures of(const DriverState& driver, int device);
};

class KernelResources {
 public:
  // A kernel loaded from PTX has no register count (nothing compiled it): NUM_REGS reads this,
  // what an H200's JIT gave an empty PTX kernel (driver 580.159.04, 2026-11-26; the sim used to
  // assume 32). Occupancy is the same for any count up to 32 (65536 registers for 2048 threads).
  static constexpr int kAssumedPtxRegisters = 4;

  KernelResources(const DriverState& driver, int device, const module::KernelInfo& info);
  KernelResources(const DeviceFigures& device, const module::KernelInfo& info);

  const module::KernelInfo* info;

  int registers() const;
  int max_threads_per_block() const;  // device limit, __launch_bounds__ and registers
  int optin_shared() const { return optin_shared_; }  // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
  int sm_count() const { return sm_count_; }
  int warp_size() const { return warp_size_; }

  // Blocks of `block_size` threads with `dynamic_shared` bytes that fit on one SM at once.
  int blocks_per_sm(int block_size, size_t dynamic_shared) const;
  // The most dynamic shared memory each of `blocks` blocks of `block_size` threads can have while
  // all of them fit on one SM, as the real driver answers it (reserved memory not counted); 0 if
  // they do not fit at all.
  size_t dynamic_shared_for(int blocks, int block_size) const;

 private:
  int blocks_by_threads_and_registers(int block_size) const;

  int max_threads_block_, max_threads_sm_, max_blocks_sm_, regs_sm_, regs_block_;
  int shared_sm_, optin_shared_, reserved_shared_, warp_size_, sm_count_;
};

}  // namespace vgpu
