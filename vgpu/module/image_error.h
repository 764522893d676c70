// Inside the parser a malformed image is reported by throwing ImageError; parse_image and the
// other public entry points catch it (and std::exception) and return a ParseError, so no
// exception leaves the library. Throwing keeps the many bounds checks to one line each.
#pragma once

#include "module/image.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace vgpu::module {

class ImageError : public std::runtime_error {
 public:
  ImageError(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

template <class... A>
[[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) {
  throw ImageError(ErrorKind::invalid_image, fmt::format(f, std::forward<A>(a)...));
}

template <class... A>
[[noreturn]] void fail_kind(ErrorKind kind, fmt::format_string<A...> f, A&&... a) {
  throw ImageError(kind, fmt::format(f, std::forward<A>(a)...));
}

// a + b, refusing wrap-around (sizes and offsets come from untrusted headers).
inline uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  if (a > std::numeric_limits<uint64_t>::max() - b) fail("{}: offset overflow", what);
  return a + b;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) fail("{}: size overflow", what);
  return a * b;
}

}  // namespace vgpu::module
