// PyTorch's elementwise structs in a launch signature (front/launch/elementwise_metadata.h): the
// padding of a cast kernel's loader and storer, and an offset calculator's dimensions past the
// tensors', leave the signature; every byte the kernel reads still keys it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "front/launch/elementwise_metadata.h"
#include "front/launch/launch_signature.h"

namespace vgpu {
namespace {

// GPT-2's logits cast (2026-11-28: 23 misses a 2-rank replay) and the bias add of its backward.
const char* kCastCopy =
    "_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_"
    "clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EELi4E23TrivialOffsetCalculatorILi1EjESB_NS0_6memory12LoadWithCastILi1EEENSC_"
    "13StoreWithCastILi1EEEEEviT_T0_T2_T3_T4_T5_";
const char* kLegacyAdd =
    "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_15CUDAFunctor_addIfEEEEvRNS_"
    "18TensorIteratorBaseERKT_EUliE_EEviT1_";

auto no_pointer = [](uint64_t) { return false; };

LaunchShape shape(uint32_t grid) {
  LaunchShape s;
  s.grid = {grid, 1, 1};
  s.block = {128, 1, 1};
  return s;
}

// unrolled_elementwise_kernel(int N, lambda, array<char*, 2>, TrivialOffsetCalculator x2,
// LoadWithCast<1>, StoreWithCast<1>): the loader and storer a dtype byte, three bytes of the
// host's stack, an element size.
struct CastCopy {
  std::vector<ParamSlot> slots = {{0, 4}, {4, 1}, {8, 16}, {24, 1}, {25, 1}, {28, 8}, {36, 8}};
  std::vector<uint8_t> fill(std::mt19937& rng, uint8_t load_dtype = 15, uint32_t load_size = 2) const {
    std::vector<uint8_t> b(44);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    const uint32_t n = 411705344, store_size = 4;
    std::memcpy(&b[0], &n, 4);
    std::memset(&b[8], 0, 16);
    b[4] = b[24] = b[25] = 0;  // the one-byte parameters (the database sets them aside: kernel_time_db.h)
    b[28] = load_dtype;
    std::memcpy(&b[32], &load_size, 4);
    b[36] = 6;
    std::memcpy(&b[40], &store_size, 4);
    return b;
  }
  std::string signature(const char* name, const std::vector<uint8_t>& b) const {
    return build_launch_signature(name, shape(804112), slots, b, no_pointer).bytes;
  }
};

TEST(ElementwiseMetadata, TheNameSaysWhichStructs) {
  const ElementwiseKernel cast = elementwise_kernel_of(kCastCopy);
  EXPECT_EQ(cast.load_n, 1u);
  EXPECT_EQ(cast.store_n, 1u);
  EXPECT_FALSE(cast.closure_offset_calculator);
  const ElementwiseKernel add = elementwise_kernel_of(kLegacyAdd);
  EXPECT_EQ(add.load_n, 0u);
  EXPECT_TRUE(add.closure_offset_calculator);
  EXPECT_FALSE(elementwise_kernel_of("_Z4axpyfPKfPfi").any());
  EXPECT_FALSE(elementwise_kernel_of("_ZN5other6memory12LoadWithCastILi1EEE").any());  // outside at::native
  EXPECT_TRUE(may_be_elementwise_struct(8));    // LoadWithCast<1>
  EXPECT_TRUE(may_be_elementwise_struct(12));   // LoadWithCast<2>
  EXPECT_TRUE(may_be_elementwise_struct(648));  // a closure of OffsetCalculator<3>
  EXPECT_FALSE(may_be_elementwise_struct(24));
  EXPECT_FALSE(may_be_elementwise_struct(600));
}

TEST(ElementwiseMetadata, ALoadersPaddingLeavesTheSignature) {
  const CastCopy k;
  std::mt19937 one(1), two(2);
  const auto a = k.fill(one), b = k.fill(two);
  ASSERT_NE(std::memcmp(&a[29], &b[29], 3), 0);
  EXPECT_EQ(k.signature(kCastCopy, a), k.signature(kCastCopy, b));
  // Another kernel's 8-byte parameters are left as they are.
  EXPECT_NE(k.signature("_Z5otherPcii", a), k.signature("_Z5otherPcii", b));
}

TEST(ElementwiseMetadata, WhatACastKernelReadsStillKeysIt) {
  const CastCopy k;
  std::mt19937 one(3), two(3), three(3);
  const std::string key = k.signature(kCastCopy, k.fill(one));
  EXPECT_NE(k.signature(kCastCopy, k.fill(two, /*load_dtype=*/5)), key);            // another dtype
  EXPECT_NE(k.signature(kCastCopy, k.fill(three, 15, /*load_size=*/4)), key);       // another size
  // Bytes that do not read as the struct (an element size of 3) are left, garbage and all.
  std::mt19937 four(4), five(5);
  EXPECT_NE(k.signature(kCastCopy, k.fill(four, 15, 3)), k.signature(kCastCopy, k.fill(five, 15, 3)));
}

// elementwise_kernel<128, 2>(int N, closure): the closure of gpu_kernel_impl_nocast's lambda,
// OffsetCalculator<3, uint32_t> (dims, 25 IntDividers, strides[25][3]), the three data pointers,
// the functor (CUDAFunctor_add<float>: alpha), 648 bytes as nvcc lays it out.
struct LegacyAdd {
  static constexpr size_t kClosure = 648, kStrides = 304, kData = 608, kFunctor = 632;
  std::vector<ParamSlot> slots = {{0, 4}, {8, static_cast<uint32_t>(kClosure)}};
  static void divider(uint8_t* at, uint32_t d) {  // as IntDivider<unsigned int>'s constructor stores it
    uint32_t shift = 0;
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    const uint32_t m1 = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
    std::memcpy(at, &d, 4);
    std::memcpy(at + 4, &m1, 4);
    std::memcpy(at + 8, &shift, 4);
  }
  std::vector<uint8_t> fill(std::mt19937& rng, uint32_t size0 = 786432, uint32_t stride1 = 0x300000) const {
    std::vector<uint8_t> b(8 + kClosure);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    const uint32_t n = 6291456, dims = 2;
    std::memcpy(&b[0], &n, 4);
    uint8_t* c = &b[8];
    std::memcpy(c, &dims, 4);
    divider(c + 4, size0);
    divider(c + 16, 8);
    const uint32_t strides[2][3] = {{4, 4, 4}, {stride1, stride1, 0}};
    std::memcpy(c + kStrides, strides, sizeof strides);
    std::memset(c + kData, 0, 24);  // the data pointers (zeroed as addresses when they are)
    const float alpha = 1.0f;
    std::memcpy(c + kFunctor, &alpha, 4);
    std::memset(c + kFunctor + 4, 0, kClosure - kFunctor - 4);
    return b;
  }
  std::string signature(const char* name, const std::vector<uint8_t>& b) const {
    return build_launch_signature(name, shape(24576), slots, b, no_pointer).bytes;
  }
};

TEST(ElementwiseMetadata, AnOffsetCalculatorsUnusedDimensionsLeaveTheSignature) {
  const LegacyAdd k;
  std::mt19937 one(7), two(8);
  const auto a = k.fill(one), b = k.fill(two);
  EXPECT_EQ(k.signature(kLegacyAdd, a), k.signature(kLegacyAdd, b));
  EXPECT_NE(k.signature("_Z5otherPci", a), k.signature("_Z5otherPci", b));
}

TEST(ElementwiseMetadata, WhatAnOffsetCalculatorReadsStillKeysIt) {
  const LegacyAdd k;
  std::mt19937 one(9), two(9), three(9), four(9);
  const auto base = k.fill(one);
  const std::string key = k.signature(kLegacyAdd, base);
  EXPECT_NE(k.signature(kLegacyAdd, k.fill(two, /*size0=*/393216)), key);            // a size
  EXPECT_NE(k.signature(kLegacyAdd, k.fill(three, 786432, /*stride1=*/0x180000)), key);  // a stride
  auto alpha = base;
  const float half = 0.5f;
  std::memcpy(&alpha[8 + LegacyAdd::kFunctor], &half, 4);
  EXPECT_NE(k.signature(kLegacyAdd, alpha), key);  // the functor
  auto dims = k.fill(four);
  const uint32_t three_dims = 3;  // a third dimension's entries now count
  std::memcpy(&dims[8], &three_dims, 4);
  LegacyAdd::divider(&dims[8 + 4 + 24], 16);
  std::mt19937 five(10);
  auto dims2 = k.fill(five);
  std::memcpy(&dims2[8], &three_dims, 4);
  LegacyAdd::divider(&dims2[8 + 4 + 24], 16);
  // Their third rows of strides are garbage of two seeds: read now, so the signatures differ.
  EXPECT_NE(k.signature(kLegacyAdd, dims), k.signature(kLegacyAdd, dims2));
  // A divider whose magic number is not IntDivider's: not an offset calculator, left as it is.
  std::mt19937 six(11), seven(12);
  auto bad = k.fill(six), bad2 = k.fill(seven);
  const uint32_t wrong = 12345;
  std::memcpy(&bad[8 + 8], &wrong, 4);
  std::memcpy(&bad2[8 + 8], &wrong, 4);
  EXPECT_NE(k.signature(kLegacyAdd, bad), k.signature(kLegacyAdd, bad2));
}

}  // namespace
}  // namespace vgpu
