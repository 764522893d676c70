#include "passthrough/shared_pages.h"

#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/settings.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"

namespace vgpu::pt {
namespace {

using Create = CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
using Granularity = CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
using Reserve = CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
using AddressFree = CUresult (*)(CUdeviceptr, size_t);
using Map = CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
using Release = CUresult (*)(CUmemGenericAllocationHandle);
using Unmap = CUresult (*)(CUdeviceptr, size_t);
using SetAccess = CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);

CUmemAllocationProp device_prop(int physical) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = physical;
  return prop;
}

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

bool SharedPages::enabled() {
  static const bool on = settings::text(settings::Id::memory_policy) == "shared";
  return on;
}

bool SharedPages::applies_to(size_t bytes) {
  static const size_t min_bytes = static_cast<size_t>(settings::integer(settings::Id::shared_min_bytes));
  return enabled() && bytes >= min_bytes;
}

SharedPages& SharedPages::get() { return Passthrough::get().shared_pages(); }

CUresult SharedPages::chunks_for(int physical, const std::vector<CUmemGenericAllocationHandle>** out) {
  // Called with mu_ held.
  constexpr size_t kPage = 2ull << 20;
  if (chunk_bytes_ == 0) {
    const size_t want = static_cast<size_t>(settings::integer(settings::Id::shared_chunk));
    chunk_bytes_ = kPage;
    while (chunk_bytes_ * 2 <= want) chunk_bytes_ *= 2;
  }
  auto it = chunks_.find(physical);
  if (it == chunks_.end()) {
    const CUmemAllocationProp prop = device_prop(physical);
    std::vector<CUmemGenericAllocationHandle> handles;
    for (size_t size = kPage; size <= chunk_bytes_; size *= 2) {
      CUmemGenericAllocationHandle h = 0;
      if (CUresult r = VGPU_REAL("cuMemCreate", Create)(&h, size, &prop, 0); r != CUDA_SUCCESS) {
        log::warn("shared pages: a {}-byte chunk on GPU {} could not be created: error {}", size, physical,
                  static_cast<int>(r));
        for (CUmemGenericAllocationHandle made : handles) VGPU_REAL("cuMemRelease", Release)(made);
        return r;
      }
      handles.push_back(h);
    }
    it = chunks_.emplace(physical, std::move(handles)).first;
    // Charged, for vgpu-smi, to the virtual device whose allocation made them.
    if (PassState* st = PassState::get()) {
      int v = 0;
      if (st->current_device(&v) == CUDA_SUCCESS)
        st->add_physical(v, static_cast<int64_t>(2 * chunk_bytes_ - kPage));
    }
    log::info("shared pages: {} MiB of GPU {} back every virtual device's allocations",
              (2 * chunk_bytes_ - kPage) >> 20, physical);
  }
  *out = &it->second;
  return CUDA_SUCCESS;
}

CUresult SharedPages::allocate(CUdeviceptr* out, size_t bytes, int physical) {
  constexpr size_t kPage = 2ull << 20;
  std::lock_guard l(mu_);
  const std::vector<CUmemGenericAllocationHandle>* chunks;
  if (CUresult r = chunks_for(physical, &chunks); r != CUDA_SUCCESS) return r;
  const size_t reserved = round_up(bytes, kPage);
  CUdeviceptr va = 0;
  if (CUresult r = VGPU_REAL("cuMemAddressReserve", Reserve)(&va, reserved, 0, 0, 0); r != CUDA_SUCCESS) {
    log::warn("shared pages: reserving {} bytes of address space failed with error {}", reserved, static_cast<int>(r));
    return r;
  }
  // As many largest chunks as fit, then the binary decomposition of the rest.
  Range range{reserved, {}};
  CUresult r = CUDA_SUCCESS;
  size_t at = 0;
  for (size_t k = chunks->size(); k-- > 0 && r == CUDA_SUCCESS;) {
    const size_t size = kPage << k;
    while (reserved - at >= size && r == CUDA_SUCCESS) {
      r = VGPU_REAL("cuMemMap", Map)(va + at, size, 0, (*chunks)[k], 0);
      if (r == CUDA_SUCCESS) range.pieces.emplace_back(va + at, size);
      at += size;
      if (k + 1 < chunks->size()) break;  // below the largest size, each size at most once
    }
  }
  CUmemAccessDesc access{};
  access.location = device_prop(physical).location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (r == CUDA_SUCCESS) r = VGPU_REAL("cuMemSetAccess", SetAccess)(va, reserved, &access, 1);
  if (r != CUDA_SUCCESS) {
    log::warn("shared pages: mapping {} bytes on GPU {} failed with error {}", bytes, physical, static_cast<int>(r));
    for (const auto& [p, size] : range.pieces) VGPU_REAL("cuMemUnmap", Unmap)(p, size);
    VGPU_REAL("cuMemAddressFree", AddressFree)(va, reserved);
    return r;
  }
  ranges_.emplace(va, std::move(range));
  *out = va;
  return CUDA_SUCCESS;
}

bool SharedPages::free(CUdeviceptr p, CUresult* result) {
  Range range;
  {
    std::lock_guard l(mu_);
    auto it = ranges_.find(p);
    if (it == ranges_.end()) return false;
    range = std::move(it->second);
    ranges_.erase(it);
  }
  CUresult r = CUDA_SUCCESS;
  for (const auto& [at, size] : range.pieces) {
    const CUresult u = VGPU_REAL("cuMemUnmap", Unmap)(at, size);
    if (r == CUDA_SUCCESS) r = u;
  }
  const CUresult f = VGPU_REAL("cuMemAddressFree", AddressFree)(p, range.bytes);
  *result = r != CUDA_SUCCESS ? r : f;
  return true;
}

size_t SharedPages::physical_bytes() const {
  std::lock_guard l(mu_);
  return chunks_.size() * (2 * chunk_bytes_ - (2ull << 20));
}

}  // namespace vgpu::pt
