// Entry points: recognise what was handed in, find its extent when only a pointer is known,
// pick the fat binary entry, and turn every failure into a ParseError.
#include "module/image.h"

#include "module/byte_view.h"
#include "module/cubin.h"
#include "module/elf_reader.h"
#include "module/fatbin.h"
#include "module/ptx.h"
#include "module/readable_memory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace vgpu::module {
namespace {

constexpr uint32_t kElfMagic = 0x464c457f;
constexpr uint64_t kElfHeaderBytes = 64;

// cudart's __fatBinC_Wrapper_t (fatbinary_section.h) on a 64-bit host.
struct RegistrationWrapper {
  int32_t magic;
  int32_t version;
  const void* data;
  const void* filename_or_fatbins;
};

// Compares the first bytes at `p` with a little-endian magic number one byte at a time, so that
// a short NUL-terminated string is never read past its terminator (no magic contains a zero).
bool has_magic(const uint8_t* p, uint32_t magic) {
  for (int i = 0; i < 4; ++i)
    if (p[i] != static_cast<uint8_t>(magic >> (8 * i))) return false;
  return true;
}

template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ImageError& e) {
    return ParseError{e.kind(), e.what()};
  } catch (const std::bad_alloc&) {
    return ParseError{ErrorKind::invalid_image, "out of memory while reading the image"};
  } catch (const std::exception& e) {
    return ParseError{ErrorKind::invalid_image, e.what()};
  }
}

std::string_view text_until_nul(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return {};
  const void* nul = std::memchr(bytes.data(), 0, bytes.size());
  const size_t n = nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - bytes.data()) : bytes.size();
  return {reinterpret_cast<const char*>(bytes.data()), n};
}

ModuleImage parse_fatbin_image(std::span<const uint8_t> bytes, int sm_arch, const ParseOptions& options) {
  const std::vector<FatbinEntry> entries = parse_fatbin(bytes);
  if (entries.empty()) fail_kind(ErrorKind::no_binary_for_gpu, "fat binary holds no code");
  const FatbinEntry& chosen = select_fatbin_entry(entries, sm_arch);
  // An entry stored as is is read where it lies (the caller's image); only a compressed one is
  // decompressed, into a buffer freed when the parse ends (module/byte_buffer.h).
  ByteBuffer decompressed;
  std::span<const uint8_t> payload = chosen.stored;
  if (chosen.lz4() || chosen.zstd()) {
    decompressed = fatbin_payload(chosen, options.max_decompressed_bytes);
    payload = std::span<const uint8_t>(decompressed.data(), decompressed.size());
  }
  ModuleImage image;
  if (chosen.is_elf()) {
    image = parse_cubin(payload, 0);  // the entry header already matched the architecture
  } else {
    image = parse_ptx(text_until_nul(payload), 0);
  }
  image.sm_arch = static_cast<int>(chosen.arch);
  image.kind = ImageKind::fatbin;
  image.decompressed_bytes = decompressed.size();
  return image;
}

ModuleImage parse_bytes(std::span<const uint8_t> bytes, int sm_arch, const ParseOptions& options) {
  if (bytes.size() > options.max_image_bytes)
    fail("image of {} bytes exceeds the {}-byte limit", bytes.size(), options.max_image_bytes);
  if (bytes.size() >= 4) {
    if (has_magic(bytes.data(), kFatbinMagic)) return parse_fatbin_image(bytes, sm_arch, options);
    if (has_magic(bytes.data(), kElfMagic)) return parse_cubin(bytes, sm_arch);
    if (has_magic(bytes.data(), kFatbinWrapperMagic))
      fail("a fat binary registration wrapper holds a pointer: pass its address to parse_image_at");
  }
  const std::string_view text = text_until_nul(bytes);
  if (looks_like_ptx(text)) return parse_ptx(text, sm_arch);
  fail("not a CUDA module image (no fat binary, cubin or PTX signature)");
}

// The extent of an image known only by address, reading nothing its headers do not promise.
uint64_t probe(const uint8_t* p, const ParseOptions& options) {
  if (p == nullptr) fail("null image pointer");
  bool unreadable = false;
  readable_strnlen(reinterpret_cast<const char*>(p), 4, &unreadable);
  if (unreadable) fail("the image pointer {} is not readable memory", static_cast<const void*>(p));
  const uint64_t cap = options.max_image_bytes;
  // Every extent a header claims is checked against the limit and against the memory really
  // there before a byte of it is read: a corrupt header is an error, not a segfault.
  uint64_t checked = 0;  // [p, p + checked) is known readable
  auto limited = [&](uint64_t n, const char* what) {
    if (n > cap) fail("{} claims {} bytes, over the {}-byte limit", what, n, cap);
    if (n > checked) {
      if (!readable(p + checked, n - checked))
        fail("{} claims {} bytes, but the memory at the image's address ends before that", what, n);
      checked = n;
    }
    return std::span<const uint8_t>(p, static_cast<size_t>(n));
  };
  if (has_magic(p, kFatbinWrapperMagic)) return sizeof(RegistrationWrapper);
  if (has_magic(p, kFatbinMagic)) {
    const uint64_t total = fatbin_total_size(limited(kFatbinHeaderSize, "fat binary header"));
    limited(total, "fat binary");
    return total;
  }
  if (has_magic(p, kElfMagic)) {
    const ByteView head(limited(kElfHeaderBytes, "ELF header"));
    const uint64_t shoff = head.u64(40, "ELF header");
    const uint64_t shentsize = head.u16(58, "ELF header");
    uint64_t shnum = head.u16(60, "ELF header");
    if (shnum == 0 && shoff != 0) {
      const uint64_t at = checked_add(shoff, 32, "ELF section 0");
      shnum = ByteView(limited(checked_add(at, 8, "ELF section 0"), "ELF section 0")).u64(at, "ELF section count");
    }
    const uint64_t table_end = checked_add(shoff, checked_mul(shnum, shentsize, "ELF sections"), "ELF sections");
    const uint64_t end = std::max(table_end, ElfFile::extent(limited(std::max(table_end, kElfHeaderBytes), "ELF section table")));
    limited(end, "ELF image");
    return end;
  }
  const uint64_t n = readable_strnlen(reinterpret_cast<const char*>(p), cap, &unreadable);
  if (unreadable) fail("text image: the memory ends after {} bytes without a NUL terminator", n);
  if (n == cap) fail("no NUL terminator within {} bytes: not PTX text", cap);
  return n + 1;
}

ModuleImage parse_at(const void* image, int sm_arch, const ParseOptions& options) {
  const auto* p = static_cast<const uint8_t*>(image);
  // The first bytes say what the image is; a pointer to nothing readable is refused here.
  bool unreadable = false;
  if (p != nullptr) readable_strnlen(reinterpret_cast<const char*>(p), 4, &unreadable);
  if (unreadable) fail("the image pointer {} is not readable memory", static_cast<const void*>(p));
  if (p != nullptr && has_magic(p, kFatbinWrapperMagic)) {
    if (!readable(p, sizeof(RegistrationWrapper))) fail("fat binary wrapper cut short by unreadable memory");
    RegistrationWrapper w;
    std::memcpy(&w, p, sizeof w);
    if (w.version != 1 && w.version != 2) fail("fat binary wrapper has version {}", w.version);
    const auto* data = static_cast<const uint8_t*>(w.data);
    if (data == nullptr || !readable(data, 4) || !has_magic(data, kFatbinMagic))
      fail("fat binary wrapper does not point at a fat binary");
    p = data;
  }
  const uint64_t size = probe(p, options);
  return parse_bytes(std::span<const uint8_t>(p, static_cast<size_t>(size)), sm_arch, options);
}

std::vector<uint8_t> read_file(const std::string& path, const ParseOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) fail_kind(ErrorKind::file_not_found, "{}: no such file", path);
    fail("{}: {}", path, std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
  if (static_cast<uint64_t>(st.st_size) > options.max_image_bytes)
    fail("{}: {} bytes exceed the {}-byte limit", path, st.st_size, options.max_image_bytes);
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("{}: read failed after {} bytes", path, done);
    done += static_cast<size_t>(r);
  }
  return bytes;
}

}  // namespace

const KernelInfo* ModuleImage::find_kernel(std::string_view name) const {
  for (const KernelInfo& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

const GlobalInfo* ModuleImage::find_global(std::string_view name) const {
  for (const GlobalInfo& g : globals)
    if (g.name == name) return &g;
  return nullptr;
}

ParseResult parse_image(std::span<const uint8_t> bytes, int sm_arch, const ParseOptions& options) {
  return guarded([&]() -> ParseResult { return parse_bytes(bytes, sm_arch, options); });
}

ParseResult parse_image_at(const void* image, int sm_arch, const ParseOptions& options) {
  return guarded([&]() -> ParseResult { return parse_at(image, sm_arch, options); });
}

Result<uint64_t> probe_image_size(const void* image, const ParseOptions& options) {
  return guarded([&]() -> Result<uint64_t> { return probe(static_cast<const uint8_t*>(image), options); });
}

Result<std::vector<uint8_t>> read_image_file(const std::string& path, const ParseOptions& options) {
  return guarded([&]() -> Result<std::vector<uint8_t>> { return read_file(path, options); });
}

ParseResult parse_image_file(const std::string& path, int sm_arch, const ParseOptions& options) {
  return guarded([&]() -> ParseResult { return parse_bytes(read_file(path, options), sm_arch, options); });
}

}  // namespace vgpu::module
