// A Zstandard (RFC 8878) decoder for fat binary entries flagged 0x8000: nvcc 13 compresses PTX
// this way by default, and every entry with -Xfatbin -compress-all or --compress-mode=size.
// Written for untrusted input: every read is bounds-checked and the output never grows past the
// caller's limit. Dictionaries are not supported (nvcc does not use them).
#pragma once

#include "module/byte_buffer.h"

#include <cstdint>
#include <span>
#include <vector>

namespace vgpu::module {

// Decodes every frame in `src` (skippable frames are skipped) and returns the concatenated
// content. Throws ImageError if the data is malformed, uses a dictionary, fails its checksum,
// or would produce more than `max_output` bytes.
ByteBuffer zstd_decompress(std::span<const uint8_t> src, uint64_t max_output);

}  // namespace vgpu::module
