// XXH64, the hash whose low 32 bits a Zstandard frame may carry as its content checksum.
#pragma once

#include <cstdint>
#include <span>

namespace vgpu::module {

uint64_t xxhash64(std::span<const uint8_t> data, uint64_t seed = 0);

}  // namespace vgpu::module
