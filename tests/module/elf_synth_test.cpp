// Cubins built by hand, for what nvcc 13 does not produce but other toolkits or damage do: the
// older e_flags layout, register counts packed in sh_info, kernels without STO_CUDA_ENTRY,
// extended section numbering, and inconsistent parameter records.
#include "module/image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

using namespace vgpu::module;

constexpr uint32_t kProgbits = 1, kNobits = 8, kCudaInfo = 0x70000000;

template <class T>
void put(std::vector<uint8_t>& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}
template <class T>
void put_at(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// EIATTR records.
std::vector<uint8_t> sval(uint8_t attr, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> r = {4, attr};
  put<uint16_t>(r, static_cast<uint16_t>(payload.size()));
  r.insert(r.end(), payload.begin(), payload.end());
  while (r.size() % 4) r.push_back(0);
  return r;
}
std::vector<uint8_t> hval(uint8_t attr, uint16_t v) {
  std::vector<uint8_t> r = {3, attr};
  put<uint16_t>(r, v);
  return r;
}
std::vector<uint8_t> kparam(uint16_t ordinal, uint16_t offset, uint32_t size) {
  std::vector<uint8_t> p;
  put<uint32_t>(p, 0);
  put<uint16_t>(p, ordinal);
  put<uint16_t>(p, offset);
  put<uint32_t>(p, (size << 18) | 0x1f000);
  return sval(0x17, p);
}
std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class ElfBuilder {
 public:
  struct Section {
    std::string name;
    uint32_t type;
    std::vector<uint8_t> data;
    uint64_t nobits_size = 0;
    uint32_t info = 0;
  };
  struct Symbol {
    std::string name;
    uint8_t info, other;
    uint16_t section;
    uint64_t value, size;
  };

  uint16_t section(Section s) {
    sections_.push_back(std::move(s));
    return static_cast<uint16_t>(sections_.size());  // index 0 is the null section
  }
  uint32_t symbol(Symbol s) {
    symbols_.push_back(std::move(s));
    return static_cast<uint32_t>(symbols_.size());  // index 0 is the null symbol
  }

  uint32_t e_flags = 0x500550;  // ABI 7 layout: SM in bits 0..7 (sm_80)
  uint8_t os_abi = 0x33, abi_version = 7;
  bool extended_numbering = false;

  std::vector<uint8_t> build() const {
    std::vector<Section> all = sections_;
    std::vector<uint8_t> strtab = {0}, symtab(24, 0);
    for (const Symbol& s : symbols_) {
      put<uint32_t>(symtab, static_cast<uint32_t>(strtab.size()));
      strtab.insert(strtab.end(), s.name.begin(), s.name.end());
      strtab.push_back(0);
      symtab.push_back(s.info);
      symtab.push_back(s.other);
      put<uint16_t>(symtab, s.section);
      put<uint64_t>(symtab, s.value);
      put<uint64_t>(symtab, s.size);
    }
    all.push_back({".strtab", 3, strtab});
    const uint32_t strtab_index = static_cast<uint32_t>(all.size());
    all.push_back({".symtab", 2, symtab});
    all.push_back({".shstrtab", 3, {}});
    const uint32_t shstrtab_index = static_cast<uint32_t>(all.size());
    std::vector<uint8_t> names = {0};
    std::vector<uint32_t> name_at;
    for (const Section& s : all) {
      name_at.push_back(static_cast<uint32_t>(names.size()));
      names.insert(names.end(), s.name.begin(), s.name.end());
      names.push_back(0);
    }
    all.back().data = names;

    std::vector<uint8_t> out(64, 0);
    std::vector<uint64_t> offsets;
    for (const Section& s : all) {
      while (out.size() % 8) out.push_back(0);
      offsets.push_back(out.size());
      if (s.type != kNobits) out.insert(out.end(), s.data.begin(), s.data.end());
    }
    while (out.size() % 8) out.push_back(0);
    const uint64_t shoff = out.size();
    const uint64_t count = all.size() + 1;
    std::vector<uint8_t> null_section(64, 0);
    if (extended_numbering) {
      put_at<uint64_t>(null_section, 32, count);
      put_at<uint32_t>(null_section, 40, shstrtab_index);
    }
    out.insert(out.end(), null_section.begin(), null_section.end());
    for (size_t i = 0; i < all.size(); ++i) {
      const Section& s = all[i];
      std::vector<uint8_t> h;
      put<uint32_t>(h, name_at[i]);
      put<uint32_t>(h, s.type);
      put<uint64_t>(h, 0);  // flags
      put<uint64_t>(h, 0);  // addr
      put<uint64_t>(h, offsets[i]);
      put<uint64_t>(h, s.type == kNobits ? s.nobits_size : s.data.size());
      put<uint32_t>(h, s.name == ".symtab" ? strtab_index : 0);
      put<uint32_t>(h, s.info);
      put<uint64_t>(h, 8);
      put<uint64_t>(h, s.name == ".symtab" ? 24 : 0);
      out.insert(out.end(), h.begin(), h.end());
    }
    const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, os_abi, abi_version};
    std::memcpy(out.data(), ident, 16);
    put_at<uint16_t>(out, 16, 2);    // ET_EXEC
    put_at<uint16_t>(out, 18, 190);  // EM_CUDA
    put_at<uint32_t>(out, 20, 1);
    put_at<uint64_t>(out, 40, shoff);
    put_at<uint32_t>(out, 48, e_flags);
    put_at<uint16_t>(out, 52, 64);
    put_at<uint16_t>(out, 58, 64);
    put_at<uint16_t>(out, 60, extended_numbering ? 0 : static_cast<uint16_t>(count));
    put_at<uint16_t>(out, 62, extended_numbering ? 0xffff : static_cast<uint16_t>(shstrtab_index));
    return out;
  }

 private:
  std::vector<Section> sections_;
  std::vector<Symbol> symbols_;
};

constexpr uint8_t kFuncGlobal = 0x12, kObjectLocal = 0x01;

// One kernel `kern(void*, int)` with 20 registers packed in sh_info, 48 bytes of shared memory,
// and one initialised global, in the older ELF layout.
ElfBuilder old_style_cubin(std::vector<uint8_t> kernel_info, uint8_t entry_flag = 0x10, uint64_t global_value = 4) {
  ElfBuilder b;
  const uint16_t text = b.section({".text.kern", kProgbits, std::vector<uint8_t>(128, 0)});
  b.section({".nv.info.kern", kCudaInfo, std::move(kernel_info), 0, text});
  b.section({".nv.shared.kern", kNobits, {}, 48});
  const uint16_t init = b.section({".nv.global.init", kProgbits, {0, 1, 2, 3, 4, 5, 6, 7}});
  b.section({".text.devfn", kProgbits, std::vector<uint8_t>(64, 0)});
  const uint32_t kern = b.symbol({"kern", kFuncGlobal, entry_flag, text, 0, 128});
  b.symbol({"devfn", kFuncGlobal, 0, static_cast<uint16_t>(text + 4), 0, 64});
  b.symbol({"gvar", kObjectLocal, 0, init, global_value, 4});
  b.symbol({"gmanaged", kObjectLocal, 0x04, init, 0, 4});
  (void)kern;
  return b;
}

std::vector<uint8_t> good_info() {
  return cat({kparam(1, 8, 4), kparam(0, 0, 8), hval(0x19, 12), hval(0x1b, 0xff)});
}

void set_packed_registers(std::vector<uint8_t>& elf, uint32_t regs) {
  // .text.kern is section 1: its sh_info (at +44 in its header) gets regs << 24 | symbol 1.
  uint64_t shoff;
  std::memcpy(&shoff, elf.data() + 40, 8);
  put_at<uint32_t>(elf, static_cast<size_t>(shoff + 64 + 44), (regs << 24) | 1);
}

TEST(ElfSynth, OlderLayoutWithPackedRegisters) {
  std::vector<uint8_t> elf = old_style_cubin(good_info()).build();
  set_packed_registers(elf, 20);
  const ParseResult r = parse_image(elf, 86);
  ASSERT_TRUE(r.ok()) << r.message();
  const ModuleImage& m = r.value();
  EXPECT_EQ(m.sm_arch, 80);
  ASSERT_EQ(m.kernels.size(), 1u);
  const KernelInfo& k = m.kernels[0];
  EXPECT_EQ(k.name, "kern");
  EXPECT_EQ(k.registers, 20);
  ASSERT_EQ(k.params.size(), 2u);
  EXPECT_EQ(k.params[0].offset, 0u);
  EXPECT_EQ(k.params[0].size, 8u);
  EXPECT_EQ(k.params[1].offset, 8u);
  EXPECT_EQ(k.params[1].size, 4u);
  EXPECT_EQ(k.param_bytes, 12u);
  EXPECT_EQ(k.shared_bytes, 48u);
  EXPECT_EQ(k.max_registers, -1);
  ASSERT_NE(m.find_global("gvar"), nullptr);
  EXPECT_EQ(m.find_global("gvar")->init, (std::vector<uint8_t>{4, 5, 6, 7}));
  EXPECT_FALSE(m.find_global("gvar")->managed);
  EXPECT_TRUE(m.find_global("gmanaged")->managed);
  EXPECT_EQ(parse_image(elf, 90).error().kind, ErrorKind::no_binary_for_gpu);
}

TEST(ElfSynth, KernelsWithoutEntryFlagAreFoundByTheirInfoSection) {
  const ParseResult r = parse_image(old_style_cubin(good_info(), 0).build(), 80);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r.value().kernels.size(), 1u);  // devfn has no info section: not a kernel
  EXPECT_EQ(r.value().kernels[0].name, "kern");
}

TEST(ElfSynth, ExtendedSectionNumbering) {
  ElfBuilder b = old_style_cubin(good_info());
  b.extended_numbering = true;
  const std::vector<uint8_t> elf = b.build();
  const ParseResult r = parse_image(elf, 80);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r.value().kernels.size(), 1u);
  const Result<uint64_t> size = probe_image_size(elf.data());
  ASSERT_TRUE(size.ok()) << size.message();
  EXPECT_EQ(size.value(), elf.size());
}

TEST(ElfSynth, ReservedSharedMemory) {
  // A cap of 0 (cuBLASLt 13's sm_90 cutlass_75 kernels: a 1 KiB .nv.shared.<name>, no static
  // shared memory on an H200) is the default 1 KiB.
  for (const bool zero_cap : {false, true}) {
    ElfBuilder b;
    b.e_flags = 0x6005a04;
    b.os_abi = 0x41;
    b.abi_version = 8;
    const uint16_t text = b.section({".text.kern", kProgbits, std::vector<uint8_t>(128, 0)});
    b.section({".nv.info.kern", kCudaInfo, good_info(), 0, text});
    b.section({".nv.shared.kern", kNobits, {}, 0x400u});
    b.symbol({"kern", kFuncGlobal, 0x10, text, 0, 128});
    b.symbol({".nv.reservedSmem.cap", 0x21, 0, 0, zero_cap ? 0u : 0x200u, 4});
    const ParseResult r = parse_image(b.build(), 90);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r.value().kernels[0].shared_bytes, zero_cap ? 0u : 0x200u);
  }
  for (const bool with_cap : {true, false}) {
    ElfBuilder b;
    b.e_flags = 0x6005a04;  // ABI 8 layout: SM in bits 8..15 (sm_90)
    b.os_abi = 0x41;
    b.abi_version = 8;
    const uint16_t text = b.section({".text.kern", kProgbits, std::vector<uint8_t>(128, 0)});
    b.section({".nv.info.kern", kCudaInfo, good_info(), 0, text});
    b.section({".nv.shared.kern", kNobits, {}, with_cap ? 0x600u : 0x500u});
    b.symbol({"kern", kFuncGlobal, 0x10, text, 0, 128});
    b.symbol({".nv.reservedSmem.offset0", 0x21, 0, 0, 0, 4});
    if (with_cap) b.symbol({".nv.reservedSmem.cap", 0x21, 0, 0, 0x200, 4});
    const ParseResult r = parse_image(b.build(), 90);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r.value().sm_arch, 90);
    EXPECT_EQ(r.value().kernels[0].shared_bytes, with_cap ? 0x400u : 0x100u);
  }
}

TEST(ElfSynth, InconsistentRecordsAreRefused) {
  const std::vector<std::vector<uint8_t>> bad = {
      cat({kparam(0, 0, 8), kparam(2, 8, 4), hval(0x19, 12)}),  // ordinal 1 missing
      cat({kparam(0, 0, 8), kparam(0, 8, 4), hval(0x19, 12)}),  // ordinal 0 twice
      cat({kparam(0, 0, 8), kparam(1, 8, 8), hval(0x19, 12)}),  // past the parameter block
      cat({kparam(0, 0, 8), {9, 0x19, 0, 0}}),                  // unknown record format
      cat({kparam(0, 0, 8), {4, 0x17, 0xf0, 0x00}}),            // payload past the section
      cat({sval(0x17, {1, 2, 3})}),                             // KPARAM_INFO too short
  };
  for (const auto& info : bad) {
    const ParseResult r = parse_image(old_style_cubin(info).build(), 80);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, ErrorKind::invalid_image) << r.message();
  }
  EXPECT_FALSE(parse_image(old_style_cubin(good_info(), 0x10, 6).build(), 80).ok());  // global past its section
}

TEST(ElfSynth, HeaderProblems) {
  const std::vector<uint8_t> good = old_style_cubin(good_info()).build();
  std::vector<uint8_t> v = good;
  v[4] = 1;  // ELFCLASS32
  EXPECT_EQ(parse_image(v, 80).error().kind, ErrorKind::unsupported);
  v = good;
  put_at<uint16_t>(v, 18, 62);  // x86-64
  EXPECT_EQ(parse_image(v, 80).error().kind, ErrorKind::invalid_image);
  v = good;
  put_at<uint16_t>(v, 58, 32);  // section headers too small
  EXPECT_FALSE(parse_image(v, 80).ok());
  v = good;
  put_at<uint64_t>(v, 40, 0);  // no section table
  EXPECT_FALSE(parse_image(v, 80).ok());
  v = good;
  put_at<uint16_t>(v, 62, 200);  // name table index out of range
  EXPECT_FALSE(parse_image(v, 80).ok());
}

}  // namespace
