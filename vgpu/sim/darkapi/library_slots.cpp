// The library_1734dc26 table's slot 4, which the CUDA runtime inside cuBLAS/cuBLASLt calls before
// some of its cuLibraryLoadData calls. What it computes is not known. What an H200 answered under
// the passthrough (driver 580.159.04, 2026-11-26, VGPU_QUERY_TRACE; tests/gpu/probe/cublaslt_queries),
// four calls of a GPT-2 step's GEMMs:
//   args=p,p,1,12,p,0 -> 0 out=[a0:p,p a1:p,p a4:0,0]      (also with 15 and 30 as the 4th)
//   args=p,p,p,p,p,X  -> 0 out=[a0:p,p a1:p,p a2:<this table> ...]
// a0 and a1 are addresses in every call, the rest differ from call to call (a2 once held the
// table itself: left over in its register, not an argument), and the sim sees the caller hand
// in a0 pointing at two zero words and a1 at a zero word then an address: the real slot returns
// success and writes an address into both words at a0 and the first word at a1. The sim does
// the same with the address of a zeroed block it keeps for the process (what the addresses point
// at in the real driver was not traced), touches nothing else, and logs every call.
#include <array>
#include <cstdint>

#include "common/log.h"
#include "front/driver/query_lines.h"
#include "sim/darkapi/slots.h"

namespace vgpu::darkapi::slots {
namespace {

// Below this an argument is a small number, not an address (the query trace's rule too).
constexpr uintptr_t kLowestAddress = 0x10000;

// The block the written addresses point at: zeroed, 8-byte aligned, never freed (the caller may
// keep the addresses for the life of the process), the same for every call.
void* zero_block() {
  alignas(64) static std::array<uint64_t, 512> block{};
  return block.data();
}

}  // namespace

uint32_t library_slot4(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5) {
  const uintptr_t regs[6] = {a0, a1, a2, a3, a4, a5};
  log::debug("1734dc26[4] asked ({:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x})", a0, a1, a2, a3, a4, a5);
  if (a0 < kLowestAddress || a1 < kLowestAddress) {
    // Never seen: every traced call passed two addresses. Refused as an unknown slot is.
    log::warn("1734dc26[4]: first two arguments {:#x}, {:#x} are not addresses: CUDA_ERROR_INVALID_VALUE", a0, a1);
    if (query_trace::enabled()) query_trace::private_slot("1734dc26", 4, regs, CUDA_ERROR_INVALID_VALUE);
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* const block = zero_block();
  auto* const out0 = reinterpret_cast<void**>(a0);
  out0[0] = block;
  out0[1] = block;
  reinterpret_cast<void**>(a1)[0] = block;
  if (query_trace::enabled()) query_trace::private_slot("1734dc26", 4, regs, 0);
  return 0;
}

}  // namespace vgpu::darkapi::slots
