#include "module/fatbin.h"

#include "module/byte_view.h"
#include "module/lz4_block.h"
#include "module/zstd.h"

namespace vgpu::module {
namespace {

constexpr uint64_t kEntryHeaderMin = 0x40;

bool ptx_runs_on(const FatbinEntry& e, int sm_arch) {
  if (e.arch_specific()) return static_cast<int>(e.arch) == sm_arch;
  if (e.family_specific()) return static_cast<int>(e.arch / 10) == sm_arch / 10 && static_cast<int>(e.arch) <= sm_arch;
  return static_cast<int>(e.arch) <= sm_arch;
}

}  // namespace

std::string FatbinEntry::describe() const {
  const char* suffix = arch_specific() ? "a" : (family_specific() ? "f" : "");
  if (is_ptx()) return fmt::format("compute_{}{} PTX", arch, suffix);
  if (is_elf()) return fmt::format("sm_{}{} ELF", arch, suffix);
  return fmt::format("kind {} for arch {}", kind, arch);
}

uint64_t fatbin_total_size(std::span<const uint8_t> bytes) {
  const ByteView in(bytes);
  if (in.u32(0, "fat binary header") != kFatbinMagic) fail("fat binary: bad magic");
  const uint16_t header_size = in.u16(6, "fat binary header");
  if (header_size < kFatbinHeaderSize) fail("fat binary: header size {} too small", header_size);
  return checked_add(header_size, in.u64(8, "fat binary header"), "fat binary size");
}

std::vector<FatbinEntry> parse_fatbin(std::span<const uint8_t> bytes) {
  const ByteView in(bytes);
  const uint16_t version = in.u16(4, "fat binary header");
  if (version != 1) fail_kind(ErrorKind::unsupported, "fat binary: version {} (expected 1)", version);
  const uint64_t header_size = in.u16(6, "fat binary header");
  const uint64_t total = fatbin_total_size(bytes);
  if (total > in.size()) fail("fat binary: header declares {} bytes, only {} available", total, in.size());

  std::vector<FatbinEntry> entries;
  uint64_t pos = header_size;
  while (pos < total) {
    const ByteView rest = in.sub(pos, total - pos, "fat binary entry");
    const ByteView head = rest.sub(0, kEntryHeaderMin, "fat binary entry header");
    FatbinEntry e;
    e.kind = head.u16(0x00, "entry kind");
    const uint32_t entry_header = head.u32(0x04, "entry header size");
    const uint64_t stored_size = head.u64(0x08, "entry payload size");
    const uint32_t compressed_size = head.u32(0x10, "entry compressed size");
    e.arch = head.u32(0x1c, "entry arch");
    e.flags = head.u64(0x28, "entry flags");
    e.decompressed_size = head.u64(0x38, "entry decompressed size");
    if (entry_header < kEntryHeaderMin)
      fail("fat binary: entry at offset {} has a {}-byte header", pos, entry_header);
    const ByteView payload = rest.sub(entry_header, stored_size, "fat binary entry payload");
    if (e.lz4() && e.zstd()) fail("fat binary: entry at offset {} claims two compressions", pos);
    if (e.lz4() || e.zstd()) {
      if (compressed_size == 0 || compressed_size > stored_size)
        fail("fat binary: entry at offset {} has compressed size {} in a {}-byte payload", pos, compressed_size,
             stored_size);
      e.stored = payload.span().first(compressed_size);
    } else {
      e.stored = payload.span();
    }
    entries.push_back(e);
    pos = checked_add(checked_add(pos, entry_header, "fat binary entry"), stored_size, "fat binary entry");
  }
  return entries;
}

bool sass_runs_on(uint32_t code_arch, bool arch_specific, int sm_arch) {
  if (static_cast<int>(code_arch) == sm_arch) return true;
  return !arch_specific && static_cast<int>(code_arch / 10) == sm_arch / 10 && static_cast<int>(code_arch) < sm_arch;
}

const FatbinEntry& select_fatbin_entry(const std::vector<FatbinEntry>& entries, int sm_arch) {
  const FatbinEntry* sass = nullptr;
  const FatbinEntry* ptx = nullptr;
  for (const FatbinEntry& e : entries) {
    if (e.is_elf() && (sm_arch <= 0 || sass_runs_on(e.arch, e.arch_specific(), sm_arch))) {
      if (static_cast<int>(e.arch) == sm_arch) return e;  // exact match wins outright
      if (sass == nullptr || e.arch > sass->arch) sass = &e;
    } else if (e.is_ptx() && (sm_arch <= 0 || ptx_runs_on(e, sm_arch))) {
      if (ptx == nullptr || e.arch > ptx->arch) ptx = &e;
    }
  }
  if (sass != nullptr) return *sass;
  if (ptx != nullptr) return *ptx;
  std::string have;
  for (const FatbinEntry& e : entries) have += (have.empty() ? "" : ", ") + e.describe();
  fail_kind(ErrorKind::no_binary_for_gpu, "fat binary has no code for sm_{} (it holds: {})", sm_arch,
            have.empty() ? "nothing" : have);
}

ByteBuffer fatbin_payload(const FatbinEntry& entry, uint64_t max_bytes) {
  if (!entry.lz4() && !entry.zstd()) {
    ByteBuffer copy;
    copy.append(entry.stored.data(), entry.stored.size());
    return copy;
  }
  if (entry.decompressed_size > max_bytes)
    fail("fat binary: {} decompresses to {} bytes, more than the {} allowed", entry.describe(),
         entry.decompressed_size, max_bytes);
  ByteBuffer out = entry.lz4() ? lz4_decompress_block(entry.stored, entry.decompressed_size)
                                         : zstd_decompress(entry.stored, entry.decompressed_size);
  if (out.size() != entry.decompressed_size)
    fail("fat binary: {} decompressed to {} bytes, header says {}", entry.describe(), out.size(),
         entry.decompressed_size);
  return out;
}

}  // namespace vgpu::module
