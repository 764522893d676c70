// A bounded, deterministic mutation fuzzer of the image parser, run in CI (suite 'fuzz', and a
// longer phase of tests/run-all with VGPU_FUZZ_ROUNDS raised). Every variant of every image nvcc
// built is parsed through both entry points:
//   parse_image     over a heap block of exactly its size (ASan sees any overread), and
//   parse_image_at  with the default limits, the image ending right before a PROT_NONE page,
//                   as cuModuleLoadData gets it: only a pointer, so a header that claims bytes
//                   past the real ones must be caught before they are read (it used to segfault).
// Mutations aim at where extents live: the ELF and fat binary headers, the ELF section and
// symbol tables, with boundary values as well as bit flips, truncations and splices.
// VGPU_FUZZ_ROUNDS (per image, default 1500) and VGPU_FUZZ_SEED set the run.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "module/elf_reader.h"
#include "module/image.h"
#include "test_files.h"

namespace {

using namespace vgpu::module;
using module_test::built_image;

const char* const kImages[] = {
    "kernels_sm90.cubin",         "kernels_sm80.cubin",        "kernels_sm100.cubin",
    "kernels.ptx",                "kernels_default.fatbin",    "kernels_compress_all.fatbin",
    "kernels_no_compress.fatbin", "kernels_mode_size.fatbin",  "kernels_mode_speed.fatbin",
    "kernels_multi.fatbin",       "kernels_ptx_only.fatbin",   "cluster_sm90.cubin",
};

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 0) : fallback;
}

// `bytes` placed so that they end exactly where a PROT_NONE page begins.
class GuardedCopy {
 public:
  explicit GuardedCopy(const std::vector<uint8_t>& bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    data_pages_ = (bytes.size() + page - 1) / page + 1;
    size_ = (data_pages_ + 1) * page;
    void* m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    base_ = static_cast<uint8_t*>(m);
    mprotect(base_ + data_pages_ * page, page, PROT_NONE);
    at_ = base_ + data_pages_ * page - bytes.size();
    if (!bytes.empty()) std::memcpy(at_, bytes.data(), bytes.size());
  }
  ~GuardedCopy() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  const uint8_t* data() const { return at_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* at_ = nullptr;
  size_t size_ = 0, data_pages_ = 0;
};

struct Tally {
  uint64_t parsed = 0, refused = 0;
};

void parse_both(const std::vector<uint8_t>& bytes, int sm, Tally* t) {
  std::vector<uint8_t> exact(bytes);  // a block of exactly this size
  exact.shrink_to_fit();
  const ParseResult r = parse_image(std::span<const uint8_t>(exact.data(), exact.size()), sm);
  if (r.ok()) {
    ++t->parsed;
    for (const GlobalInfo& g : r.value().globals) EXPECT_LE(g.init.size(), bytes.size());
  } else {
    ++t->refused;
    EXPECT_FALSE(r.message().empty());
  }
  // Through a pointer: cudart's registration wrapper would be followed to wherever it points.
  const uint32_t wrapper = 0x466243b1;
  if (bytes.size() < 4 || std::memcmp(bytes.data(), &wrapper, 4) == 0) return;
  GuardedCopy guarded(bytes);
  ASSERT_NE(guarded.data(), nullptr);
  const ParseResult at = parse_image_at(guarded.data(), sm);
  if (!at.ok()) {
    EXPECT_FALSE(at.message().empty());
  }
}

void put(std::vector<uint8_t>& b, size_t at, uint64_t v, size_t width) {
  for (size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Where the extents of an image live: offsets worth aiming at.
std::vector<size_t> hot_offsets(const std::vector<uint8_t>& image) {
  std::vector<size_t> hot;
  for (size_t i = 0; i < std::min<size_t>(image.size(), 64); ++i) hot.push_back(i);
  const size_t elf_at = [&] {  // the first embedded (or the whole) ELF
    for (size_t i = 0; i + 4 <= image.size(); i += 8)
      if (std::memcmp(image.data() + i, "\x7f" "ELF", 4) == 0) return i;
    return image.size();
  }();
  if (elf_at < image.size()) {
    const std::span<const uint8_t> elf(image.data() + elf_at, image.size() - elf_at);
    try {
      ElfFile f(elf);
      uint64_t shoff = 0;
      std::memcpy(&shoff, elf.data() + 40, 8);
      for (size_t i = 0; i < f.sections().size(); ++i)
        for (size_t k : {4, 24, 32, 40, 56})  // type, offset, size, link, entsize
          hot.push_back(elf_at + shoff + i * 64 + k);
      for (const ElfSection& s : f.sections())
        if (s.type == 2)  // SHT_SYMTAB: each symbol's section, value and size
          for (uint64_t at = 0; at + 24 <= s.size; at += 24)
            for (size_t k : {6, 8, 16}) hot.push_back(elf_at + s.offset + at + k);
    } catch (...) {  // an embedded ELF stored compressed: the headers are enough
    }
  }
  std::erase_if(hot, [&](size_t o) { return o >= image.size(); });
  return hot;
}

class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<uint8_t>& image) : rng_(seed), image_(image), hot_(hot_offsets(image)) {}

  std::vector<uint8_t> next() {
    std::vector<uint8_t> b = image_;
    const size_t n = b.size();
    auto pick = [&](size_t m) { return m == 0 ? 0 : static_cast<size_t>(rng_() % m); };
    auto where = [&] { return !hot_.empty() && (rng_() & 1) ? hot_[pick(hot_.size())] : pick(n); };
    const uint64_t interesting[] = {0, 1, 0x7f, 0xff, 0xffff, 0xffffffffu, 0x80000000u, n, n + 1,
                                    n - 1, uint64_t{1} << 33, uint64_t{1} << 40, ~uint64_t{0},
                                    ~uint64_t{0} - 7, uint64_t{1} << 62};
    switch (rng_() % 6) {
      case 0:  // one bit
        if (n) b[where()] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 1:  // a few bits anywhere
        for (int k = 0, m = 1 + static_cast<int>(pick(8)); k < m && n; ++k) b[pick(n)] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 2: {  // a boundary value over a field
        const size_t widths[] = {1, 2, 4, 8};
        put(b, where(), interesting[pick(std::size(interesting))], widths[pick(4)]);
        break;
      }
      case 3:  // a random 64-bit value, often a high bit only
        put(b, where(), rng_() % 2 ? rng_() : uint64_t{1} << pick(64), 8);
        break;
      case 4:  // cut short
        b.resize(pick(n + 1));
        break;
      default: {  // splice: a piece of the image copied over another place
        if (n < 16) break;
        const size_t from = pick(n), to = pick(n), len = 1 + pick(std::min<size_t>(64, n));
        for (size_t i = 0; i < len && from + i < n && to + i < n; ++i) b[to + i] = image_[from + i];
        break;
      }
    }
    return b;
  }

 private:
  std::mt19937_64 rng_;
  const std::vector<uint8_t>& image_;
  std::vector<size_t> hot_;
};

TEST(ImageFuzz, MutatedImagesParseOrFailCleanlyThroughBothEntryPoints) {
  const uint64_t rounds = env_u64("VGPU_FUZZ_ROUNDS", 1500);
  const uint64_t seed = env_u64("VGPU_FUZZ_SEED", 0x76677075);
  for (const char* name : kImages) {
    const std::vector<uint8_t> image = built_image(name);
    ASSERT_FALSE(image.empty()) << name;
    const int sm = std::strstr(name, "sm80") ? 80 : std::strstr(name, "sm100") || std::strstr(name, "multi") ? 100 : 90;
    ASSERT_TRUE(parse_image(image, sm).ok()) << name;
    Mutator m(seed ^ std::hash<std::string>{}(name), image);
    Tally t;
    for (uint64_t i = 0; i < rounds; ++i) {
      parse_both(m.next(), sm, &t);
      if (::testing::Test::HasFatalFailure()) return;
    }
    std::printf("[ %s ] %llu variants: %llu parsed, %llu refused\n", name,
                static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(t.parsed),
                static_cast<unsigned long long>(t.refused));
  }
}

// Two lies the fuzzer found, kept as fixed cases.
// A section table claimed past the real bytes, handed over by pointer only: refused, not read.
TEST(ImageFuzz, ExtentsPastTheMemoryAreRefusedNotRead) {
  std::vector<uint8_t> image = built_image("kernels_sm90.cubin");
  ASSERT_GE(image.size(), 64u);
  for (uint64_t shoff : {uint64_t{image.size()} + 4096, uint64_t{1} << 20, uint64_t{64} << 20}) {
    std::vector<uint8_t> b = image;
    put(b, 40, shoff, 8);
    GuardedCopy g(b);
    const ParseResult r = parse_image_at(g.data(), 90);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("memory"), std::string::npos) << r.message();
  }
  // A fat binary whose header claims a megabyte more than there is.
  std::vector<uint8_t> fat = built_image("kernels_no_compress.fatbin");
  uint64_t claimed = 0;
  std::memcpy(&claimed, fat.data() + 8, 8);
  put(fat, 8, claimed + (1 << 20), 8);
  GuardedCopy g(fat);
  const ParseResult r = parse_image_at(g.data(), 90);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("memory"), std::string::npos) << r.message();
}

// A flipped bit in a global's symbol size: the variable must still lie in its section, so the
// driver never allocates the gigabytes it claims.
TEST(ImageFuzz, GlobalLargerThanItsSectionIsRefused) {
  std::vector<uint8_t> image = built_image("kernels_sm90.cubin");
  const ElfFile f(image);
  const ElfSection* symtab = nullptr;
  for (const ElfSection& s : f.sections())
    if (s.type == 2) symtab = &s;
  ASSERT_NE(symtab, nullptr);
  const ElfSymbol* counter = nullptr;
  for (const ElfSymbol& s : f.symbols())
    if (s.name == "d_counter") counter = &s;
  ASSERT_NE(counter, nullptr);
  const size_t size_at = symtab->offset + counter->index * 24 + 16;
  for (uint64_t flipped : {counter->size | (uint64_t{1} << 33), counter->size | (uint64_t{1} << 34)}) {
    std::vector<uint8_t> b = image;
    put(b, size_at, flipped, 8);
    const ParseResult r = parse_image(b, 90);
    ASSERT_FALSE(r.ok()) << "a " << flipped << "-byte global was accepted";
    EXPECT_NE(r.message().find("outside its section"), std::string::npos) << r.message();
  }
}

}  // namespace
