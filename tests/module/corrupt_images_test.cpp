// Truncated, bit-flipped and size-inflated versions of every image nvcc built: parsing must
// return an error or a module, never crash, never read outside the bytes (each variant lives in
// a heap block of exactly its size, so ASan in CI sees any overread), never allocate wildly.
#include "module/elf_reader.h"
#include "module/fatbin.h"
#include "module/image.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>

namespace {

using namespace vgpu::module;
using module_test::built_image;

struct Image {
  const char* file;
  int sm;  // the architecture the image is parsed for
};

const Image kImages[] = {
    {"kernels_sm90.cubin", 90},          {"kernels_sm80.cubin", 80},          {"kernels_sm100.cubin", 100},
    {"kernels.ptx", 90},                 {"kernels_default.fatbin", 90},      {"kernels_compress_all.fatbin", 90},
    {"kernels_no_compress.fatbin", 90},  {"kernels_mode_size.fatbin", 90},    {"kernels_mode_speed.fatbin", 90},
    {"kernels_multi.fatbin", 100},       {"kernels_ptx_only.fatbin", 90},
};

bool is_text(const std::vector<uint8_t>& b) { return !b.empty() && b[0] != 0x7f && b[0] != 0x50; }

struct Outcomes {
  int ok = 0, refused = 0;
};

// Parses a copy in a block of exactly its size, through both entry points (the pointer one
// capped at the block size, so that its probe may not look further).
void parse_variant(const std::vector<uint8_t>& bytes, int sm, Outcomes& out, bool expect_error) {
  auto block = std::make_unique<uint8_t[]>(bytes.size() + (bytes.empty() ? 1 : 0));
  if (!bytes.empty()) std::memcpy(block.get(), bytes.data(), bytes.size());
  const ParseResult r = parse_image(std::span<const uint8_t>(block.get(), bytes.size()), sm);
  if (r.ok()) {
    ++out.ok;
    EXPECT_FALSE(expect_error) << "a damaged image of " << bytes.size() << " bytes parsed";
  } else {
    ++out.refused;
    EXPECT_FALSE(r.message().empty());
  }
  const uint32_t wrapper = 0x466243b1;
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), &wrapper, 4) == 0) return;  // would follow a pointer
  // The pointer entry point reads a 4-byte signature before any size is known (as the driver
  // must): a shorter block is not an image anyone can hand it.
  if (bytes.size() < 4) return;
  ParseOptions capped;
  capped.max_image_bytes = bytes.size();
  const ParseResult at = parse_image_at(block.get(), sm, capped);
  if (!at.ok()) {
    EXPECT_FALSE(at.message().empty());
  }
}

// A seeded byte-flip generator: the same variants on every run.
class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}
  std::vector<uint8_t> mutate(const std::vector<uint8_t>& original, size_t from, size_t to) {
    std::vector<uint8_t> v = original;
    const int flips = 1 + static_cast<int>(rng_() % 4);
    for (int i = 0; i < flips; ++i) {
      const size_t at = from + rng_() % (to - from);
      switch (rng_() % 3) {
        case 0: v[at] ^= static_cast<uint8_t>(1u << (rng_() % 8)); break;
        case 1: v[at] = static_cast<uint8_t>(rng_()); break;
        default: v[at] = (rng_() % 2) ? 0xff : 0x00; break;
      }
    }
    return v;
  }

 private:
  std::mt19937 rng_;
};

class Corrupt : public ::testing::TestWithParam<Image> {
 protected:
  void SetUp() override {
    image_ = built_image(GetParam().file);
    sm_ = GetParam().sm;
    ASSERT_FALSE(image_.empty());
    ASSERT_TRUE(parse_image(image_, sm_).ok());
  }
  std::vector<uint8_t> image_;
  int sm_ = 90;
};

TEST_P(Corrupt, EveryTruncationIsRefused) {
  Outcomes out;
  std::vector<size_t> lengths;
  for (size_t n = 0; n < std::min<size_t>(image_.size(), 200); ++n) lengths.push_back(n);
  for (size_t i = 1; i <= 200; ++i) lengths.push_back(image_.size() * i / 201);
  for (size_t n = image_.size() > 64 ? image_.size() - 64 : 0; n < image_.size(); ++n) lengths.push_back(n);
  for (size_t n : lengths) {
    const std::vector<uint8_t> cut(image_.begin(), image_.begin() + static_cast<ptrdiff_t>(n));
    // Binary images promise their size in headers; PTX cut at a declaration boundary is still PTX.
    parse_variant(cut, sm_, out, !is_text(image_));
  }
  EXPECT_GT(out.refused, 0);
  std::printf("[ %s ] %zu truncations: %d refused, %d parsed\n", GetParam().file, lengths.size(), out.refused, out.ok);
}

TEST_P(Corrupt, RandomByteFlipsNeverCrash) {
  Mutator m(0x5eed0000u + static_cast<uint32_t>(image_.size()));
  Outcomes out;
  const int kVariants = 1000;
  for (int i = 0; i < kVariants; ++i) parse_variant(m.mutate(image_, 0, image_.size()), sm_, out, false);
  // Half again aimed at the headers, where sizes and offsets live.
  for (int i = 0; i < kVariants / 2; ++i) parse_variant(m.mutate(image_, 0, std::min<size_t>(image_.size(), 256)), sm_, out, false);
  EXPECT_EQ(out.ok + out.refused, kVariants + kVariants / 2);
  std::printf("[ %s ] %d flipped variants: %d refused, %d parsed\n", GetParam().file, kVariants + kVariants / 2,
              out.refused, out.ok);
}

INSTANTIATE_TEST_SUITE_P(Images, Corrupt, ::testing::ValuesIn(kImages), [](const auto& info) {
  std::string n = info.param.file;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// Flips aimed at each compressed payload, so the decompressors meet corrupt streams rather than
// only corrupt headers.
TEST(CorruptPayloads, CompressedStreams) {
  for (const char* name : {"kernels_default.fatbin", "kernels_compress_all.fatbin", "kernels_mode_size.fatbin",
                           "kernels_mode_speed.fatbin"}) {
    const std::vector<uint8_t> image = built_image(name);
    const std::vector<FatbinEntry> entries = parse_fatbin(image);
    Mutator m(1234);
    Outcomes out;
    for (const FatbinEntry& e : entries) {
      if (!e.zstd() && !e.lz4()) continue;
      const size_t from = static_cast<size_t>(e.stored.data() - image.data());
      for (int i = 0; i < 600; ++i) {
        // Parse for the entry's own target: sm_90 picks the ELF, sm_100 the PTX.
        parse_variant(m.mutate(image, from, from + e.stored.size()), e.is_elf() ? 90 : 100, out, false);
      }
    }
    EXPECT_GT(out.refused, 0) << name;
    std::printf("[ %s ] payload flips: %d refused, %d parsed\n", name, out.refused, out.ok);
  }
}

void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

const uint64_t kHuge[] = {0xffffffffffffffffull, 0x8000000000000000ull, 0x7fffffffffffffffull, 0xffffffffull,
                          0x7fffffffull,         1ull << 40,            1ull << 31,            0xfff0};

// Every size and count field of a fat binary and its entries set to huge values.
TEST(CorruptSizes, FatbinFields) {
  for (const char* name : {"kernels_default.fatbin", "kernels_compress_all.fatbin", "kernels_mode_speed.fatbin",
                           "kernels_multi.fatbin"}) {
    const std::vector<uint8_t> image = built_image(name);
    const std::vector<FatbinEntry> entries = parse_fatbin(image);
    Outcomes out;
    for (uint64_t huge : kHuge) {
      std::vector<uint8_t> v = image;
      put_u64(v, 8, huge);  // container size
      parse_variant(v, 90, out, huge > image.size());
      v = image;
      put_u16(v, 6, static_cast<uint16_t>(huge));  // container header size
      parse_variant(v, 90, out, false);
      size_t entry = 16;
      for (const FatbinEntry& e : entries) {
        const size_t payload = static_cast<size_t>(e.stored.data() - image.data());
        for (size_t field : {size_t{4}, size_t{8}, size_t{0x10}, size_t{0x38}}) {
          v = image;
          if (field == 8 || field == 0x38) put_u64(v, entry + field, huge);
          else put_u32(v, entry + field, static_cast<uint32_t>(huge));
          parse_variant(v, e.is_elf() ? 90 : 100, out, false);
        }
        uint64_t stored = 0;
        std::memcpy(&stored, image.data() + entry + 8, 8);
        entry = payload + static_cast<size_t>(stored);
      }
    }
    EXPECT_GT(out.refused, 0);
  }
}

// The same for a cubin's ELF header, section headers, symbol table and .nv.info records.
TEST(CorruptSizes, CubinFields) {
  const std::vector<uint8_t> image = built_image("kernels_sm90.cubin");
  const ElfFile elf(image);
  uint64_t shoff;
  std::memcpy(&shoff, image.data() + 40, 8);
  Outcomes out;
  for (uint64_t huge : kHuge) {
    for (size_t field : {size_t{32}, size_t{40}}) {  // e_phoff, e_shoff
      std::vector<uint8_t> v = image;
      put_u64(v, field, huge);
      parse_variant(v, 90, out, field == 40);
    }
    for (size_t field : {size_t{58}, size_t{60}, size_t{62}}) {  // e_shentsize, e_shnum, e_shstrndx
      std::vector<uint8_t> v = image;
      put_u16(v, field, static_cast<uint16_t>(huge));
      parse_variant(v, 90, out, false);
    }
    for (size_t s = 0; s < elf.sections().size(); ++s) {
      const size_t at = static_cast<size_t>(shoff + s * 64);
      for (size_t field : {size_t{24}, size_t{32}, size_t{56}}) {  // sh_offset, sh_size, sh_entsize
        std::vector<uint8_t> v = image;
        put_u64(v, at + field, huge);
        parse_variant(v, 90, out, false);
      }
      for (size_t field : {size_t{0}, size_t{40}, size_t{44}}) {  // sh_name, sh_link, sh_info
        std::vector<uint8_t> v = image;
        put_u32(v, at + field, static_cast<uint32_t>(huge));
        parse_variant(v, 90, out, false);
      }
    }
  }
  // Every .nv.info record's size field, and every symbol's fields.
  for (const ElfSection& s : elf.sections()) {
    if (s.name.substr(0, 8) == ".nv.info") {
      for (uint64_t pos = 0; pos + 4 <= s.size; pos += 4) {
        std::vector<uint8_t> v = image;
        put_u16(v, static_cast<size_t>(s.offset + pos + 2), 0xfffc);
        parse_variant(v, 90, out, false);
      }
    }
    if (s.type == kShtSymtab) {
      for (uint64_t pos = 0; pos + 24 <= s.size; pos += 24) {
        for (size_t field : {size_t{0}, size_t{6}, size_t{8}, size_t{16}}) {
          std::vector<uint8_t> v = image;
          if (field == 0) put_u32(v, static_cast<size_t>(s.offset + pos), 0xfffffff0u);
          else if (field == 6) put_u16(v, static_cast<size_t>(s.offset + pos + 6), 0xfeff);
          else put_u64(v, static_cast<size_t>(s.offset + pos + field), 0xfffffffffffffff0ull);
          parse_variant(v, 90, out, false);
        }
      }
    }
  }
  EXPECT_GT(out.refused, 0);
  std::printf("[ cubin fields ] %d refused, %d parsed\n", out.refused, out.ok);
}

}  // namespace
