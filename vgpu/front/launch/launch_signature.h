// The launch signature: what identifies "the same kernel launch" for timing purposes, so that a
// duration measured once (on a real GPU, by the passthrough backend) can be reused for every
// later launch with the same signature, and replayed by the sim backend.
//
// A signature is made of the function's name, the grid and block dimensions, the dynamic shared
// memory, and the parameter bytes that are the kernel's input. Left out:
//   - pointers. Pointer values change from run to run (and between two allocations of the same
//     buffer) without changing the work a kernel does. A value counts as a pointer when it lies
//     inside a known device allocation or in the process's own host memory (the caller's
//     `is_pointer` decides; both backends ask `is_device(v) || HostAddressSpace::contains(v)`,
//     front/launch/host_address_space.h; values below 64 KiB, which Linux never maps, are not asked). An 8-byte parameter that is one is recorded as 'p'; inside a
//     larger parameter (a struct by value) every 8-byte-aligned word that is one is zeroed.
//     Host addresses matter for the second case: a struct the host filled only in part (PyTorch's
//     OffsetCalculator beyond its dims) carries stack garbage, mostly frame, return and heap
//     addresses, which made every launch a new signature.
//   - the entries of PyTorch's multi-tensor-apply struct (the `_foreach_*` ops, foreach and
//     fused optimizers) past the tensors and blocks the launch uses, which the host leaves stale
//     or as stack garbage and the kernel never reads (tensor_list_metadata.h). Zeroed under the
//     same magic: an exact row recorded before for such a launch held garbage that never
//     repeated, so no row that could match changes.
//   - the bytes between parameters (alignment padding): only each parameter's own bytes, at the
//     offset and size of the cubin's EIATTR_KPARAM_INFO (the sim's parser, or the real driver's
//     cuFuncGetParamInfo, which reports the same), enter the signature, so a launch packed
//     through `extra` (whose buffer holds whatever the host left in the gaps) and the same launch
//     through kernelParams agree.
// Sizes, strides, scalars and structs passed by value stay in, because they usually decide how
// much work there is.
//
// The encoding is a byte string (exact comparison, usable as a map key and as an SQLite BLOB):
//   "vgpu-sig3\0" name "\0" grid.x grid.y grid.z block.x block.y block.z shared   (u32 LE each)
//   then per parameter, in order: 'p' (a pointer, no bytes) or 'v' u32-LE size, then the bytes.
// Both backends build it with build_launch_signature(), so their keys agree. The magic names the
// masking rules: when they change, so does the magic (sig2: device pointers only), and a
// kernel-time database recorded under older rules never matches (its rows keep their magic).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vgpu {

struct LaunchShape {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t dynamic_shared = 0;

  uint64_t blocks() const { return uint64_t{grid[0]} * grid[1] * grid[2]; }
  uint64_t threads_per_block() const { return uint64_t{block[0]} * block[1] * block[2]; }
  uint64_t threads() const { return blocks() * threads_per_block(); }
};

// Where one parameter sits in the packed parameter block.
struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct LaunchSignature {
  std::string bytes;  // the encoding above

  bool operator==(const LaunchSignature&) const = default;
  std::string hex() const;  // for logs and the database's readable column
};

// `params` is the packed parameter block (as a launch copies it); every slot must lie inside it
// (the caller validated that). `is_pointer(value)` is asked for each 8-byte parameter.
LaunchSignature build_launch_signature(std::string_view function_name, const LaunchShape& shape,
                                       std::span<const ParamSlot> slots,
                                       std::span<const uint8_t> params,
                                       const std::function<bool(uint64_t)>& is_pointer);
// The same into `out`, whose buffer is reused (the passthrough builds one per launch).
void build_launch_signature(std::string_view function_name, const LaunchShape& shape,
                            std::span<const ParamSlot> slots, std::span<const uint8_t> params,
                            const std::function<bool(uint64_t)>& is_pointer, LaunchSignature* out);

// The non-pointer 4-byte and 8-byte integer parameters of a signature, in order: the fallback
// time model reads problem sizes (M, N, K of a GEMM) from them.
std::vector<int64_t> signature_integers(const LaunchSignature& signature);

// The 4-byte words of each non-pointer parameter larger than 8 bytes (a struct passed by value,
// its device pointers zeroed), one vector per parameter: the fallback model looks for the
// problem sizes of library GEMMs (cuBLAS passes them inside one parameter struct) there.
std::vector<std::vector<uint32_t>> signature_struct_words(const LaunchSignature& signature);

// A hash of the work a signature describes as processes of one job all see it: the function, the
// shape, and each by-value parameter's size and 4-byte words, except that a word of 2^24 or more
// counts only as "large" (stack garbage, floats, seeds: words in which the ranks of a job differ
// although they launch the same work, so that their exact signatures never meet), and so do both
// halves of an 8-byte word that reads as a user-space address (0x5500'xxxxxxxx to
// 0x7fff'xxxxxxxx with a low half of 2^24 or more: a stale pointer, whose small high half differs
// between processes). The key under
// which ranks sharing one GPU compare their measurements (shared_durations.h); never 0. Two
// launches whose work differs only in a word of 2^24 or more (a size of 16M elements or more in a
// kernel whose grid does not grow with it) share a key: the known limit of that comparison.
uint64_t signature_work_key(const LaunchSignature& signature);

// The function name and shape a signature was built from; false for bytes that are not one.
bool decode_signature_header(const LaunchSignature& signature, std::string* name, LaunchShape* shape);

// The signature with the byte of every one-byte by-value parameter zeroed: a flag, or an empty
// functor (PyTorch's elementwise kernels take their lambda by value; its one byte is whatever the
// host's stack held, and the passthrough and the sim backend leave different values there, so a
// replay never met the recording's row: 287 launches of GeluBackward a 2-rank DDP job, 2026-11-28).
// Sizes are never one byte. What the sim's lookup tries before its fallback model
// (KernelTimeDb::lookup_flags_aside). nullopt for bytes that are not a signature.
std::optional<LaunchSignature> without_flag_bytes(const LaunchSignature& signature);

}  // namespace vgpu
