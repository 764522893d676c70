// The LZ4 block decoder: round trips through a small greedy compressor written here (so long
// literal runs, long and overlapping matches all occur), hand-built blocks, damaged blocks.
#include "module/image_error.h"
#include "module/lz4_block.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace {

using namespace vgpu::module;

void put_length(std::vector<uint8_t>& out, size_t extra) {
  while (extra >= 255) {
    out.push_back(255);
    extra -= 255;
  }
  out.push_back(static_cast<uint8_t>(extra));
}

void emit(std::vector<uint8_t>& out, const uint8_t* lit, size_t nlit, size_t offset, size_t match) {
  const size_t ml = match ? match - 4 : 0;
  out.push_back(static_cast<uint8_t>((std::min<size_t>(nlit, 15) << 4) | (match ? std::min<size_t>(ml, 15) : 0)));
  if (nlit >= 15) put_length(out, nlit - 15);
  out.insert(out.end(), lit, lit + nlit);
  if (!match) return;
  out.push_back(static_cast<uint8_t>(offset));
  out.push_back(static_cast<uint8_t>(offset >> 8));
  if (ml >= 15) put_length(out, ml - 15);
}

// Greedy LZ4: a 4-byte hash table of last positions; the final 5 bytes stay literals.
std::vector<uint8_t> lz4_compress(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out;
  std::vector<size_t> table(1 << 12, SIZE_MAX);
  size_t anchor = 0, i = 0;
  auto hash = [&](size_t p) {
    uint32_t v;
    std::memcpy(&v, in.data() + p, 4);
    return (v * 2654435761u) >> 20;
  };
  while (in.size() >= 12 && i + 12 <= in.size()) {
    const uint32_t h = hash(i);
    const size_t cand = table[h];
    table[h] = i;
    if (cand != SIZE_MAX && i - cand <= 65535 && std::memcmp(in.data() + cand, in.data() + i, 4) == 0) {
      size_t len = 4;
      while (i + len + 5 < in.size() && in[cand + len] == in[i + len]) ++len;
      emit(out, in.data() + anchor, i - anchor, i - cand, len);
      i += len;
      anchor = i;
    } else {
      ++i;
    }
  }
  emit(out, in.data() + anchor, in.size() - anchor, 0, 0);
  return out;
}

bool decode(const std::vector<uint8_t>& block, uint64_t size, std::vector<uint8_t>* out = nullptr) {
  try {
    const auto r = lz4_decompress_block(block, size);
    if (out) out->assign(r.begin(), r.end());
    return true;
  } catch (const ImageError&) {
    return false;
  }
}

TEST(Lz4, RoundTrips) {
  std::mt19937 rng(3);
  std::vector<std::vector<uint8_t>> inputs = {{}, {'a'}, std::vector<uint8_t>(15, 'x'), std::vector<uint8_t>(70000, 0)};
  std::vector<uint8_t> text;
  for (int i = 0; i < 20000; ++i) text.push_back(static_cast<uint8_t>("abcab cabbage "[rng() % 14]));
  inputs.push_back(text);
  std::vector<uint8_t> noise(5000);
  for (uint8_t& b : noise) b = static_cast<uint8_t>(rng());
  inputs.push_back(noise);  // literal runs well past 15 + 255
  for (const auto& in : inputs) {
    const std::vector<uint8_t> block = lz4_compress(in);
    std::vector<uint8_t> out;
    ASSERT_TRUE(decode(block, in.size(), &out)) << in.size();
    EXPECT_TRUE(out == in) << in.size();
  }
}

TEST(Lz4, OverlappingMatchRepeatsItsSource) {
  // "ab" then a match at offset 2 of length 4 + 15 + 3 = 22: "ab" repeated.
  const std::vector<uint8_t> block = {0x2F, 'a', 'b', 2, 0, 3, 0x00};
  std::vector<uint8_t> out;
  ASSERT_TRUE(decode(block, 24, &out));
  std::string s(out.begin(), out.end());
  EXPECT_EQ(s, "abababababababababababab");
}

TEST(Lz4, DamagedBlocksAreRefused) {
  EXPECT_FALSE(decode({0x10, 'a', 0, 0}, 10));         // offset 0
  EXPECT_FALSE(decode({0x10, 'a', 2, 0}, 10));         // offset before the start
  EXPECT_FALSE(decode({0xF0}, 100));                   // literal length continues past the end
  EXPECT_FALSE(decode({0x30, 'a', 'b'}, 3));           // literals past the end
  EXPECT_FALSE(decode({0x10, 'a', 1}, 10));            // truncated offset
  EXPECT_FALSE(decode({0x1F, 'a', 1, 0, 255}, 1000));  // match length continues past the end
  EXPECT_FALSE(decode({0x20, 'a', 'b'}, 3));           // shorter than declared
  EXPECT_FALSE(decode({0x1F, 'a', 1, 0, 10, 0x00}, 5));  // longer than declared
  EXPECT_TRUE(decode({0x20, 'a', 'b'}, 2));
}

TEST(Lz4, FlippedBytesNeverCrash) {
  std::vector<uint8_t> text;
  for (int i = 0; i < 5000; ++i) text.push_back(static_cast<uint8_t>("kernel launch grid "[i % 19] + (i % 97 == 0)));
  const std::vector<uint8_t> block = lz4_compress(text);
  std::mt19937 rng(9);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> m = block;
    m[rng() % m.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    refused += !decode(m, text.size());
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
