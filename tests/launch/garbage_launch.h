// A launch whose by-value struct carries stack garbage, as PyTorch's elementwise kernels pass
// them, for the tests of signature settling and of the kernel-time database's groups: an element
// count, then entries the host filled only in part (the rest: whatever its stack held).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "front/launch/launch_signature.h"

namespace vgpu::test_launch {

struct Args {
  uint32_t n;
  uint32_t dims;
  uint32_t tail[10];
};

inline LaunchSignature signature_of(const Args& a, uint32_t grid = 64) {
  const ParamSlot slots[] = {{0, 8}, {8, sizeof(Args)}};
  std::vector<uint8_t> params(8 + sizeof(Args));
  const uint64_t out = 0x7f0000001000;  // a device pointer
  std::memcpy(params.data(), &out, 8);
  std::memcpy(params.data() + 8, &a, sizeof a);
  LaunchShape shape;
  shape.grid = {grid, 1, 1};
  shape.block = {256, 1, 1};
  return build_launch_signature("elementwise_kernel", shape, slots, params,
                                [out](uint64_t v) { return v == out; });
}

}  // namespace vgpu::test_launch
