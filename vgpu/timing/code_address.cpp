// describe_code (see code_address.h).
#include "timing/code_address.h"

#include <dlfcn.h>

#include <cstring>

namespace vgpu::timing {

std::optional<CodeAddress> describe_code(const void* pc, bool is_return) {
  const auto* at = static_cast<const char*>(pc) - (is_return ? 1 : 0);
  Dl_info info{};
  if (pc == nullptr || ::dladdr(at, &info) == 0 || info.dli_fname == nullptr) return std::nullopt;
  CodeAddress c;
  const char* base = std::strrchr(info.dli_fname, '/');
  c.library = base != nullptr ? base + 1 : info.dli_fname;
  c.offset = reinterpret_cast<std::uintptr_t>(at) - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  if (info.dli_sname != nullptr) {
    c.symbol = info.dli_sname;
    c.symbol_offset = reinterpret_cast<std::uintptr_t>(at) - reinterpret_cast<std::uintptr_t>(info.dli_saddr);
  }
  return c;
}

}  // namespace vgpu::timing
