// The .nv.info sections of a cubin: a sequence of EIATTR records, each
//   u8 format, u8 attribute, then by format: NVAL (1) nothing, BVAL (2) one byte, HVAL (3) a
//   u16 (these three occupy 4 bytes), SVAL (4) a u16 size and that many payload bytes;
// records start 4-byte aligned. `.nv.info` holds per-function records keyed by symbol index
// (register count, frame size); `.nv.info.<kernel>` holds the kernel's own (parameters, limits).
// Attribute numbers and payload layouts were read from nvcc 13 output and agree with public
// EIATTR lists (cuobjdump-like tools).
#pragma once

#include "module/byte_view.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace vgpu::module {

enum Eiattr : uint8_t {
  kEiattrMaxThreads = 0x05,
  kEiattrParamCbank = 0x0a,
  kEiattrReqntid = 0x10,
  kEiattrFrameSize = 0x11,
  kEiattrMinStackSize = 0x12,
  kEiattrKparamInfo = 0x17,
  kEiattrCbankParamSize = 0x19,
  kEiattrMaxregCount = 0x1b,
  kEiattrMaxStackSize = 0x23,
  kEiattrRegcount = 0x2f,
  kEiattrCtaPerCluster = 0x3d,
  kEiattrKparamInfoV2 = 0x45,
  kEiattrNumBarriers = 0x4c,
};

enum EiFormat : uint8_t { kEifmtNval = 1, kEifmtBval = 2, kEifmtHval = 3, kEifmtSval = 4 };

struct NvInfoRecord {
  uint8_t format = 0;
  uint8_t attribute = 0;
  uint16_t value = 0;            // BVAL/HVAL
  ByteView payload;              // SVAL
};

// Splits a .nv.info section into records; throws ImageError if one runs past the end.
std::vector<NvInfoRecord> read_nv_info(const ByteView& section);

struct KernelParam {
  uint32_t ordinal = 0;
  uint32_t offset = 0;
  uint32_t size = 0;
};

// What a kernel's own .nv.info.<name> says.
struct KernelAttributes {
  std::vector<KernelParam> params;         // as recorded (any order)
  std::optional<uint32_t> param_bytes;     // EIATTR_CBANK_PARAM_SIZE
  std::optional<uint32_t> param_cbank_size;  // size half of EIATTR_PARAM_CBANK
  std::optional<int> max_registers;        // EIATTR_MAXREG_COUNT
  std::array<uint32_t, 3> max_ntid{}, req_ntid{}, cluster_dims{};
  uint32_t barriers = 0;
};
KernelAttributes read_kernel_attributes(const ByteView& section);

// Per-function values of the module-wide .nv.info, keyed by symbol index.
struct FunctionAttributes {
  std::optional<int> registers;
  uint32_t frame_bytes = 0;
  uint32_t min_stack_bytes = 0;
  uint32_t max_stack_bytes = 0;
};
// Fills attrs[symbol index] for every symbol index < attrs.size() the section mentions.
void read_function_attributes(const ByteView& section, std::span<FunctionAttributes> attrs);

}  // namespace vgpu::module
