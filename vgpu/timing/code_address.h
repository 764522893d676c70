// A code address named for a report, as the debugging aids print them (VGPU_HOST_SAMPLES'
// "library!symbol", VGPU_CLOCK_TRACE's "library+0xoffset symbol+0xoffset"): the library holding
// it and the nearest exported symbol, from dladdr. One lookup for both, so that both name a
// return address by the call it returns from (its previous byte: a call as a function's last
// instruction returns to the first byte of the next function).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vgpu::timing {

struct CodeAddress {
  std::string library;             // the file's name without its folder ("" for the program itself)
  std::uintptr_t offset = 0;       // from the library's load address
  std::string symbol;              // the nearest exported symbol, "" if none
  std::uintptr_t symbol_offset = 0;
};

// `pc` named; `is_return`: it is a return address (looked up one byte back, the offsets of that
// byte). Nothing when no loaded object holds it.
std::optional<CodeAddress> describe_code(const void* pc, bool is_return);

}  // namespace vgpu::timing
