// VGPU_TRACE: watch what a CUDA runtime asks of the driver's private tables.
//
//   VGPU_TRACE=1 ./program
//
// writes one line to stderr for every cuGetExportTable lookup (the UUID, the table vgpu
// served or the error) and for every call of a private slot (table, slot, name, each argument,
// the result), whatever VGPU_LOG_LEVEL says. A new runtime version's new requests show up as
// an unknown UUID or a call of an `unknown` slot, so they are found in minutes. Unset, empty
// or "0": off, and a slot call costs one predictable branch.
//
// The lines themselves are written here, for both backends; the slots the sim backend serves are
// traced by sim/darkapi/served_slots.h (the passthrough forwards the real driver's).
#pragma once

#include <fmt/format.h>

#include <string>
#include <type_traits>

#include "front/export_tables/catalog.h"  // TableId, for the tables' users

namespace vgpu::darkapi {

bool trace_enabled();
// One line on stderr, prefixed "[vgpu trace <pid>:<tid>]", written with a single write().
void trace_line(std::string_view text);
template <class T> std::string trace_value(T v) {
  if constexpr (std::is_pointer_v<T>) {
    return fmt::format("{}", reinterpret_cast<const void*>(v));
  } else if constexpr (std::is_enum_v<T>) {
    return fmt::format("{}", static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_integral_v<T>) {
    return fmt::format("{}", v);
  } else {
    return "?";
  }
}

template <class... A> std::string trace_values(A... a) {
  std::string out;
  ((out += (out.empty() ? "" : ", ") + trace_value(a)), ...);
  return out;
}

}  // namespace vgpu::darkapi
