// PyTorch's multi-tensor-apply struct in a launch signature (front/launch/tensor_list_metadata.h):
// launches of the same work whose unused entries hold different garbage share one signature,
// while every entry the launch uses still keys it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "front/launch/launch_signature.h"
#include "front/launch/tensor_list_metadata.h"

namespace vgpu {
namespace {

// The struct as PyTorch's host code fills it: `depth` address lists, element counts, the block
// map; sizes as tensor_list_metadata.h lays them out.
struct TensorList {
  int depth = 2;
  bool fused = false;
  bool large = false;  // the CUDA 12.1+ configuration: more entries, two-byte block indices
  size_t tensors() const {
    static const size_t small[5] = {110, 64, 48, 36, 30}, big[5] = {770, 448, 336, 252, 210};
    return (large ? big : small)[depth - 1];
  }
  size_t step_tensors() const {
    static const size_t small[5] = {96, 64, 48, 36, 30}, big[5] = {672, 448, 336, 252, 210};
    return (large ? big : small)[depth - 1];
  }
  size_t blocks() const { return large ? 2240 : 320; }
  size_t index_bytes() const { return large ? 2 : 1; }
  size_t numel_at() const { return 8 * depth * tensors(); }
  size_t steps_at() const { return numel_at() + 8 * tensors(); }
  size_t block_to_tensor_at() const { return steps_at() + (fused ? 8 * step_tensors() : 0); }
  size_t block_to_chunk_at() const { return (block_to_tensor_at() + blocks() * index_bytes() + 3) / 4 * 4; }
  size_t size() const { return (block_to_chunk_at() + 4 * blocks() + 4 + 7) / 8 * 8; }

  // `numels` of the tensors used; each tensor's chunks of 65536 elements get a block each.
  // Everything else is `rng`'s garbage. Returns the bytes and sets *grid.
  std::vector<uint8_t> fill(const std::vector<int64_t>& numels, std::mt19937& rng, uint32_t* grid) const {
    std::vector<uint8_t> b(size());
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    size_t block = 0;
    for (size_t t = 0; t < numels.size(); ++t) {
      for (int list = 0; list < depth; ++list) {
        const uint64_t address = 0x7f0000000000ull + (uint64_t{t} << 24) + (uint64_t(list) << 20);
        std::memcpy(&b[8 * (list * tensors() + t)], &address, 8);
      }
      std::memcpy(&b[numel_at() + 8 * t], &numels[t], 8);
      if (fused) {
        const uint64_t step = 0x7f1000000000ull + t * 256;
        std::memcpy(&b[steps_at() + 8 * t], &step, 8);
      }
      for (int64_t chunk = 0; chunk * 65536 < numels[t]; ++chunk, ++block) {
        const uint16_t tensor = static_cast<uint16_t>(t);
        std::memcpy(&b[block_to_tensor_at() + block * index_bytes()], &tensor, index_bytes());
        const int32_t c = static_cast<int32_t>(chunk);
        std::memcpy(&b[block_to_chunk_at() + 4 * block], &c, 4);
      }
    }
    const int32_t start = 0;
    std::memcpy(&b[block_to_chunk_at() + 4 * blocks()], &start, 4);
    *grid = static_cast<uint32_t>(block);
    return b;
  }
};

// The device addresses fill() writes (and nothing below them) are pointers.
bool fake_device_pointer(uint64_t v) { return v >= 0x7f0000000000ull && v < 0x7f2000000000ull; }

const char* kCopy =
    "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_apply_kernelINS1_"
    "18TensorListMetadataILi2EEENS1_14UnaryOpFunctorIN3c108BFloat16ELi2ELi1ELi1EEEJNS0_4CopyIS7_S7_EEEEEvT_T0_"
    "DpT1_";
const char* kFusedAdam =
    "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_32FusedOptimizerTensorListMetadataILi4EEENS1_"
    "15FusedAdamMathFunctorIfLi4ELNS0_8ADAM_MODEE1ELb0EEEJPKdddddddPKfSA_EEEvT_T0_DpT1_";

LaunchSignature signature_of(const char* name, const TensorList& l, const std::vector<int64_t>& numels, uint32_t seed) {
  std::mt19937 rng(seed);
  uint32_t grid = 0;
  const std::vector<uint8_t> bytes = l.fill(numels, rng, &grid);
  LaunchShape shape;
  shape.grid = {grid, 1, 1};
  shape.block = {512, 1, 1};
  const ParamSlot slots[] = {{0, static_cast<uint32_t>(bytes.size())}};
  return build_launch_signature(name, shape, slots, bytes, fake_device_pointer);
}

TEST(TensorListMetadata, TheSizesArePyTorchs) {
  // TensorListMetadata<2> under the 4 KiB limit: 3,144 bytes (what a 2-rank FSDP2 copy-in passed).
  EXPECT_EQ(TensorList{}.size(), 3144u);
  EXPECT_TRUE(may_be_tensor_list(3144));
  EXPECT_TRUE(may_be_tensor_list(TensorList{4, true}.size()));
  EXPECT_TRUE(may_be_tensor_list(TensorList{1, false, true}.size()));
  EXPECT_FALSE(may_be_tensor_list(3136));
  EXPECT_FALSE(may_be_tensor_list(64));
}

TEST(TensorListMetadata, GarbagePastTheUsedEntriesLeavesTheSignature) {
  const std::vector<int64_t> numels = {2359296, 768, 589824};  // 36 + 1 + 9 blocks
  for (const TensorList& l : {TensorList{2}, TensorList{1}, TensorList{5}, TensorList{2, false, true},
                              TensorList{4, true}, TensorList{4, true, true}}) {
    const char* name = l.fused ? kFusedAdam : kCopy;
    std::string named = name;
    if (l.depth != (l.fused ? 4 : 2)) {  // the depth the struct's template names
      const std::string from = l.fused ? "MetadataILi4E" : "MetadataILi2E";
      named.replace(named.find(from), from.size(), "MetadataILi" + std::to_string(l.depth) + "E");
    }
    const LaunchSignature a = signature_of(named.c_str(), l, numels, 1);
    const LaunchSignature b = signature_of(named.c_str(), l, numels, 2);
    EXPECT_EQ(a, b) << "depth " << l.depth << (l.fused ? " fused" : "") << (l.large ? " large" : "");
    // Every used entry still keys it: a tensor's element count, and so its blocks.
    EXPECT_NE(a, signature_of(named.c_str(), l, {2359296, 769, 589824}, 1));
    EXPECT_NE(a, signature_of(named.c_str(), l, {2359296, 768, 655360}, 1));
    EXPECT_NE(a, signature_of(named.c_str(), l, {2359296, 768}, 1));
  }
}

TEST(TensorListMetadata, OtherKernelsAndSizesKeepTheirBytes) {
  const std::vector<int64_t> numels = {4096, 4096};
  // The same struct in a kernel of another name: its bytes stay (garbage or not, not ours to say).
  EXPECT_NE(signature_of("my_kernel_taking_3144_bytes", TensorList{}, numels, 1),
            signature_of("my_kernel_taking_3144_bytes", TensorList{}, numels, 2));
  // A name that says depth 3 with depth 2's size: no layout of depth 3 has that size.
  std::string three = kCopy;
  three.replace(three.find("MetadataILi2E"), 13, "MetadataILi3E");
  EXPECT_NE(signature_of(three.c_str(), TensorList{}, numels, 1), signature_of(three.c_str(), TensorList{}, numels, 2));
  std::vector<char> short_struct(100, 'x');
  EXPECT_FALSE(zero_unused_tensor_list_entries(kCopy, 1, short_struct.data(), short_struct.size()));
  EXPECT_EQ(std::string(short_struct.begin(), short_struct.end()), std::string(100, 'x'));
}

}  // namespace
}  // namespace vgpu
