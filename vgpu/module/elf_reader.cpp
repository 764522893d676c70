#include "module/elf_reader.h"

#include <algorithm>

namespace vgpu::module {
namespace {

constexpr uint64_t kEhdrSize = 64, kShdrMin = 64, kSymSize = 24;
constexpr uint32_t kShnXindex = 0xffff, kShnLoreserve = 0xff00;

struct Header {
  uint64_t phoff, shoff;
  uint16_t phentsize, phnum, shentsize, shstrndx;
  uint64_t shnum;
};

// Reads the ELF header and the true section count (extended numbering keeps it in section 0).
Header read_header(const ByteView& in) {
  const ByteView eh = in.sub(0, kEhdrSize, "ELF header");
  if (eh.u32(0, "ELF magic") != 0x464c457f) fail("ELF: bad magic");
  if (eh.u8(4, "ELF class") != 2) fail_kind(ErrorKind::unsupported, "ELF: only 64-bit cubins are supported");
  if (eh.u8(5, "ELF data") != 1) fail("ELF: not little-endian");
  if (eh.u16(18, "ELF machine") != kEmCuda) fail("ELF: machine {} is not EM_CUDA (190)", eh.u16(18, "ELF machine"));
  Header h{};
  h.phoff = eh.u64(32, "ELF header");
  h.shoff = eh.u64(40, "ELF header");
  h.phentsize = eh.u16(54, "ELF header");
  h.phnum = eh.u16(56, "ELF header");
  h.shentsize = eh.u16(58, "ELF header");
  h.shnum = eh.u16(60, "ELF header");
  h.shstrndx = eh.u16(62, "ELF header");
  if (h.shoff == 0) fail("ELF: no section table");
  if (h.shentsize < kShdrMin) fail("ELF: section header size {} too small", h.shentsize);
  if (h.shnum == 0) h.shnum = in.u64(checked_add(h.shoff, 32, "ELF section 0"), "ELF section count");
  return h;
}

}  // namespace

uint64_t ElfFile::extent(std::span<const uint8_t> bytes) {
  const ByteView in(bytes);
  const Header h = read_header(in);
  const uint64_t table = checked_mul(h.shnum, h.shentsize, "ELF section table");
  uint64_t end = checked_add(h.shoff, table, "ELF section table");
  if (h.phoff != 0) end = std::max(end, checked_add(h.phoff, checked_mul(h.phnum, h.phentsize, "ELF programs"), "ELF programs"));
  const ByteView shdrs = in.sub(h.shoff, table, "ELF section table");
  for (uint64_t i = 0; i < h.shnum; ++i) {
    const uint64_t at = i * h.shentsize;
    if (shdrs.u32(at + 4, "ELF section type") == kShtNobits) continue;
    end = std::max(end, checked_add(shdrs.u64(at + 24, "ELF section offset"), shdrs.u64(at + 32, "ELF section size"),
                                    "ELF section"));
  }
  return end;
}

ElfFile::ElfFile(std::span<const uint8_t> bytes) : in_(bytes) {
  const Header h = read_header(in_);
  type_ = in_.u16(16, "ELF type");
  flags_ = in_.u32(48, "ELF flags");
  os_abi_ = in_.u8(7, "ELF OS ABI");
  abi_version_ = in_.u8(8, "ELF ABI version");
  const ByteView shdrs = in_.sub(h.shoff, checked_mul(h.shnum, h.shentsize, "ELF section table"), "ELF section table");
  // The program headers are not used here, but an image cut short before them is truncated.
  if (h.phoff != 0) in_.sub(h.phoff, checked_mul(h.phnum, h.phentsize, "ELF programs"), "ELF program headers");

  sections_.resize(static_cast<size_t>(h.shnum));
  for (uint64_t i = 0; i < h.shnum; ++i) {
    const uint64_t at = i * h.shentsize;
    ElfSection& s = sections_[static_cast<size_t>(i)];
    s.type = shdrs.u32(at + 4, "ELF section");
    s.flags = shdrs.u64(at + 8, "ELF section");
    s.offset = shdrs.u64(at + 24, "ELF section");
    s.size = shdrs.u64(at + 32, "ELF section");
    s.link = shdrs.u32(at + 40, "ELF section");
    s.info = shdrs.u32(at + 44, "ELF section");
    s.entsize = shdrs.u64(at + 56, "ELF section");
    if (s.type != kShtNobits && !in_.fits(s.offset, s.size))
      fail("ELF: section {} [{}, +{}) lies outside the {}-byte image", i, s.offset, s.size, in_.size());
  }

  uint64_t strndx = h.shstrndx;
  if (strndx == kShnXindex && !sections_.empty()) strndx = sections_[0].link;
  if (strndx != 0) {
    if (strndx >= sections_.size()) fail("ELF: section name table index {} out of range", strndx);
    const ByteView names = data(sections_[static_cast<size_t>(strndx)]);
    for (uint64_t i = 0; i < h.shnum; ++i)
      sections_[static_cast<size_t>(i)].name = names.cstring(shdrs.u32(i * h.shentsize, "ELF section name"), "ELF section name");
  }

  for (size_t i = 0; i < sections_.size(); ++i) {
    if (sections_[i].type == kShtSymtab) {
      read_symbols(sections_[i], static_cast<uint32_t>(i));
      break;
    }
  }
}

void ElfFile::read_symbols(const ElfSection& symtab, uint32_t symtab_index) {
  if (symtab.entsize != kSymSize) fail("ELF: symbol size {} (expected 24)", symtab.entsize);
  if (symtab.link >= sections_.size() || symtab.link == symtab_index) fail("ELF: symbol table has no string table");
  const ByteView names = data(sections_[symtab.link]);
  const ByteView table = data(symtab);
  const uint64_t count = table.size() / kSymSize;
  symbols_.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = i * kSymSize;
    ElfSymbol s;
    s.name = names.cstring(table.u32(at, "ELF symbol"), "ELF symbol name");
    const uint8_t info = table.u8(at + 4, "ELF symbol");
    s.type = info & 0xf;
    s.bind = info >> 4;
    s.other = table.u8(at + 5, "ELF symbol");
    s.section = table.u16(at + 6, "ELF symbol");
    s.value = table.u64(at + 8, "ELF symbol");
    s.size = table.u64(at + 16, "ELF symbol");
    s.index = static_cast<uint32_t>(i);
    // Reserved indices (absolute, common, extended) name no section this parser uses.
    if (s.section >= kShnLoreserve) s.section = 0;
    if (s.section >= sections_.size()) fail("ELF: symbol {} names section {} of {}", i, s.section, sections_.size());
    symbols_.push_back(s);
  }
}

ByteView ElfFile::data(const ElfSection& s) const {
  if (s.type == kShtNobits) return ByteView();
  return in_.sub(s.offset, s.size, "ELF section data");
}

const ElfSection* ElfFile::find_section(std::string_view name) const {
  for (const ElfSection& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace vgpu::module
