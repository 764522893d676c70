// The copy/set engine of the sim backend (see copy.h for the cost model).
#include "sim/memory/copy.h"

#include "front/launch/copy_cost.h"
#include "common/settings.h"

#include <cstring>
#include <vector>

#include "sim/core/stream_queue.h"
#include "sim/memory/api_util.h"
#include "sim/memory/page_writes.h"

namespace vgpu::sim {
namespace {

// One resolved side of a copy: where its first byte lives on the host, and what keeps that
// memory alive until the work has run.
struct Side {
  char* base = nullptr;   // host address of the region's origin (x=0, y=0, z=0)
  size_t pitch = 0, height = 0;
  int device = -1;        // -1: host memory
  bool device_only = false;  // device, pool or VMM allocations, arrays (memory_impl.h)
  PageOwner pages;           // how its whole pages are given back when they are to hold zeros
  std::vector<std::shared_ptr<void>> keep;
};

// VGPU_SIM_COPY_DATA_BYTES (issue 23): with it set, a copy or memset of more bytes than it into
// device-only memory is timed but not performed, so the host pages behind the destination are
// never touched (a rank's model parameters copied in would otherwise cost their size in host
// memory, 475 MiB for GPT-2 small). Unset: every one is performed.
bool writes_bytes(const Side& dst, size_t bytes) {
  if (!dst.device_only || !settings::is_set(settings::Id::sim_copy_data_bytes)) return true;
  return bytes <= static_cast<uint64_t>(settings::integer(settings::Id::sim_copy_data_bytes));
}

// The byte span [first, first + extent) a region covers relative to its origin.
bool region_span(size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t width,
                 size_t rows, size_t depth, size_t* first, size_t* extent) {
  // All in 128-bit arithmetic: every product is bounded by the caller's sizes.
  using u128 = unsigned __int128;
  const u128 f = u128(x) + u128(y) * pitch + u128(z) * pitch * height;
  const u128 e = u128(depth - 1) * pitch * height + u128(rows - 1) * pitch + width;
  if (f + e > u128(SIZE_MAX)) return false;
  *first = static_cast<size_t>(f);
  *extent = static_cast<size_t>(e);
  return true;
}

CUresult resolve_side(const char* call, const char* which, const Call& c, CUmemorytype type,
                      const void* host, CUdeviceptr dptr, CUarray array, size_t x, size_t y, size_t z,
                      size_t pitch, size_t height, size_t width, size_t rows, size_t depth, Side* out) {
  if (type == CU_MEMORYTYPE_ARRAY) {
    auto arr = c.mem->arrays.find(array);
    if (!arr) return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} array {} is not a live array", call, which, static_cast<void*>(array));
    // A single-row copy (the 1D array API) addresses the array as its bytes in row order.
    const bool linear = rows == 1 && depth == 1 && y == 0 && z == 0;
    if (linear ? (x > arr->bytes() || width > arr->bytes() - x)
               : (x + width > arr->row_bytes || y + rows > arr->height || z + depth > arr->depth))
      return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} region is outside its array", call, which);
    out->base = arr->data();
    out->pitch = arr->row_bytes;
    out->height = arr->height;
    out->device = arr->device;
    out->device_only = true;
    out->pages = PageOwner{PageRelease::private_pages, arr->mapping};
    out->keep.push_back(arr->mapping);
    return CUDA_SUCCESS;
  }
  if (rows > 1 && width > pitch) return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} width exceeds its pitch", call, which);
  if (depth > 1 && rows > height) return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} height exceeds its rows", call, which);
  size_t first, extent;
  if (!region_span(x, y, z, pitch, height, width, rows, depth, &first, &extent))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} region overflows the address space", call, which);
  const uintptr_t origin = type == CU_MEMORYTYPE_HOST ? reinterpret_cast<uintptr_t>(host) : dptr;
  if (origin == 0) return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} pointer is NULL", call, which);
  if (origin > UINTPTR_MAX - first - extent) return CUDA_ERROR_INVALID_VALUE;
  out->pitch = pitch;
  out->height = height;
  std::vector<std::shared_ptr<Allocation>> holders;
  const bool known = c.mem->covers(origin + first, extent, &holders);
  if (type == CU_MEMORYTYPE_DEVICE && !known)
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} range {:#x}+{} is not inside one device allocation", call, which,
                origin + first, extent);
  if (known) {
    const Allocation& a = *holders.front();
    const bool host_kind = a.kind == AllocKind::pinned_host || a.kind == AllocKind::registered_host;
    out->device = host_kind ? -1 : a.device;
    out->device_only = true;  // when every allocation the range spans is
    for (auto& h : holders) out->device_only = out->device_only && device_only(h->kind);
    out->pages = page_owner(holders);
    // The origin itself may lie before the allocation (x/y offsets): address via the first byte.
    out->base = a.host + (origin + first - a.base) - first;
    for (auto& h : holders) {
      out->keep.push_back(h->mapping);
      out->keep.push_back(h->physical);
    }
  } else {
    // Plain host memory (pageable): nothing to check it against, as with the real driver.
    if (type == CU_MEMORYTYPE_UNIFIED || type == CU_MEMORYTYPE_HOST) {
      out->base = reinterpret_cast<char*>(origin);
      out->device = -1;
    } else {
      return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} memory type {} unknown", call, which, static_cast<int>(type));
    }
  }
  return CUDA_SUCCESS;
}

const simcore::GpuModel& model_of(const Call& c, int device) {
  const Device* d = c.driver->device(device >= 0 ? device : 0);
  static const simcore::GpuModel unknown{};
  return d ? d->model() : unknown;
}

// A synchronous copy waits for its work, except device to device: "for transfers from device
// memory to device memory, no host-side synchronization is performed" (CUDA runtime API, API
// synchronization behavior), so the host goes on while the copy runs in stream order.
CUresult run(Call& c, Work work, Submit how, bool device_to_device = false) {
  StreamQueue& s = c.driver->stream_queue();
  return how.async || device_to_device ? s.submit(how.stream, std::move(work), how.per_thread)
                                       : s.submit_and_wait(how.stream, std::move(work), how.per_thread);
}

double pcie_efficiency(const Call& c) { return c.driver->cluster().pcie.efficiency; }

}  // namespace

CUresult copy3d(const char* call, const CUDA_MEMCPY3D& p, Submit how) {
  Call c;
  if (CUresult r = begin(&c); r != CUDA_SUCCESS) return r;
  const size_t width = p.WidthInBytes, rows = p.Height ? p.Height : 1, depth = p.Depth ? p.Depth : 1;
  if (width == 0 || p.Height == 0 || p.Depth == 0) return CUDA_SUCCESS;  // nothing to move
  Side src, dst;
  if (CUresult r = resolve_side(call, "source", c, p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray,
                                p.srcXInBytes, p.srcY, p.srcZ, p.srcPitch ? p.srcPitch : width,
                                p.srcHeight ? p.srcHeight : rows, width, rows, depth, &src);
      r != CUDA_SUCCESS)
    return r;
  if (CUresult r = resolve_side(call, "destination", c, p.dstMemoryType, p.dstHost, p.dstDevice, p.dstArray,
                                p.dstXInBytes, p.dstY, p.dstZ, p.dstPitch ? p.dstPitch : width,
                                p.dstHeight ? p.dstHeight : rows, width, rows, depth, &dst);
      r != CUDA_SUCCESS)
    return r;
  const size_t sx = p.srcXInBytes;
  const size_t dx = p.dstXInBytes;
  const size_t bytes = width * rows * depth;

  Work w;
  w.kind = Work::Kind::copy;
  const char* dir = src.device < 0 ? (dst.device < 0 ? "HtoH" : "HtoD") : (dst.device < 0 ? "DtoH" : src.device == dst.device ? "DtoD" : "PtoP");
  w.label = fmt::format("memcpy {} {} B", dir, bytes);
  if (src.device >= 0 && dst.device >= 0 && src.device != dst.device) {
    // Over the peer link only with peer access enabled; else staged through host memory.
    if (c.driver->contexts().peer_access(src.device, dst.device))
      w.transfer = Work::Transfer{c.driver->global_gpu(src.device), c.driver->global_gpu(dst.device), bytes};
    else
      w.duration_s = copy_seconds(model_of(c, src.device), CopyPath::staged_peer, bytes, pcie_efficiency(c));
  } else if (src.device >= 0 && src.device == dst.device) {
    w.duration_s = copy_seconds(model_of(c, src.device), CopyPath::within_device, bytes);
  } else {
    w.duration_s = copy_seconds(model_of(c, src.device >= 0 ? src.device : dst.device), CopyPath::host_device, bytes,
                                pcie_efficiency(c));
  }
  const bool device_to_device = src.device >= 0 && dst.device >= 0;
  const size_t sy = p.srcY, sz = p.srcZ, dy = p.dstY, dz = p.dstZ;
  // Rows that follow each other on both sides are one span (a 1D copy is always one).
  auto contiguous = [&](const Side& s) {
    return (rows == 1 || s.pitch == width) && (depth == 1 || (s.pitch == width && s.height == rows));
  };
  const bool one_span = contiguous(src) && contiguous(dst);
  // Counted as the write into device memory it is (a copy into host memory is not counted).
  const auto path = src.device < 0 ? MemoryManager::DeviceWrite::host_to_device
                    : src.device == dst.device ? MemoryManager::DeviceWrite::device_to_device
                                               : MemoryManager::DeviceWrite::peer;
  MemoryManager::Impl* mem = dst.device >= 0 ? c.mem : nullptr;
  if (!writes_bytes(dst, bytes)) {
    c.mem->timed_only.fetch_add(bytes, std::memory_order_relaxed);
  } else {
    w.execute = [src = std::move(src), dst = std::move(dst), sx, sy, sz, dx, dy, dz, width, rows, depth, one_span,
                 path, mem] {
      const PageRelease release = dst.pages.now();
      PageWriteResult done;
      auto span = [&](size_t y, size_t z, size_t n) {
        const char* from = src.base + sx + (sy + y) * src.pitch + (sz + z) * src.pitch * src.height;
        char* to = dst.base + dx + (dy + y) * dst.pitch + (dz + z) * dst.pitch * dst.height;
        const PageWriteResult r = copy_pages(to, from, n, release);
        done.written += r.written;
        done.released += r.released;
      };
      if (one_span) {
        span(0, 0, width * rows * depth);
      } else {
        for (size_t z = 0; z < depth; ++z)
          for (size_t y = 0; y < rows; ++y) span(y, z, width);
      }
      if (mem) mem->note(path, done);
    };
  }
  return run(c, std::move(w), how, device_to_device);
}

CUresult copy1d(const char* call, CUmemorytype dst_type, uintptr_t dst, CUmemorytype src_type, uintptr_t src,
                size_t bytes, Submit how) {
  CUDA_MEMCPY3D p{};
  p.srcMemoryType = src_type;
  p.srcHost = reinterpret_cast<const void*>(src);
  p.srcDevice = src;
  p.dstMemoryType = dst_type;
  p.dstHost = reinterpret_cast<void*>(dst);
  p.dstDevice = dst;
  p.WidthInBytes = bytes;
  p.Height = 1;
  p.Depth = 1;
  if (bytes == 0) {
    // Still validate what the real driver validates: a live context.
    Call c;
    if (CUresult r = begin(&c); r != CUDA_SUCCESS) return r;
    return CUDA_SUCCESS;
  }
  return copy3d(call, p, how);
}

CUresult memset2d(const char* call, CUdeviceptr dst, size_t pitch, uint32_t value, unsigned element,
                  size_t width, size_t height, Submit how) {
  Call c;
  if (CUresult r = begin(&c); r != CUDA_SUCCESS) return r;
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (dst % element != 0 || (height > 1 && pitch % element != 0))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: destination {:#x} not aligned to {} bytes", call, dst, element);
  if (width > SIZE_MAX / element) return CUDA_ERROR_INVALID_VALUE;
  const size_t row = width * element;
  if (height > 1 && row > pitch) return fail(CUDA_ERROR_INVALID_VALUE, "{}: width exceeds pitch", call);
  Side side;
  if (CUresult r = resolve_side(call, "destination", c, CU_MEMORYTYPE_DEVICE, nullptr, dst, nullptr, 0, 0, 0,
                                height > 1 ? pitch : row, height, row, height, 1, &side);
      r != CUDA_SUCCESS)
    return r;
  const size_t bytes = row * height;
  Work w;
  w.kind = Work::Kind::memset;
  w.label = fmt::format("memset {} B", bytes);
  w.duration_s = copy_seconds(model_of(c, side.device), CopyPath::memset, bytes);
  const size_t step = height > 1 ? pitch : row;
  // A memset of zeros gives whole pages back instead of writing them (page_writes.h): exact, and
  // free of host memory, so it is performed whatever VGPU_SIM_COPY_DATA_BYTES says.
  MemoryManager::Impl* mem = side.device >= 0 ? c.mem : nullptr;
  if (value == 0) {
    w.execute = [side = std::move(side), row, height, step, mem] {
      const PageRelease release = side.pages.now();
      PageWriteResult done;
      if (height == 1 || step == row) {
        done = write_zeros(side.base, row * height, release);
      } else {
        for (size_t y = 0; y < height; ++y) {
          const PageWriteResult r = write_zeros(side.base + y * step, row, release);
          done.written += r.written;
          done.released += r.released;
        }
      }
      if (mem) mem->note(MemoryManager::DeviceWrite::memset, done);
    };
  } else if (!writes_bytes(side, bytes)) {
    c.mem->timed_only.fetch_add(bytes, std::memory_order_relaxed);
  } else {
    w.execute = [side = std::move(side), value, element, width, height, step, mem, bytes] {
      for (size_t y = 0; y < height; ++y) {
        char* p = side.base + y * step;
        if (element == 1) {
          std::memset(p, static_cast<int>(value & 0xff), width);
        } else if (element == 2) {
          const auto v = static_cast<uint16_t>(value);
          for (size_t i = 0; i < width; ++i) std::memcpy(p + 2 * i, &v, 2);
        } else {
          for (size_t i = 0; i < width; ++i) std::memcpy(p + 4 * i, &value, 4);
        }
      }
      if (mem) mem->note(MemoryManager::DeviceWrite::memset, PageWriteResult{bytes, 0});
    };
  }
  return run(c, std::move(w), how);
}

}  // namespace vgpu::sim
