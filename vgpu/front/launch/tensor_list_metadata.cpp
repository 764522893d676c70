#include "front/launch/tensor_list_metadata.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace vgpu {
namespace {

struct Config {
  std::array<uint32_t, 5> tensors;       // T by depth
  std::array<uint32_t, 5> step_tensors;  // Ts by depth (the fused optimizers' state steps)
  uint32_t blocks;                       // B
  uint32_t block_index_bytes;            // block_to_tensor's element
};

constexpr Config kSmall{{110, 64, 48, 36, 30}, {96, 64, 48, 36, 30}, 320, 1};
constexpr Config kLarge{{770, 448, 336, 252, 210}, {672, 448, 336, 252, 210}, 2240, 2};
constexpr std::array<const Config*, 2> kConfigs{&kSmall, &kLarge};

constexpr size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Where each array of one struct starts, and its size.
struct Layout {
  size_t tensors = 0, blocks = 0, index_bytes = 0;
  size_t numel = 0;          // numel_for_tensor
  size_t steps = 0;          // state_steps_addresses (fused only)
  size_t step_tensors = 0;   // its entries (0: not fused)
  size_t block_to_tensor = 0, block_to_chunk = 0;
  size_t size = 0;
};

constexpr Layout layout_of(const Config& c, int depth, bool fused) {
  Layout l;
  l.tensors = c.tensors[static_cast<size_t>(depth - 1)];
  l.blocks = c.blocks;
  l.index_bytes = c.block_index_bytes;
  l.numel = size_t{8} * static_cast<size_t>(depth) * l.tensors;  // after addresses[n][T]
  size_t at = l.numel + 8 * l.tensors;
  if (fused) {
    l.steps = at;
    l.step_tensors = c.step_tensors[static_cast<size_t>(depth - 1)];
    at += 8 * l.step_tensors;
  }
  l.block_to_tensor = at;
  at += l.blocks * l.index_bytes;
  l.block_to_chunk = align_up(at, 4);
  at = l.block_to_chunk + 4 * l.blocks + 4;  // and start_tensor_this_launch
  l.size = align_up(at, 8);
  return l;
}

// Every size the structs take (depth 1-5, plain and fused, both configurations).
constexpr std::array<size_t, 20> kSizes = [] {
  std::array<size_t, 20> s{};
  size_t i = 0;
  for (const Config* c : kConfigs)
    for (int fused = 0; fused < 2; ++fused)
      for (int depth = 1; depth <= 5; ++depth) s[i++] = layout_of(*c, depth, fused != 0).size;
  return s;
}();

// The depth in "...<prefix>ILi<n>E..." (the struct's first template argument), 0 when absent.
int depth_after(std::string_view name, std::string_view prefix) {
  const size_t at = name.find(prefix);
  if (at == std::string_view::npos) return 0;
  const size_t d = at + prefix.size();
  if (d + 1 >= name.size() || name[d] < '1' || name[d] > '5' || name[d + 1] != 'E') return 0;
  return name[d] - '0';
}

void zero(char* bytes, size_t from, size_t to) {
  if (to > from) std::memset(bytes + from, 0, to - from);
}

}  // namespace

bool may_be_tensor_list(size_t size) { return std::find(kSizes.begin(), kSizes.end(), size) != kSizes.end(); }

bool zero_unused_tensor_list_entries(std::string_view function_name, uint32_t grid_x, char* bytes, size_t size) {
  if (!may_be_tensor_list(size) || function_name.find("multi_tensor_apply_kernel") == std::string_view::npos)
    return false;
  // The fused struct's name ends in the plain one's: ask for it first.
  bool fused = true;
  int depth = depth_after(function_name, "FusedOptimizerTensorListMetadataILi");
  if (depth == 0) {
    fused = false;
    depth = depth_after(function_name, "TensorListMetadataILi");
  }
  if (depth == 0) return false;
  for (const Config* c : kConfigs) {
    const Layout l = layout_of(*c, depth, fused);
    if (l.size != size) continue;
    const size_t used_blocks = std::min<size_t>(grid_x, l.blocks);
    size_t used_tensors = 0;
    for (size_t b = 0; b < used_blocks; ++b) {
      size_t t = static_cast<uint8_t>(bytes[l.block_to_tensor + b * l.index_bytes]);
      if (l.index_bytes == 2) t |= size_t{static_cast<uint8_t>(bytes[l.block_to_tensor + b * 2 + 1])} << 8;
      used_tensors = std::max(used_tensors, t + 1);
    }
    used_tensors = std::min(used_tensors, l.tensors);
    for (int list = 0; list < depth; ++list) {
      const size_t row = size_t{8} * static_cast<size_t>(list) * l.tensors;
      zero(bytes, row + 8 * used_tensors, row + 8 * l.tensors);
    }
    zero(bytes, l.numel + 8 * used_tensors, l.numel + 8 * l.tensors);
    if (fused) zero(bytes, l.steps + 8 * std::min(used_tensors, l.step_tensors), l.steps + 8 * l.step_tensors);
    zero(bytes, l.block_to_tensor + used_blocks * l.index_bytes, l.block_to_tensor + l.blocks * l.index_bytes);
    // The padding before block_to_chunk and after start_tensor_this_launch: no one's input.
    zero(bytes, l.block_to_tensor + l.blocks * l.index_bytes, l.block_to_chunk);
    zero(bytes, l.block_to_chunk + 4 * used_blocks, l.block_to_chunk + 4 * l.blocks);
    zero(bytes, l.block_to_chunk + 4 * l.blocks + 4, l.size);
    return true;
  }
  return false;
}

}  // namespace vgpu
