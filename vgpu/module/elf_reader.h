// A bounds-checked reader of the ELF64 little-endian files nvcc produces for device code
// (cubins, e_machine EM_CUDA = 190): section headers, section data, the symbol table.
#pragma once

#include "module/byte_view.h"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace vgpu::module {

constexpr uint16_t kEmCuda = 190;
constexpr uint32_t kShtNobits = 8, kShtSymtab = 2, kShtCudaInfo = 0x70000000;
constexpr uint8_t kSttObject = 1, kSttFunc = 2;
constexpr uint8_t kStoCudaManaged = 0x04, kStoCudaEntry = 0x10;

struct ElfSection {
  std::string_view name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint32_t info = 0;
  uint64_t entsize = 0;
};

struct ElfSymbol {
  std::string_view name;
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t type = 0;   // STT_*
  uint8_t bind = 0;   // STB_*
  uint8_t other = 0;  // visibility and CUDA flags (STO_CUDA_*)
  uint32_t section = 0;  // st_shndx; 0 = undefined
  uint32_t index = 0;    // position in the symbol table
};

class ElfFile {
 public:
  // Validates the header and the section table; throws ImageError.
  explicit ElfFile(std::span<const uint8_t> bytes);

  // Bytes from the start to the end of the furthest table or section the headers describe.
  static uint64_t extent(std::span<const uint8_t> bytes);

  uint16_t type() const { return type_; }
  uint32_t flags() const { return flags_; }
  uint8_t abi_version() const { return abi_version_; }
  uint8_t os_abi() const { return os_abi_; }
  const std::vector<ElfSection>& sections() const { return sections_; }
  const std::vector<ElfSymbol>& symbols() const { return symbols_; }

  // The section's contents (empty for SHT_NOBITS); in bounds by construction.
  ByteView data(const ElfSection& s) const;
  const ElfSection* section(uint32_t index) const {
    return index < sections_.size() ? &sections_[index] : nullptr;
  }
  const ElfSection* find_section(std::string_view name) const;

 private:
  void read_symbols(const ElfSection& symtab, uint32_t symtab_index);

  ByteView in_;
  uint16_t type_ = 0;
  uint32_t flags_ = 0;
  uint8_t abi_version_ = 0;
  uint8_t os_abi_ = 0;
  std::vector<ElfSection> sections_;
  std::vector<ElfSymbol> symbols_;
};

}  // namespace vgpu::module
