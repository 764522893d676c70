// torch.cat's input struct in a launch signature (front/launch/cat_array_metadata.h): launches of
// the same work whose entries past the batch's inputs, or whose output sizes past its dimensions,
// hold different garbage share one signature, while everything the kernel reads still keys it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "front/launch/cat_array_metadata.h"
#include "front/launch/launch_signature.h"

namespace vgpu {
namespace {

// The kernel GPT-2's step launched 288 times a run (2026-11-28), and the strided form.
const char* kVectorized =
    "_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391c30CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj2EEE"
    "jLi3ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEE"
    "iS8_";
const char* kStrided =
    "_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391c19CatArrayBatchedCopyINS1_10OpaqueTypeILj4EEEjLi2ELi64E"
    "Li64EEEvPT_NS1_25CatArrInputTensorMetadataIS5_T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_";

// The struct as PyTorch's host code fills it for `inputs` inputs of a batch of n (stride size k,
// 4-byte index): every entry it uses set, everything else `rng`'s garbage; then the output's
// TensorSizeStride (its first `dims` sizes and strides set), concatDim and dimStride.
struct Cat {
  size_t n = 128, k = 1, dims = 3;
  size_t offset_at() const { return 8 * n; }
  size_t dim_size_at() const { return offset_at() + 4 * n; }
  size_t n_elements_at() const { return dim_size_at() + 4 * n; }
  size_t contiguous_at() const { return n_elements_at() + 4 * n; }
  size_t strides_at() const { return (contiguous_at() + n + 3) / 4 * 4; }
  size_t size() const { return (strides_at() + k * 32 + 15) / 16 * 16; }

  // Parameters: char* output, the struct, the output's TensorSizeStride<unsigned, 4>, two ints.
  std::vector<ParamSlot> slots() const {
    const auto s = static_cast<uint32_t>(size());
    return {{0, 8}, {16, s}, {16 + s, 32}, {48 + s, 4}, {52 + s, 4}};
  }
  std::vector<uint8_t> fill(size_t inputs, std::mt19937& rng) const {
    std::vector<uint8_t> b(56 + size());
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    const uint64_t output = 0x7f0000000000ull;
    std::memcpy(&b[0], &output, 8);
    uint8_t* m = &b[16];
    for (size_t i = 0; i < inputs; ++i) {
      const uint64_t input = 0x7f0000100000ull + (uint64_t{i} << 20);
      const uint32_t offset = static_cast<uint32_t>(768 * i), dim = 768, elements = 6291456;
      std::memcpy(m + 8 * i, &input, 8);
      std::memcpy(m + offset_at() + 4 * i, &offset, 4);
      std::memcpy(m + dim_size_at() + 4 * i, &dim, 4);
      std::memcpy(m + n_elements_at() + 4 * i, &elements, 4);
      m[contiguous_at() + i] = 1;
    }
    for (size_t e = 0; e < (k == 1 ? 1 : inputs); ++e)
      for (size_t d = 0; d < dims; ++d) {
        const uint32_t size = static_cast<uint32_t>(8 << d), stride = static_cast<uint32_t>(1000 >> d);
        std::memcpy(m + strides_at() + 32 * e + 4 * d, &size, 4);
        std::memcpy(m + strides_at() + 32 * e + 16 + 4 * d, &stride, 4);
      }
    uint8_t* os = &b[16 + size()];
    for (size_t d = 0; d < dims; ++d) {
      const uint32_t size = static_cast<uint32_t>(8 << d), stride = static_cast<uint32_t>(2304 >> d);
      std::memcpy(os + 4 * d, &size, 4);
      std::memcpy(os + 16 + 4 * d, &stride, 4);
    }
    const int32_t concat_dim = 2, dim_stride = 1;
    std::memcpy(&b[48 + size()], &concat_dim, 4);
    std::memcpy(&b[52 + size()], &dim_stride, 4);
    return b;
  }
  LaunchSignature signature(const char* name, const std::vector<uint8_t>& b, uint32_t inputs) const {
    LaunchShape s;
    s.grid = {4224, inputs, 1};
    s.block = {128, 1, 1};
    const auto sl = slots();
    return build_launch_signature(name, s, sl, b, [](uint64_t v) { return v >= 0x7f0000000000ull && v < 0x7f1000000000ull; });
  }
};

TEST(CatArrayMetadata, TheNameGivesTheTemplateArguments) {
  CatKernel c;
  ASSERT_TRUE(cat_kernel_of(kVectorized, &c));
  EXPECT_EQ(c.index_bytes, 4u);
  EXPECT_EQ(c.dims, 3u);
  EXPECT_EQ(c.batch, 128u);
  EXPECT_EQ(c.strides, 1u);
  EXPECT_TRUE(c.contiguous);
  ASSERT_TRUE(cat_kernel_of(kStrided, &c));
  EXPECT_EQ(c.dims, 2u);
  EXPECT_EQ(c.batch, 64u);
  EXPECT_EQ(c.strides, 64u);
  EXPECT_FALSE(c.contiguous);
  EXPECT_FALSE(cat_kernel_of("_Z4axpyfPKfPfi", &c));
  EXPECT_FALSE(cat_kernel_of("CatArrayBatchedCopy", &c));  // no template arguments
  EXPECT_TRUE(may_be_cat_metadata(2720));                  // n 128, k 1, 4-byte index: PyTorch's
  EXPECT_FALSE(may_be_cat_metadata(2721));
}

TEST(CatArrayMetadata, GarbagePastTheBatchLeavesTheSignature) {
  const Cat cat;
  ASSERT_EQ(cat.size(), 2720u);
  std::mt19937 one(1), two(2);
  const auto a = cat.fill(3, one), b = cat.fill(3, two);
  EXPECT_EQ(cat.signature(kVectorized, a, 3).bytes, cat.signature(kVectorized, b, 3).bytes);
  // Another kernel's parameter of that size is left as it is.
  EXPECT_NE(cat.signature("_Z5otherPcii", a, 3).bytes, cat.signature("_Z5otherPcii", b, 3).bytes);
}

TEST(CatArrayMetadata, WhatTheKernelReadsStillKeysIt) {
  const Cat cat;
  std::mt19937 rng(3);
  const auto base = cat.fill(3, rng);
  const std::string key = cat.signature(kVectorized, base, 3).bytes;
  auto changed = [&](size_t at, uint32_t value) {
    auto b = base;
    std::memcpy(&b[at], &value, 4);
    return cat.signature(kVectorized, b, 3).bytes != key;
  };
  const size_t m = 16;
  EXPECT_TRUE(changed(m + cat.offset_at() + 8, 9));        // the third input's offset
  EXPECT_TRUE(changed(m + cat.dim_size_at(), 9));          // the first one's size along the dim
  EXPECT_TRUE(changed(m + cat.n_elements_at() + 4, 9));    // the second one's elements
  EXPECT_FALSE(changed(m + cat.offset_at() + 12, 9));      // a fourth input's: not in the batch
  EXPECT_FALSE(changed(m + cat.strides_at(), 9));          // contiguous: no input stride read
  const size_t os = m + cat.size();
  EXPECT_TRUE(changed(os + 8, 9));                         // the output's third size
  EXPECT_TRUE(changed(os + 16 + 4, 9));                    // and its second stride
  EXPECT_FALSE(changed(os + 12, 9));                       // its fourth size: past 3 dimensions
  EXPECT_FALSE(changed(os + 28, 0x7fda));                  // its fourth stride
  EXPECT_TRUE(changed(os + 32, 1));                        // concatDim
  // The batch is the grid's y: with four inputs the fourth one's entries count.
  auto four = base;
  const uint32_t offset = 9;
  std::memcpy(&four[m + cat.offset_at() + 12], &offset, 4);
  EXPECT_NE(cat.signature(kVectorized, four, 4).bytes, cat.signature(kVectorized, base, 4).bytes);
}

TEST(CatArrayMetadata, AStridedKernelKeepsTheBatchsStridesUpToItsDimensions) {
  Cat cat;
  cat.n = 64;
  cat.k = 64;
  cat.dims = 2;
  std::mt19937 one(4), two(5);
  const auto a = cat.fill(5, one), b = cat.fill(5, two);
  EXPECT_EQ(cat.signature(kStrided, a, 5).bytes, cat.signature(kStrided, b, 5).bytes);
  auto c = a;
  const uint32_t stride = 7;
  std::memcpy(&c[16 + cat.strides_at() + 32 * 4 + 16 + 4], &stride, 4);  // the fifth input's second stride
  EXPECT_NE(cat.signature(kStrided, c, 5).bytes, cat.signature(kStrided, a, 5).bytes);
  std::memcpy(&c[16 + cat.strides_at() + 32 * 4 + 16 + 8], &stride, 4);  // its third: past 2 dimensions
  auto d = a;
  std::memcpy(&d[16 + cat.strides_at() + 32 * 4 + 16 + 4], &stride, 4);
  EXPECT_EQ(cat.signature(kStrided, c, 5).bytes, cat.signature(kStrided, d, 5).bytes);
}

// The output's third stride (1) beside its fourth, the upper half of a host stack address: read as
// one 8-byte word they are an address in a process whose stack lies there, and were zeroed as one
// in that process only, so a recording and its replay keyed one launch differently (2026-11-28:
// 286 misses a 2-rank replay). The struct's cleaning comes before the search for addresses.
TEST(CatArrayMetadata, AStrideBesideStackGarbageKeysAlikeInEveryProcess) {
  const Cat cat;
  std::mt19937 rng(6);
  auto b = cat.fill(3, rng);
  const size_t os = 16 + cat.size();
  const uint32_t third = 1, upper = 0x7ffc;
  std::memcpy(&b[os + 16 + 8], &third, 4);
  std::memcpy(&b[os + 16 + 12], &upper, 4);
  LaunchShape s;
  s.grid = {4224, 3, 1};
  s.block = {128, 1, 1};
  const auto sl = cat.slots();
  auto device = [](uint64_t v) { return v >= 0x7f0000000000ull && v < 0x7f1000000000ull; };
  // This process's stack covers 0x7ffc'00000001; another's does not.
  const std::string here = build_launch_signature(kVectorized, s, sl, b, [&](uint64_t v) {
    return device(v) || (v >= 0x7ffc00000000ull && v < 0x7ffd00000000ull);
  }).bytes;
  const std::string there = build_launch_signature(kVectorized, s, sl, b, device).bytes;
  EXPECT_EQ(here, there);
  // The third stride still keys it.
  auto c = b;
  const uint32_t two = 2;
  std::memcpy(&c[os + 16 + 8], &two, 4);
  EXPECT_NE(build_launch_signature(kVectorized, s, sl, c, device).bytes, there);
}

}  // namespace
}  // namespace vgpu
