// The fat binary container nvcc embeds in host programs and writes with -fatbin:
//
//   header (16 bytes): u32 magic 0xBA55ED50, u16 version 1, u16 header size, u64 bytes after it
//   entries, back to back, each an entry header followed by its payload:
//     0x00 u16 kind (1 PTX, 2 ELF)     0x02 u16 (0x0101)      0x04 u32 entry header size
//     0x08 u64 payload bytes (padded)  0x10 u32 compressed size (when compressed)
//     0x18 u16 minor, 0x1a u16 major (code / PTX ISA version)  0x1c u32 sm arch (90 = sm_90)
//     0x20 u32 name offset, 0x24 u32 name size                 0x28 u64 flags
//     0x38 u64 decompressed size
//   flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x2000 LZ4-compressed payload,
//          0x8000 Zstandard-compressed payload, 0x100000 arch-specific (sm_90a),
//          0x200000 family-specific (sm_100f).
// The layout was read from nvcc 13 output and agrees with public descriptions of the format.
#pragma once

#include "module/image.h"

#include "module/byte_buffer.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vgpu::module {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint32_t kFatbinWrapperMagic = 0x466243B1;
constexpr uint64_t kFatbinHeaderSize = 16;

enum class FatbinKind : uint16_t { ptx = 1, elf = 2 };

struct FatbinEntry {
  uint16_t kind = 0;
  uint32_t arch = 0;
  uint64_t flags = 0;
  std::span<const uint8_t> stored;   // the payload as stored (compressed or not)
  uint64_t decompressed_size = 0;    // when compressed

  bool is_ptx() const { return kind == static_cast<uint16_t>(FatbinKind::ptx); }
  bool is_elf() const { return kind == static_cast<uint16_t>(FatbinKind::elf); }
  bool arch_specific() const { return (flags & 0x100000) != 0; }
  bool family_specific() const { return (flags & 0x200000) != 0; }
  bool lz4() const { return (flags & 0x2000) != 0; }
  bool zstd() const { return (flags & 0x8000) != 0; }
  std::string describe() const;  // e.g. "sm_90 ELF", "compute_100 PTX"
};

// Bytes the container at the start of `bytes` occupies, from its header alone.
uint64_t fatbin_total_size(std::span<const uint8_t> bytes);

// Parses the container at the start of `bytes` (trailing bytes are ignored). Throws ImageError.
std::vector<FatbinEntry> parse_fatbin(std::span<const uint8_t> bytes);

// The entry a device of `sm_arch` would use (see parse_image); throws ImageError with kind
// no_binary_for_gpu if there is none.
const FatbinEntry& select_fatbin_entry(const std::vector<FatbinEntry>& entries, int sm_arch);

// Whether SASS built for `code_arch` runs on a device of `sm_arch`.
bool sass_runs_on(uint32_t code_arch, bool arch_specific, int sm_arch);

// The entry's payload, decompressed if needed (at most max_bytes). Throws ImageError.
ByteBuffer fatbin_payload(const FatbinEntry& entry, uint64_t max_bytes);

}  // namespace vgpu::module
