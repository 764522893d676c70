// The sim driver's own host memory for loading a CUDA library's modules (issue 23: ranks as
// processes must fit 64 to a 128 GB host). It maps a shared library built with CUDA kernels
// (cuBLASLt by default), hands every fat binary of its .nv_fatbin section to cuLibraryLoadData,
// as cudart does for the fat binaries a program registers, and reads the process's RssAnon and
// malloc's bytes in use before and after. The file is mapped read-only, so its bytes count as
// RssFile: what RssAnon gains is the driver's (the tables it keeps per library and kernel, and
// whatever a parse leaves behind). Then it resolves one kernel of every library on the device
// (cuKernelGetFunction: the per-device module a launch needs), unloads everything and reads
// again (what unloading gives back).
//
//   module_memory_program [LIBRARY.so] [--max-anon-bytes-per-kernel N]
//
// Prints one line per stage and a last line "anon bytes per kernel A (bound N)"; exits non-zero
// when a load fails or, with a bound, when the driver kept more than N bytes of RssAnon per kernel
// after loading and resolving.
#include <cuda.h>
#include <elf.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "proc_status.h"

namespace {

// Bytes malloc hands out now (small blocks and mmapped large ones).
long long heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<long long>(m.uordblks + m.hblkhd);
}

struct Reading {
  long anon_kb, file_kb;
  long long heap;
};

Reading read_now() { return {status_kb("RssAnon"), status_kb("RssFile"), heap_bytes()}; }

void report(const char* stage, const Reading& r, const Reading& base) {
  std::printf("%-34s RssAnon %7.1f MiB (%+8.1f)  heap %7.1f MiB (%+8.1f)  RssFile %7.1f MiB\n", stage,
              r.anon_kb / 1024.0, (r.anon_kb - base.anon_kb) / 1024.0, r.heap / 1048576.0,
              (r.heap - base.heap) / 1048576.0, r.file_kb / 1024.0);
}

// The fat binaries of the library's .nv_fatbin section, back to back (each 8-byte aligned).
std::vector<const uint8_t*> fatbins_of(const uint8_t* file, size_t size) {
  std::vector<const uint8_t*> out;
  if (size < sizeof(Elf64_Ehdr)) return out;
  Elf64_Ehdr eh;
  std::memcpy(&eh, file, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) > size)
    return out;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), file + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  if (eh.e_shstrndx >= sh.size()) return out;
  const char* names = reinterpret_cast<const char*>(file + sh[eh.e_shstrndx].sh_offset);
  for (const Elf64_Shdr& s : sh) {
    if (std::strcmp(names + s.sh_name, ".nv_fatbin") != 0 || s.sh_offset + s.sh_size > size) continue;
    uint64_t at = 0;
    while (at + 16 <= s.sh_size) {
      const uint8_t* p = file + s.sh_offset + at;
      uint32_t magic;
      uint64_t rest;
      std::memcpy(&magic, p, 4);
      std::memcpy(&rest, p + 8, 8);
      if (magic != 0xBA55ED50u) {  // padding between containers
        at += 8;
        continue;
      }
      out.push_back(p);
      at += (16 + rest + 7) / 8 * 8;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "libcublasLt.so.13";
  long long bound = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--max-anon-bytes-per-kernel") == 0 && i + 1 < argc) bound = std::atoll(argv[++i]);
    else path = argv[i];
  }
  // A bare name is looked up where the CUDA libraries are (LD_LIBRARY_PATH).
  if (path.find('/') == std::string::npos) {
    const char* dirs = std::getenv("LD_LIBRARY_PATH");
    std::string all = dirs ? dirs : "";
    for (size_t b = 0; b <= all.size();) {
      size_t e = all.find(':', b);
      if (e == std::string::npos) e = all.size();
      const std::string candidate = all.substr(b, e - b) + "/" + path;
      if (e > b && access(candidate.c_str(), R_OK) == 0) {
        path = candidate;
        break;
      }
      b = e + 1;
    }
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    std::printf("FAIL cannot open %s\n", path.c_str());
    return 1;
  }
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    std::printf("FAIL cannot map %s\n", path.c_str());
    return 1;
  }
  const std::vector<const uint8_t*> fatbins = fatbins_of(static_cast<const uint8_t*>(map), static_cast<size_t>(st.st_size));
  std::printf("%s: %zu fat binaries in .nv_fatbin\n", path.c_str(), fatbins.size());
  if (fatbins.empty()) return 1;

  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    std::printf("FAIL no context\n");
    return 1;
  }
  std::vector<CUlibrary> libs;
  libs.reserve(fatbins.size());
  std::vector<CUkernel> first(fatbins.size(), nullptr);
  malloc_trim(0);
  const Reading base = read_now();
  report("context made", base, base);

  unsigned long long kernels = 0;
  int failed = 0, refused = 0;
  for (const uint8_t* fb : fatbins) {
    CUlibrary lib = nullptr;
    const CUresult r = cuLibraryLoadData(&lib, fb, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU) {  // code for other architectures only
      ++refused;
      continue;
    }
    if (r != CUDA_SUCCESS) {
      ++failed;
      continue;
    }
    unsigned int n = 0;
    cuLibraryGetKernelCount(&n, lib);
    kernels += n;
    if (n > 0) {
      std::vector<CUkernel> ks(n);
      if (cuLibraryEnumerateKernels(ks.data(), n, lib) == CUDA_SUCCESS) first[libs.size()] = ks[0];
    }
    libs.push_back(lib);
  }
  const Reading loaded = read_now();
  std::printf("loaded %zu libraries (%d without code for this GPU, %d failed), %llu kernels\n", libs.size(),
              refused, failed, kernels);
  report("after cuLibraryLoadData of all", loaded, base);

  int unresolved = 0;
  for (size_t i = 0; i < libs.size(); ++i) {
    CUfunction f = nullptr;
    if (first[i] && cuKernelGetFunction(&f, first[i]) != CUDA_SUCCESS) ++unresolved;
  }
  const Reading resolved = read_now();
  report("after one cuKernelGetFunction each", resolved, base);

  for (CUlibrary lib : libs)
    if (cuLibraryUnload(lib) != CUDA_SUCCESS) ++failed;
  malloc_trim(0);
  report("after cuLibraryUnload of all", read_now(), base);

  const long long anon = (resolved.anon_kb - base.anon_kb) * 1024LL;
  const long long per_kernel = kernels ? anon / static_cast<long long>(kernels) : 0;
  const bool ok = failed == 0 && unresolved == 0 && kernels > 0 && (bound < 0 || per_kernel <= bound);
  std::printf("%s anon bytes per kernel %lld (bound %lld), %d failed loads, %d unresolved\n", ok ? "ok  " : "FAIL",
              per_kernel, bound, failed, unresolved);
  cuDevicePrimaryCtxRelease(dev);
  munmap(map, static_cast<size_t>(st.st_size));
  return ok ? 0 : 1;
}
