// The Zstandard decoder against frames the reference `zstd` tool wrote (data/*.zst, made by
// data/make_zstd_vectors.py from contents this test regenerates), hand-built frames for the
// rarer paths, and damaged frames.
#include "module/image.h"
#include "module/xxhash64.h"
#include "module/zstd.h"
#include "module/image_error.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace {

using namespace vgpu::module;
using module_test::read_file;
using module_test::source;

// The generator of make_zstd_vectors.py.
std::vector<uint8_t> generate(size_t size, uint32_t seed, bool words) {
  static const char* const kVocab[] = {
      "kernel", "launch", "grid", "block", "thread", "warp", "shared", "global", "param", "const", ".reg",
      ".u64", "ld.param", "st.global", "{", "}", ";", "\n\t", "0x", "%r1", "%rd2", "mad.lo.s32", "bar.sync",
      "ret", "//", "sm_90", "cvta.to.global", "setp.ge.s32", "@%p1", "bra", "$L__BB0_2", "add.s64"};
  uint64_t x = seed & 0x7FFFFFFF;
  std::vector<uint8_t> out;
  while (out.size() < size) {
    x = (x * 1103515245 + 12345) & 0x7FFFFFFF;
    const uint64_t r = x >> 16;
    if (!words || r % 7 == 0) {
      out.push_back(static_cast<uint8_t>(r & 0xFF));
    } else {
      const std::string w = kVocab[r % 32];
      out.insert(out.end(), w.begin(), w.end());
      out.push_back(' ');
    }
  }
  out.resize(size);
  return out;
}

struct Vector {
  const char* name;
  size_t size;
  uint32_t seed;
  int kind;  // 0 words, 1 random bytes, 2 zeros
};

const Vector kVectors[] = {
    {"text_small_l3", 1000, 1, 0},        {"text_large_l19", 200000, 2, 0}, {"text_large_l1", 140000, 3, 0},
    {"text_stream_nocheck", 140000, 4, 0}, {"random_l3", 8000, 5, 1},       {"zeros_l3", 200000, 0, 2},
    {"empty", 0, 0, 0},
};

std::vector<uint8_t> contents(const Vector& v) {
  if (v.kind == 2) return std::vector<uint8_t>(v.size, 0);
  return generate(v.size, v.seed, v.kind == 0);
}

std::vector<uint8_t> frame(const Vector& v) { return read_file(source("data/") + v.name + ".zst"); }

// Runs the decoder, turning its exception into an error string (as the image parser does).
bool decode(std::span<const uint8_t> src, uint64_t limit, std::vector<uint8_t>* out = nullptr,
            std::string* error = nullptr) {
  try {
    const auto r = zstd_decompress(src, limit);
    if (out) out->assign(r.begin(), r.end());
    return true;
  } catch (const ImageError& e) {
    if (error) *error = e.what();
    return false;
  }
}

TEST(Xxhash64, KnownValues) {
  EXPECT_EQ(xxhash64({}), 0xEF46DB3751D8E999ull);
  const std::string abc = "abc";
  EXPECT_EQ(xxhash64(std::span(reinterpret_cast<const uint8_t*>(abc.data()), abc.size())), 0x44BC2CF5AD770999ull);
}

TEST(Zstd, ReferenceFrames) {
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.name);
    const std::vector<uint8_t> expected = contents(v);
    std::vector<uint8_t> out;
    std::string error;
    ASSERT_TRUE(decode(frame(v), 1 << 20, &out, &error)) << error;
    EXPECT_EQ(out.size(), expected.size());
    EXPECT_TRUE(out == expected);
  }
}

TEST(Zstd, ConcatenatedAndSkippableFrames) {
  const std::vector<uint8_t> a = frame(kVectors[0]), b = frame(kVectors[4]);
  std::vector<uint8_t> both = a;
  const uint8_t skippable[] = {0x5A, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'x', 'y', 'z'};
  both.insert(both.end(), std::begin(skippable), std::end(skippable));
  both.insert(both.end(), b.begin(), b.end());
  std::vector<uint8_t> expected = contents(kVectors[0]);
  const std::vector<uint8_t> second = contents(kVectors[4]);
  expected.insert(expected.end(), second.begin(), second.end());
  std::vector<uint8_t> out;
  ASSERT_TRUE(decode(both, 1 << 20, &out));
  EXPECT_TRUE(out == expected);
}

TEST(Zstd, OutputLimitStopsEarly) {
  std::string error;
  // 200000 zero bytes from 30 bytes of RLE blocks: refused before growing past the limit.
  EXPECT_FALSE(decode(frame(kVectors[5]), 199999, nullptr, &error));
  EXPECT_NE(error.find("allowed"), std::string::npos) << error;
  EXPECT_FALSE(decode(frame(kVectors[3]), 1000, nullptr, &error));  // no content size in its header
  EXPECT_TRUE(decode(frame(kVectors[5]), 200000));
}

// Frames built by hand: header fields the tool does not produce by default.
std::vector<uint8_t> raw_frame(uint8_t descriptor, std::vector<uint8_t> header_rest, std::vector<uint8_t> blocks) {
  std::vector<uint8_t> f = {0x28, 0xB5, 0x2F, 0xFD, descriptor};
  f.insert(f.end(), header_rest.begin(), header_rest.end());
  f.insert(f.end(), blocks.begin(), blocks.end());
  return f;
}

// A last raw block holding "hello": header = (5 << 3) | (0 << 1) | 1.
const std::vector<uint8_t> kHelloBlock = {0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'};

TEST(Zstd, HandBuiltFrames) {
  std::vector<uint8_t> out;
  // Single segment, 1-byte content size 5.
  ASSERT_TRUE(decode(raw_frame(0x20, {5}, kHelloBlock), 100, &out));
  EXPECT_EQ(std::string(out.begin(), out.end()), "hello");
  // A window descriptor instead of single segment, no content size.
  ASSERT_TRUE(decode(raw_frame(0x00, {0x50}, kHelloBlock), 100, &out));
  EXPECT_EQ(std::string(out.begin(), out.end()), "hello");
  // RLE block: 'z' seven times; header = (7 << 3) | (1 << 1) | 1.
  ASSERT_TRUE(decode(raw_frame(0x20, {7}, {0x3B, 0x00, 0x00, 'z'}), 100, &out));
  EXPECT_EQ(std::string(out.begin(), out.end()), "zzzzzzz");

  std::string error;
  EXPECT_FALSE(decode(raw_frame(0x20, {6}, kHelloBlock), 100, nullptr, &error));  // size mismatch
  EXPECT_FALSE(decode(raw_frame(0x28, {5}, kHelloBlock), 100, nullptr, &error));  // reserved bit
  // A dictionary id: not supported, and said so.
  try {
    zstd_decompress(raw_frame(0x21, {7, 5}, kHelloBlock), 100);
    ADD_FAILURE() << "dictionary frame decoded";
  } catch (const ImageError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
  }
  EXPECT_FALSE(decode(raw_frame(0x20, {5}, {0x2F, 0x00, 0x00, 'h'}), 100));               // reserved block type
  EXPECT_FALSE(decode(raw_frame(0x00, {0x50}, {0x01, 0x00, 0x11}), 1 << 30));             // block over 128 KiB
  EXPECT_FALSE(decode(raw_frame(0x20, {5}, {0x28, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'}), 100));  // no last block
  EXPECT_FALSE(decode(raw_frame(0x24, {5}, kHelloBlock), 100));                           // checksum missing
  std::vector<uint8_t> bad_sum = raw_frame(0x24, {5}, kHelloBlock);
  bad_sum.insert(bad_sum.end(), {1, 2, 3, 4});
  EXPECT_FALSE(decode(bad_sum, 100, nullptr, &error));
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
  EXPECT_FALSE(decode(std::vector<uint8_t>{0x28, 0xB5, 0x2F}, 100));  // truncated magic
  EXPECT_FALSE(decode(std::vector<uint8_t>{1, 2, 3, 4, 5}, 100));     // not a frame
}

TEST(Zstd, TruncationsAreRefused) {
  for (const Vector& v : kVectors) {
    const std::vector<uint8_t> f = frame(v);
    for (size_t n = 0; n < f.size(); n += 1 + n / 64) {
      std::vector<uint8_t> cut(f.begin(), f.begin() + static_cast<ptrdiff_t>(n));
      EXPECT_FALSE(decode(cut, 1 << 20)) << v.name << " cut to " << n;
    }
  }
}

TEST(Zstd, FlippedBytesNeverCrash) {
  std::mt19937 rng(77);
  int refused = 0, decoded = 0;
  for (const Vector& v : kVectors) {
    const std::vector<uint8_t> f = frame(v);
    if (f.size() < 16) continue;
    for (int i = 0; i < 200; ++i) {
      std::vector<uint8_t> m = f;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) m[rng() % m.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      // Exactly-sized heap copy: any overread shows under ASan.
      std::vector<uint8_t> exact(m.begin(), m.end());
      (decode(exact, v.size + 1024) ? decoded : refused)++;
    }
  }
  EXPECT_GT(refused, 0);
  std::printf("zstd flips: %d refused, %d decoded (checksums catch most)\n", refused, decoded);
}

}  // namespace
