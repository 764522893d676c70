// Zeros cost no host memory on the sim backend (issue 23: host memory per rank): a memset of 0
// over whole pages of device memory gives them back instead of writing them, and a copy from
// zeros (never-written memory) releases its destination's pages instead of copying zeros into
// them, with every byte reading back as writing would have left it. Through the driver API, on
// every kind of device memory the driver backs differently: cuMemAlloc (private pages), a
// stream-ordered pool, VMM (memfd pages), memory exported by cuIpcGetMemHandle (remapped onto
// a memfd), and two streams racing a copy against a release on neighbouring bytes.
//
//     zero_pages_program [--mib N] [--max-growth-mib M] [--leave-read-mib R]
//
// --mib N: the memset's size (default 1536; the copy is a third of it); --max-growth-mib M:
// fail when RssAnon grows by M MiB or more over the big memset and copy (not checked without it:
// sanitizer builds' shadow memory is RssAnon too); --leave-read-mib R: at the end, R MiB of device
// memory never written are read back and left allocated at exit, for VGPU_SIM_MEMORY_REPORT to
// count as pages only read (memory_report_check.py). Each check prints one line; the exit status
// is the number of failed checks.
#include <cuda.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "proc_status.h"
#include "resident_pages.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kChunk = 8 * kMiB;  // read back through one host buffer of this size

int g_failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

bool cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  check(false, std::string(what) + " -> " + (name ? name : std::to_string(r)));
  return false;
}

// The pattern a written byte holds at offset `i` of its region (never zero, so a page of it is
// never taken for zeros).
uint8_t pattern(size_t i, uint8_t seed) { return static_cast<uint8_t>(((i * 131) ^ (i >> 12)) % 255 + 1 + seed) | 1; }

// Writes the pattern into [d, d + n) through a host buffer of kChunk.
bool write_pattern(CUdeviceptr d, size_t n, uint8_t seed, std::vector<uint8_t>& buf) {
  for (size_t off = 0; off < n; off += kChunk) {
    const size_t len = std::min(kChunk, n - off);
    for (size_t i = 0; i < len; ++i) buf[i] = pattern(off + i, seed);
    if (!cu(cuMemcpyHtoD(d + off, buf.data(), len), "cuMemcpyHtoD")) return false;
  }
  return true;
}

// Reads [d, d + n) back in chunks and checks every byte against `want(offset)`; names the first
// wrong byte.
template <class Want>
void expect_bytes(CUdeviceptr d, size_t n, std::vector<uint8_t>& buf, Want want, const std::string& what) {
  for (size_t off = 0; off < n; off += kChunk) {
    const size_t len = std::min(kChunk, n - off);
    std::memset(buf.data(), 0xee, len);
    if (!cu(cuMemcpyDtoH(buf.data(), d + off, len), "cuMemcpyDtoH")) return;
    for (size_t i = 0; i < len; ++i) {
      if (buf[i] != want(off + i)) {
        check(false, what + ": byte " + std::to_string(off + i) + " reads " + std::to_string(buf[i]) +
                         ", expected " + std::to_string(want(off + i)));
        return;
      }
    }
  }
  check(true, what);
}

// MiB of [p, p + n) resident (mincore: for memfd memory, the file's pages).
size_t resident_mib(CUdeviceptr p, size_t n) {
  const size_t pages = vtest::resident_pages(p, n);
  return pages == SIZE_MAX ? SIZE_MAX : pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) / kMiB;
}

// Whether this kernel maps a page that is only read to its shared zero page (pagemap: present,
// not exclusive). Some kernels (a 6.18 microVM guest, 2026-11-28) give a read fault a page of its
// own: there reading never-written memory costs memory whatever the driver does, and a check of
// how little RssAnon grows says nothing about vgpu.
bool reads_map_the_zero_page() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), n = 8 * page;
  void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return true;
  volatile const char* p = static_cast<const char*>(m);
  for (size_t i = 0; i < n; i += page) (void)p[i];
  bool zero_page = true;
  if (FILE* f = std::fopen("/proc/self/pagemap", "rb")) {
    uint64_t e[8] = {};
    if (std::fseek(f, static_cast<long>(reinterpret_cast<uintptr_t>(m) / page * 8), SEEK_SET) == 0 &&
        std::fread(e, sizeof e, 1, f) == 1)
      for (uint64_t x : e) zero_page = zero_page && !((x >> 63) & 1 && (x >> 56) & 1);
    std::fclose(f);
  }
  munmap(m, n);
  return zero_page;
}

// The case: gigabytes of memset 0 and of a copy from never-written memory, a pattern
// around them. RssAnon may grow by less than `max_growth_mib` over it.
void big_memset_and_copy(size_t memset_bytes, long max_growth_mib, std::vector<uint8_t>& buf) {
  const size_t copy_bytes = memset_bytes / 3 / kMiB * kMiB;
  const size_t head = 5 * kMiB + 777;                     // pattern kept before the memset
  const size_t a_size = memset_bytes + 16 * kMiB;         // A: pattern, then the memset over most of it
  const size_t tail_at = memset_bytes + 5 * kMiB;         // a pattern written into A's tail too
  CUdeviceptr a = 0, b = 0, c = 0, d = 0;
  if (!cu(cuMemAlloc(&a, a_size), "cuMemAlloc A") || !cu(cuMemAlloc(&b, copy_bytes), "cuMemAlloc B") ||
      !cu(cuMemAlloc(&c, copy_bytes), "cuMemAlloc C") || !cu(cuMemAlloc(&d, 8 * kMiB + 100), "cuMemAlloc D"))
    return;
  // Written before: A's first 16 MiB and its tail, C's first 8 MiB, D (the written source).
  if (!write_pattern(a, 16 * kMiB, 1, buf) || !write_pattern(a + tail_at, a_size - tail_at, 2, buf) ||
      !write_pattern(c, 8 * kMiB, 3, buf) || !write_pattern(d, 8 * kMiB + 100, 4, buf))
    return;
  const long before = status_kb("RssAnon");
  // The memset starts and ends inside pages of the pattern (partial pages are written).
  cu(cuMemsetD8(a + head, 0, memset_bytes), "cuMemsetD8 0");
  // B was never written: C reads zeros after, its 8 MiB of pattern given back.
  cu(cuMemcpyDtoD(c, b, copy_bytes), "cuMemcpyDtoD from never-written memory");
  // A written source arrives intact, at an offset that is no page's start.
  cu(cuMemcpyDtoD(c + 12345, d, 8 * kMiB + 100), "cuMemcpyDtoD of the pattern");
  cu(cuCtxSynchronize(), "cuCtxSynchronize");
  const long after = status_kb("RssAnon");
  const long growth_mib = (after - before) / 1024;
  std::printf("     RssAnon %ld -> %ld MiB (%+ld MiB) over a memset of 0 of %zu MiB and a copy of %zu MiB from "
              "never-written memory\n", before / 1024, after / 1024, growth_mib, memset_bytes / kMiB,
              copy_bytes / kMiB);
  if (max_growth_mib > 0 && !reads_map_the_zero_page())
    std::printf("skip RssAnon's growth: this kernel gives a page only read a page of its own (no shared zero page)\n");
  else if (max_growth_mib > 0)
    check(growth_mib < max_growth_mib, "RssAnon grew by less than " + std::to_string(max_growth_mib) + " MiB");
  expect_bytes(a, a_size, buf, [&](size_t i) -> uint8_t {
    if (i >= head && i < head + memset_bytes) return 0;
    if (i < 16 * kMiB) return pattern(i, 1);
    if (i >= tail_at) return pattern(i - tail_at, 2);
    return 0;
  }, "A: zeros where set, the pattern on both sides kept");
  expect_bytes(c, copy_bytes, buf, [&](size_t i) -> uint8_t {
    return i >= 12345 && i < 12345 + 8 * kMiB + 100 ? pattern(i - 12345, 4) : 0;
  }, "C: zeros copied from B over its pattern, then D's pattern intact");
  expect_bytes(b, copy_bytes, buf, [](size_t) -> uint8_t { return 0; }, "B: still zeros");
  for (CUdeviceptr p : {a, b, c, d}) cuMemFree(p);
}

// Element sizes 2 and 4 and a 2D memset (rows of a pitch) set zeros the same way.
void element_and_pitch(std::vector<uint8_t>& buf) {
  const size_t n = 24 * kMiB;
  CUdeviceptr a = 0;
  if (!cu(cuMemAlloc(&a, n), "cuMemAlloc") || !write_pattern(a, n, 5, buf)) return;
  // Words [1 MiB + 6, ...) for 3 MiB + 2 of 16-bit elements; 32-bit for 4 MiB from 6 MiB + 4;
  // rows of 1 MiB + 100 bytes every 3 MiB from 12 MiB, 3 rows.
  const size_t w16 = kMiB + 6, n16 = (3 * kMiB + 2) / 2, w32 = 6 * kMiB + 4, n32 = kMiB;
  const size_t r0 = 12 * kMiB, pitch = 3 * kMiB, row = kMiB + 100, rows = 3;
  cu(cuMemsetD16(a + w16, 0, n16), "cuMemsetD16 0");
  cu(cuMemsetD32(a + w32, 0, n32), "cuMemsetD32 0");
  cu(cuMemsetD2D8(a + r0, pitch, 0, row, rows), "cuMemsetD2D8 0");
  expect_bytes(a, n, buf, [&](size_t i) -> uint8_t {
    if (i >= w16 && i < w16 + 2 * n16) return 0;
    if (i >= w32 && i < w32 + 4 * n32) return 0;
    if (i >= r0 && i < r0 + rows * pitch && (i - r0) % pitch < row) return 0;
    return pattern(i, 5);
  }, "16-bit, 32-bit and pitched memsets of 0");
  cuMemFree(a);
}

// Pool and VMM memory: released as their backing needs (a private block; memfd pages), exactly.
void pool_and_vmm(std::vector<uint8_t>& buf) {
  const size_t n = 32 * kMiB;
  CUstream s = nullptr;
  CUdeviceptr p = 0;
  if (cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate") &&
      cu(cuMemAllocAsync(&p, n, s), "cuMemAllocAsync") && cu(cuStreamSynchronize(s), "sync") &&
      write_pattern(p, n, 6, buf)) {
    cu(cuMemsetD8Async(p + 1000, 0, n - 2000, s), "cuMemsetD8Async 0 on pool memory");
    cu(cuStreamSynchronize(s), "sync");
    check(resident_mib(p, n) <= 1, "pool memory: the pages set to 0 are given back");
    expect_bytes(p, n, buf, [&](size_t i) -> uint8_t { return i >= 1000 && i < n - 1000 ? 0 : pattern(i, 6); },
                 "pool memory reads zeros where set");
    cuMemFreeAsync(p, s);
    cuStreamSynchronize(s);
  }
  if (s) cuStreamDestroy(s);

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr v = 0;
  if (!cu(cuMemCreate(&h, n, &prop, 0), "cuMemCreate") || !cu(cuMemAddressReserve(&v, n, 0, 0, 0), "reserve") ||
      !cu(cuMemMap(v, n, 0, h, 0), "cuMemMap"))
    return;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  cu(cuMemSetAccess(v, n, &access, 1), "cuMemSetAccess");
  if (write_pattern(v, n, 7, buf)) {
    const size_t was = resident_mib(v, n);
    cu(cuMemsetD8(v + 4096, 0, n - 8192), "cuMemsetD8 0 on VMM memory");
    check(was >= 31 && resident_mib(v, n) <= 1, "VMM memory: the memfd's pages set to 0 are given back");
    expect_bytes(v, n, buf, [&](size_t i) -> uint8_t { return i >= 4096 && i < n - 4096 ? 0 : pattern(i, 7); },
                 "VMM memory reads zeros where set");
  }
  cuMemUnmap(v, n);
  cuMemAddressFree(v, n);
  cuMemRelease(h);
}

// An allocation exported by cuIpcGetMemHandle is remapped onto a memfd: only its written pages
// are moved there, and a memset of 0 afterwards punches the memfd's pages (dropping this
// process's view of them would leave the bytes).
void ipc_exported(std::vector<uint8_t>& buf) {
  const size_t n = 64 * kMiB;
  CUdeviceptr a = 0;
  if (!cu(cuMemAlloc(&a, n), "cuMemAlloc") || !write_pattern(a + 8 * kMiB, 2 * kMiB, 8, buf)) return;
  CUipcMemHandle handle;
  if (!cu(cuIpcGetMemHandle(&handle, a), "cuIpcGetMemHandle")) return;
  check(resident_mib(a, n) <= 3, "export: only the written pages are moved into the memfd");
  expect_bytes(a, n, buf, [&](size_t i) -> uint8_t {
    return i >= 8 * kMiB && i < 10 * kMiB ? pattern(i - 8 * kMiB, 8) : 0;
  }, "export: the bytes are kept");
  cu(cuMemsetD8(a, 0, n), "cuMemsetD8 0 after the export");
  check(resident_mib(a, n) == 0, "export: the memset gives the memfd's pages back");
  expect_bytes(a, n, buf, [](size_t) -> uint8_t { return 0; }, "export: zeros after the memset");
  cuMemFree(a);
}

// Two streams: one copies a pattern up to an offset inside a page while the other sets zeros
// from that offset on (its first page partly written, the rest released), a third copies zeros
// over a patterned range; again and again. Every byte must end as the operations say.
void racing_streams(std::vector<uint8_t>& buf) {
  const size_t n = 48 * kMiB, cut = 8 * kMiB + 100, zeros_at = 24 * kMiB + 4096 * 3 + 17;
  CUdeviceptr e = 0, src = 0, never = 0;
  CUstream s[3] = {};
  if (!cu(cuMemAlloc(&e, n), "cuMemAlloc") || !cu(cuMemAlloc(&src, cut), "cuMemAlloc") ||
      !cu(cuMemAlloc(&never, 8 * kMiB), "cuMemAlloc") || !write_pattern(src, cut, 9, buf))
    return;
  for (CUstream& x : s) cu(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  bool ok = true;
  for (int round = 0; round < 8 && ok; ++round) {
    ok = write_pattern(e, n, static_cast<uint8_t>(10 + round), buf);
    ok = ok && cu(cuMemcpyDtoDAsync(e, src, cut, s[0]), "copy");
    ok = ok && cu(cuMemsetD8Async(e + cut, 0, zeros_at - cut, s[1]), "memset");
    ok = ok && cu(cuMemcpyDtoDAsync(e + zeros_at, never, 8 * kMiB, s[2]), "copy of zeros");
    for (CUstream x : s) ok = ok && cu(cuStreamSynchronize(x), "sync");
    if (!ok) break;
    const auto seed = static_cast<uint8_t>(10 + round);
    for (size_t off = 0; off < n && ok; off += kChunk) {
      const size_t len = std::min(kChunk, n - off);
      ok = cu(cuMemcpyDtoH(buf.data(), e + off, len), "cuMemcpyDtoH");
      for (size_t i = 0; i < len && ok; ++i) {
        const size_t at = off + i;
        const uint8_t want = at < cut ? pattern(at, 9) : at < zeros_at + 8 * kMiB ? 0 : pattern(at, seed);
        if (buf[i] != want) {
          check(false, "racing streams, round " + std::to_string(round) + ": byte " + std::to_string(at));
          ok = false;
        }
      }
    }
  }
  if (ok) check(true, "a copy, a memset of 0 and a copy of zeros on three streams, 8 rounds");
  for (CUstream x : s) cuStreamDestroy(x);
  for (CUdeviceptr p : {e, src, never}) cuMemFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1536, leave_read_mib = 0;
  long max_growth_mib = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mib") == 0) mib = std::strtoul(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--max-growth-mib") == 0) max_growth_mib = std::strtol(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--leave-read-mib") == 0) leave_read_mib = std::strtoul(argv[i + 1], nullptr, 10);
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (!cu(cuInit(0), "cuInit") || !cu(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
      !cu(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") || !cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
    return 1;
  std::vector<uint8_t> buf(kChunk, 1);  // touched now: not part of any growth measured
  big_memset_and_copy(mib * kMiB, max_growth_mib, buf);
  element_and_pitch(buf);
  pool_and_vmm(buf);
  ipc_exported(buf);
  racing_streams(buf);
  if (leave_read_mib > 0) {  // read, never written, and still allocated at exit (the context too)
    CUdeviceptr r = 0;
    if (cu(cuMemAlloc(&r, leave_read_mib * kMiB), "cuMemAlloc"))
      expect_bytes(r, leave_read_mib * kMiB, buf, [](size_t) -> uint8_t { return 0; }, "never written: zeros");
  } else {
    cuDevicePrimaryCtxRelease(dev);
  }
  std::printf("%d check(s) failed\n", g_failures);
  return g_failures;
}
