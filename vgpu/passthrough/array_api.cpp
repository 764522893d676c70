// CUDA arrays under the passthrough backend: each array (and mipmapped array) is the real
// driver's, made in the virtual device's real context, and is first charged to the virtual
// device like any other allocation (memory_api.cpp), so a virtual device refuses an array with
// CUDA_ERROR_OUT_OF_MEMORY past its capacity, and destroying it gives the bytes back.
//
// What an array costs is the real driver's secret (cuArrayGetMemoryRequirements answers only for
// arrays made without memory, and cuMemGetInfo is virtual under vgpu), so the charge is an
// estimate of the driver's block-linear layout:
//   - a row is the width times the texel size, padded to a 64-byte GOB row;
//   - rows are padded to the height of a block: GOBs are 8 rows high and a block stacks up to 16
//     of them (the smallest power of two covering the height);
//   - a 2D array has one slice; layers, cubemap faces and 3D slices multiply;
//   - a mipmapped array is the sum of its levels (each dimension halved per level, at least 1;
//     layers and faces are not halved);
//   - the whole array is rounded up to the 2 MiB pages that device allocations are charged in.
// Texel sizes come from the format (4:2:0 video formats 1.5 bytes, BC1/BC4 half a byte, other
// block-compressed formats one byte per texel); a format this file does not know is charged as
// the widest texel, 16 bytes. Sparse and deferred-mapping arrays have no memory of their own
// (what is later mapped into them is a cuMemCreate allocation, charged there): not charged.
#include "passthrough/array_api.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "passthrough/passthrough_state.h"

using vgpu::pt::PassState;

namespace {

constexpr uint64_t kPage = 2ull << 20;    // the granularity device memory is charged in
constexpr uint64_t kGobRow = 64;          // bytes in a row of a GOB
constexpr uint64_t kGobRows = 8;          // rows in a GOB
constexpr uint64_t kBlockGobs = 16;       // GOBs stacked in the tallest block
constexpr uint64_t kWidestTexel = 2 * 16; // in half bytes: 4 channels of 32 bits

// Bytes per texel, doubled (so that 1.5 and 0.5 are whole).
uint64_t texel_half_bytes(CUarray_format f, unsigned channels) {
  const uint64_t ch = channels == 1 || channels == 2 || channels == 4 ? channels : 4;
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 2 * ch;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 4 * ch;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 8 * ch;
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: return 2;
    case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2: return 4;
    case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4: return 8;
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: return 4;
    case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2: return 8;
    case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: return 16;
    case CU_AD_FORMAT_UNORM_INT_101010_2: return 8;
    case CU_AD_FORMAT_BC1_UNORM: case CU_AD_FORMAT_BC1_UNORM_SRGB:
    case CU_AD_FORMAT_BC4_UNORM: case CU_AD_FORMAT_BC4_SNORM: return 1;
    case CU_AD_FORMAT_BC2_UNORM: case CU_AD_FORMAT_BC2_UNORM_SRGB: case CU_AD_FORMAT_BC3_UNORM:
    case CU_AD_FORMAT_BC3_UNORM_SRGB: case CU_AD_FORMAT_BC5_UNORM: case CU_AD_FORMAT_BC5_SNORM:
    case CU_AD_FORMAT_BC6H_UF16: case CU_AD_FORMAT_BC6H_SF16: case CU_AD_FORMAT_BC7_UNORM:
    case CU_AD_FORMAT_BC7_UNORM_SRGB: return 2;
    case CU_AD_FORMAT_NV12: return 3;                          // 8-bit luma + half-size chroma
    case CU_AD_FORMAT_P010: case CU_AD_FORMAT_P016: return 6;  // the same in 16-bit words
    case CU_AD_FORMAT_NV16: case CU_AD_FORMAT_YUY2: return 4;
    case CU_AD_FORMAT_P210: case CU_AD_FORMAT_P216: case CU_AD_FORMAT_Y210: case CU_AD_FORMAT_Y216:
    case CU_AD_FORMAT_AYUV: case CU_AD_FORMAT_Y410: return 8;
    case CU_AD_FORMAT_Y416: return 16;
    case CU_AD_FORMAT_Y444_PLANAR8: case CU_AD_FORMAT_YUV444_8bit_SemiPlanar: return 6;
    case CU_AD_FORMAT_Y444_PLANAR10: case CU_AD_FORMAT_YUV444_16bit_SemiPlanar: return 12;
    default: return kWidestTexel;
  }
}

using u128 = unsigned __int128;
u128 round_up(u128 x, u128 to) { return (x + to - 1) / to * to; }

// Rows after padding to the block height the driver would pick for `height` rows.
u128 padded_rows(uint64_t height) {
  const uint64_t gobs = (height + kGobRows - 1) / kGobRows;
  uint64_t block = 1;
  while (block < gobs && block < kBlockGobs) block *= 2;
  return round_up(height, block * kGobRows);
}

// One level of an array; a height or depth of 0 means the dimension is absent.
u128 level_bytes(uint64_t width, uint64_t height, uint64_t depth, uint64_t texel_halves) {
  const u128 row = round_up((u128(width) * texel_halves + 1) / 2, kGobRow);
  const u128 rows = height == 0 ? 1 : padded_rows(height);
  return row * rows * (depth == 0 ? 1 : depth);
}

// More than any device has, and far from overflowing the accounting's page rounding.
constexpr uint64_t kTooLarge = 1ull << 62;

// The estimate above for a descriptor and its mipmap levels (1 for a plain array), in whole
// pages, at most kTooLarge.
uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels) {
  if (d.Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
  constexpr uint64_t kHuge = 1ull << 40;  // below it, one level's product fits in 128 bits
  if (d.Width >= kHuge || d.Height >= kHuge || d.Depth >= kHuge) return kTooLarge;
  const uint64_t texel = texel_half_bytes(d.Format, d.NumChannels);
  const bool layers_stay = (d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  u128 total = 0;
  // Past 41 levels every dimension below kHuge is 1: more levels are invalid (the real driver
  // refuses them), and are not worth counting.
  levels = std::min(levels, 41u);
  for (unsigned l = 0; l < levels && total < kTooLarge; ++l) {
    auto shrink = [l](uint64_t n) -> uint64_t { return n == 0 ? 0 : std::max<uint64_t>(n >> l, 1); };
    total += level_bytes(shrink(d.Width), shrink(d.Height), layers_stay ? d.Depth : shrink(d.Depth), texel);
  }
  total = round_up(total, kPage);
  return total > kTooLarge ? kTooLarge : static_cast<uint64_t>(total);
}

// The charge of each live array vgpu charged, by real handle (CUarray or CUmipmappedArray),
// so that destroying it (or its context) gives exactly that back to its virtual device.
class ArrayCharges {
 public:
  struct Charge {
    int device = -1;
    uint64_t bytes = 0;
    CUcontext ctx = nullptr;
  };
  static ArrayCharges& get() {
    static ArrayCharges* charges = new ArrayCharges;  // never destroyed: arrays outlive exit handlers
    return *charges;
  }
  void add(const void* handle, const Charge& c) {
    std::lock_guard l(mu_);
    charges_[handle] = c;
  }
  // Takes the charge out before the real destroy (which frees the handle value for reuse by
  // another thread's create); put back with add() if the real driver refuses.
  bool take(const void* handle, Charge* out) {
    std::lock_guard l(mu_);
    auto it = charges_.find(handle);
    if (it == charges_.end()) return false;
    *out = it->second;
    charges_.erase(it);
    return true;
  }
  std::vector<Charge> take_context(CUcontext ctx) {
    std::vector<Charge> out;
    std::lock_guard l(mu_);
    for (auto it = charges_.begin(); it != charges_.end();) {
      if (it->second.ctx == ctx) {
        out.push_back(it->second);
        it = charges_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void*, Charge> charges_;
};

void give_back(const ArrayCharges::Charge& c) {
  if (PassState* s = PassState::get()) {
    s->release(c.device, c.bytes);
    s->add_physical(c.device, -static_cast<int64_t>(c.bytes));
  }
}

// Charge `bytes` to the calling thread's virtual device, create for real, remember the charge;
// the charge is undone when the real driver refuses.
template <class Handle, class Create>
CUresult charged_create(Handle* out, uint64_t bytes, const char* call, Create create) {
  PassState* s = PassState::get();
  if (s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  int v = -1;
  if (CUresult r = s->current_device(&v); r != CUDA_SUCCESS) return r;
  if (bytes > 0 && !s->reserve(v, bytes)) {
    vgpu::log::info("{}: an array of {} bytes does not fit on virtual device {}", call, bytes, v);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = create();
  if (r != CUDA_SUCCESS || bytes == 0) {
    if (bytes > 0) s->release(v, bytes);
    return r;
  }
  CUcontext ctx = nullptr;  // the array goes with it (current_device() found it current)
  VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx);
  ArrayCharges::get().add(*out, {v, bytes, ctx});
  s->add_physical(v, static_cast<int64_t>(bytes));  // a private real allocation under every policy
  return CUDA_SUCCESS;
}

template <class Handle, class Destroy>
CUresult charged_destroy(Handle h, Destroy destroy) {
  ArrayCharges::Charge c;
  const bool known = h != nullptr && ArrayCharges::get().take(h, &c);
  const CUresult r = destroy();
  if (!known) return r;
  if (r != CUDA_SUCCESS) {
    ArrayCharges::get().add(h, c);
    return r;
  }
  give_back(c);
  return CUDA_SUCCESS;
}

CUDA_ARRAY3D_DESCRIPTOR as_3d(size_t width, size_t height, CUarray_format format, unsigned channels) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = width;
  d.Height = height;
  d.Format = format;
  d.NumChannels = channels;
  return d;
}

}  // namespace

namespace vgpu::pt {
void arrays_destroyed_with(CUcontext ctx) {
  if (ctx == nullptr) return;
  for (const ArrayCharges::Charge& c : ArrayCharges::get().take_context(ctx)) give_back(c);
}
}  // namespace vgpu::pt

VGPU_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t bytes = array_bytes(as_3d(desc->Width, desc->Height, desc->Format, desc->NumChannels), 1);
  return charged_create(handle, bytes, "cuArrayCreate", [&] {
    return VGPU_REAL("cuArrayCreate_v2", CUresult (*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t bytes = array_bytes(as_3d(desc->Width, desc->Height, desc->Format, desc->NumChannels), 1);
  return charged_create(handle, bytes, "cuArrayCreate", [&] {
    return VGPU_REAL("cuArrayCreate", CUresult (*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR_v1*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return charged_create(handle, array_bytes(*desc, 1), "cuArray3DCreate", [&] {
    return VGPU_REAL("cuArray3DCreate_v2", CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d = as_3d(desc->Width, desc->Height, desc->Format, desc->NumChannels);
  d.Depth = desc->Depth;
  d.Flags = desc->Flags;
  return charged_create(handle, array_bytes(d, 1), "cuArray3DCreate", [&] {
    return VGPU_REAL("cuArray3DCreate", CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR_v1*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray array) {
  return charged_destroy(array, [&] { return VGPU_REAL("cuArrayDestroy", CUresult (*)(CUarray))(array); });
}

VGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                    unsigned int levels) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return charged_create(handle, array_bytes(*desc, levels > 0 ? levels : 1), "cuMipmappedArrayCreate", [&] {
    return VGPU_REAL("cuMipmappedArrayCreate", CUresult (*)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*,
                                                            unsigned))(handle, desc, levels);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray mipmap) {
  return charged_destroy(mipmap, [&] {
    return VGPU_REAL("cuMipmappedArrayDestroy", CUresult (*)(CUmipmappedArray))(mipmap);
  });
}
