// The module image parser: what a CUDA program hands to cuModuleLoadData / cuLibraryLoadData /
// __cudaRegisterFatBinary (a fat binary, a cubin, PTX text, or cudart's registration wrapper),
// read without a GPU. It enumerates kernels with their parameter layout and resources, and the
// module's global variables with their initial bytes, so that the sim backend can resolve
// functions and globals and answer cuFuncGetParamInfo. Nothing executes.
//
// Pure library: no driver state, no logging, thread-safe (no shared mutable state). Every
// read is bounds-checked; a truncated or corrupt image yields an error (never a crash, never a
// read past what the headers promise, never an allocation beyond what the input can fill).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vgpu::module {

// One kernel parameter: where it sits in the parameter block and how many bytes it has.
struct ParamInfo {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct KernelInfo {
  std::string name;                 // as the binary spells it (mangled for C++ kernels)
  std::vector<ParamInfo> params;    // in declaration order (ordinal 0 first)
  uint32_t param_bytes = 0;         // bytes of the parameter block a launch copies
  uint32_t shared_bytes = 0;        // static shared memory, without the part the driver reserves
  uint32_t local_bytes = 0;         // per-thread stack frame (local memory)
  int registers = -1;               // per thread; -1 when unknown (PTX is not compiled here)
  int max_registers = -1;           // a register cap from __launch_bounds__/-maxrregcount; -1: none
  uint32_t max_threads = 0;         // most threads per block the kernel allows; 0: not declared
  std::array<uint32_t, 3> max_ntid{};      // .maxntid / __launch_bounds__ (0,0,0: none)
  std::array<uint32_t, 3> req_ntid{};      // .reqntid (0,0,0: none)
  std::array<uint32_t, 3> cluster_dims{};  // __cluster_dims__ (0,0,0: none)
  uint32_t min_blocks_per_sm = 0;   // .minnctapersm (PTX only)
  uint32_t barriers = 0;            // named barriers used
};

enum class GlobalSpace { global, constant };

struct GlobalInfo {
  std::string name;
  uint64_t size = 0;
  GlobalSpace space = GlobalSpace::global;
  bool managed = false;             // __managed__
  // Initial contents from offset 0. May be shorter than `size` (or empty): the rest is zero.
  std::vector<uint8_t> init;
};

// What the caller handed in.
enum class ImageKind { fatbin, cubin, ptx };

struct ModuleImage {
  std::vector<KernelInfo> kernels;  // in symbol-table (cubin) or source (PTX) order
  std::vector<GlobalInfo> globals;
  int sm_arch = 0;                  // architecture of the code chosen, e.g. 90 (sm_90 / compute_90)
  bool from_ptx = false;            // the code chosen is PTX (a real driver would JIT it)
  ImageKind kind = ImageKind::cubin;
  // Bytes a fat binary entry decompressed to for this parse (0: read where it was stored); the
  // buffer is gone once parsed, but it was the parse's largest allocation.
  uint64_t decompressed_bytes = 0;

  // Linear lookups; a caller resolving often should index the vectors itself.
  const KernelInfo* find_kernel(std::string_view name) const;
  const GlobalInfo* find_global(std::string_view name) const;
};

// Why an image was refused. The driver maps these to CUresult values.
enum class ErrorKind {
  invalid_image,      // truncated, corrupt, not a CUDA image (CUDA_ERROR_INVALID_IMAGE)
  invalid_ptx,        // PTX that cannot be read (CUDA_ERROR_INVALID_PTX)
  no_binary_for_gpu,  // well-formed, but no code usable on the requested architecture
  unsupported,        // well-formed, uses a feature this parser does not implement
  file_not_found,     // read_image_file: no such file (CUDA_ERROR_FILE_NOT_FOUND)
};

struct ParseError {
  ErrorKind kind = ErrorKind::invalid_image;
  std::string message;  // one line saying what is wrong and where
};

template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}                // NOLINT: implicit by design
  Result(ParseError error) : error_(std::move(error)) {}       // NOLINT
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const ParseError& error() const { return error_; }
  const std::string& message() const { return error_.message; }

 private:
  std::optional<T> value_;
  ParseError error_;
};

using ParseResult = Result<ModuleImage>;

struct ParseOptions {
  // Largest image accepted, and largest scan for a NUL-terminated PTX string of unknown length.
  uint64_t max_image_bytes = uint64_t{1} << 30;
  // Largest decompressed payload of one fat binary entry. Compression lets a few kilobytes
  // claim gigabytes (Zstandard RLE blocks), so this bounds what a hostile image can make us
  // allocate. (Not measured against the largest cubins of CUDA's libraries: raise it if one
  // needs more.)
  uint64_t max_decompressed_bytes = uint64_t{512} << 20;
};

// Parses an image whose extent is known: a fat binary, a cubin (ELF64, EM_CUDA) or PTX text.
// `sm_arch` (e.g. 90 for H100, 100 for B200) picks the fat binary entry: SASS for that
// architecture, else SASS of the same major built for an older minor, else the newest PTX not
// newer than it. sm_arch <= 0 takes the newest SASS, else the newest PTX. A lone cubin that
// cannot run on sm_arch is refused (no_binary_for_gpu), lone PTX targeting a newer one too
// (invalid_ptx). A registration wrapper is refused here (it holds a pointer): use
// parse_image_at.
ParseResult parse_image(std::span<const uint8_t> bytes, int sm_arch, const ParseOptions& options = {});

// Parses an image known only by its address, as cuModuleLoadData, cuModuleLoadFatBinary,
// cuLibraryLoadData and __cudaRegisterFatBinary receive it: the extent comes from the image's
// own headers (fat binary size, ELF section table, NUL terminator for PTX; capped by
// options.max_image_bytes) and nothing past it is read. Also accepts cudart's registration
// wrapper {int magic = 0x466243b1; int version; const void* data; void* filename_or_fatbins}.
// The first 4 bytes (or a shorter NUL-terminated string) must be readable: they say what
// follows, and so how much more may be read.
ParseResult parse_image_at(const void* image, int sm_arch, const ParseOptions& options = {});

// The number of bytes the image at `image` occupies, as its headers state it (for a wrapper:
// the wrapper's 24 bytes; follow its data pointer for the fat binary).
Result<uint64_t> probe_image_size(const void* image, const ParseOptions& options = {});

// Reads a whole image file (cuModuleLoad, cuLibraryLoadFromFile), at most options.max_image_bytes.
Result<std::vector<uint8_t>> read_image_file(const std::string& path, const ParseOptions& options = {});

// Reads and parses an image file.
ParseResult parse_image_file(const std::string& path, int sm_arch, const ParseOptions& options = {});

}  // namespace vgpu::module
