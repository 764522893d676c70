// A launch whose by-value struct carries stack garbage, as PyTorch's elementwise kernels pass
// them, for the tests of signature settling and of the kernel-time database's groups: an element
// count, then entries the host filled only in part (the rest: whatever its stack held).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
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

// A launch of `n` elements whose tail is garbage from `rng` (each word 2^31 or more, as stack
// addresses and random bytes mostly are): the same `rng` state gives the same garbage.
inline Args garbage_args(std::mt19937& rng, uint32_t n) {
  Args a{};
  a.n = n;
  a.dims = 1;
  for (uint32_t& w : a.tail) w = static_cast<uint32_t>(rng()) | 0x80000000u;
  return a;
}

// A fresh database path in the temporary folder, unique to the test process and `tag`.
inline std::string temp_db(const std::string& prefix, const char* tag) {
  auto p = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::string(tag) + "_" + std::to_string(::getpid()) + ".sqlite");
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace vgpu::test_launch
