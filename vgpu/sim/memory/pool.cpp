// The model behind the stream-ordered pools of the sim backend (entry points: pool_api.cpp).
//
// Blocks. Each allocation from a pool is one block, its size rounded up to the 2 MiB page of
// the real device, backed by its own host mapping. A block is charged to the pool's device
// (Device::reserve) when the pool first reserves it and stays charged while the pool holds it,
// in use or free: cuMemGetInfo counts pool reserve as used, as on a real GPU.
//
// Reuse. cuMemFreeAsync returns a block to its pool in stream order (a Work on the stream);
// from then on a later allocation from that pool on any stream may take it when its size fits
// (a free block at least as large as asked, and at most about twice as large so a small request
// does not pin a huge block). The real pool also sub-allocates small requests from one page;
// vgpu gives each allocation its own block, so `used` is in rounded bytes.
//
// Release. A pool keeps its free blocks until a synchronization of its device (stream, event or
// context synchronize: MemoryManager::synchronized, called by the streams concern) and then gives
// back free blocks until it reserves no more than its release threshold (default 0: every free
// block). cuMemPoolTrimTo releases at once. An allocation that does not fit the device first
// gives back the pool's own free blocks and tries again before CUDA_ERROR_OUT_OF_MEMORY.
#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/memory/memory_impl.h"

namespace vgpu {

namespace {
// A free block is reused for a request of `need` bytes (rounded) when no larger than this.
uint64_t reuse_limit(uint64_t need) { return need > UINT64_MAX / 2 ? UINT64_MAX : std::max(2 * need, need + kGranularity); }
}  // namespace

void MemoryManager::Impl::pool_trim_locked(Pool& pool, uint64_t keep) {
  Device* dev = driver.device(pool.device);
  // Largest blocks first: the fewest releases to get under `keep`.
  while (pool.reserved > keep && !pool.free_blocks.empty()) {
    auto it = std::prev(pool.free_blocks.end());
    const uint64_t size = it->first;
    pool.free_blocks.erase(it);  // the mapping goes when the last queued copy using it lets go
    pool.reserved -= size;
    if (dev != nullptr) dev->release(size);
  }
}

CUresult MemoryManager::Impl::pool_allocate(const std::shared_ptr<Pool>& pool, size_t bytes,
                                            std::shared_ptr<Allocation>* out) {
  uint64_t block = 0;
  if (bytes == 0 || !round_up_checked(bytes, kGranularity, &block)) {
    log::warn("cuMemAllocAsync: {} bytes cannot be had from any device", bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Device* dev = driver.device(pool->device);
  if (dev == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::shared_ptr<HostMapping> mapping;
  uint64_t size = block;
  {
    std::lock_guard l(pool->mu);
    if (pool->destroyed) return CUDA_ERROR_INVALID_HANDLE;
    if (auto it = pool->free_blocks.lower_bound(block);
        it != pool->free_blocks.end() && it->first <= reuse_limit(block)) {
      size = it->first;
      mapping = std::move(it->second);
      pool->free_blocks.erase(it);
    } else {
      const uint64_t max = pool->props.maxSize;
      if (max != 0 && (block > max || pool->reserved + block > max)) {
        pool_trim_locked(*pool, block > max ? 0 : max - block);
        if (block > max || pool->reserved + block > max) {
          log::warn("cuMemAllocAsync: {} bytes do not fit the pool's maximum size of {} bytes", bytes, max);
          return CUDA_ERROR_OUT_OF_MEMORY;
        }
      }
      if (!dev->reserve(block)) {
        pool_trim_locked(*pool, 0);  // the pool's own unused reserve, then once more
        if (!dev->reserve(block)) {
          log::warn("cuMemAllocAsync of {} bytes on device {}: out of memory ({} of {} bytes free)", bytes,
                    pool->device, dev->free_bytes(), dev->capacity());
          return CUDA_ERROR_OUT_OF_MEMORY;
        }
      }
      mapping = HostMapping::create(block);
      if (!mapping) {
        dev->release(block);
        log::warn("cuMemAllocAsync of {} bytes: the host has no address space left for its backing", bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      pool->reserved += block;
      pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
    }
    pool->used += size;
    pool->used_high = std::max(pool->used_high, pool->used);
  }
  auto a = std::make_shared<Allocation>();
  a->kind = AllocKind::pool;
  a->base = reinterpret_cast<uintptr_t>(mapping->base);
  a->size = bytes;
  a->host = static_cast<char*>(mapping->base);
  a->device = pool->device;
  a->charged = 0;  // the pool's reserve carries the charge
  a->buffer_id = next_buffer_id++;
  a->pool = pool->handle;
  a->pool_owner = pool;
  a->pool_block = size;
  a->mapping = std::move(mapping);
  index_add(a);
  *out = std::move(a);
  return CUDA_SUCCESS;
}

void MemoryManager::Impl::pool_return(const std::shared_ptr<Pool>& pool, uint64_t block,
                                      std::shared_ptr<HostMapping> mapping) {
  std::lock_guard l(pool->mu);
  pool->used -= std::min(pool->used, block);
  if (pool->destroyed) {
    // A destroyed pool lets its memory go as its last allocations come back.
    pool->reserved -= std::min(pool->reserved, block);
    if (Device* dev = driver.device(pool->device)) dev->release(block);
    return;
  }
  pool->free_blocks.emplace(block, std::move(mapping));
}

std::shared_ptr<Pool> MemoryManager::Impl::current_pool(int device) {
  CUmemoryPool h;
  {
    std::lock_guard l(current_pool_mu);
    if (device < 0 || static_cast<size_t>(device) >= current_pools.size()) return nullptr;
    h = current_pools[device];
  }
  auto p = pools.find(h);
  return p ? p : default_pools[device];  // destroyed meanwhile: the default pool again
}

void MemoryManager::synchronized(int device) {
  for (auto& pool : impl_->pools.snapshot()) {
    if (device >= 0 && pool->device != device) continue;
    std::lock_guard l(pool->mu);
    if (!pool->free_blocks.empty()) impl_->pool_trim_locked(*pool, pool->release_threshold);
  }
}

}  // namespace vgpu
