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
// Every slot vgpu serves goes through Traced<>::call (below) or an unknown-slot stub, so the
// tracing lives here once and not in each slot.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "front/export_tables/catalog.h"

namespace vgpu::darkapi {

bool trace_enabled();
// One line on stderr, prefixed "[vgpu trace <pid>:<tid>]", written with a single write().
void trace_line(std::string_view text);
// "context_local_storage[2] get(value=0x1, ctx=(nil), key=0x2) -> 400"
void trace_slot_call(TableId table, size_t slot, std::string_view args, std::string_view result);

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

// The function a table holds for slot S of table T whose implementation is Fn: Fn itself
// plus, when VGPU_TRACE is on, a line with the arguments and the result.
template <TableId T, size_t S, auto Fn> struct Traced;
template <TableId T, size_t S, class R, class... A, R (*Fn)(A...)> struct Traced<T, S, Fn> {
  static R call(A... a) {
    if (!trace_enabled()) return Fn(a...);
    const std::string args = trace_values(a...);
    if constexpr (std::is_void_v<R>) {
      Fn(a...);
      trace_slot_call(T, S, args, "void");
    } else {
      R r = Fn(a...);
      trace_slot_call(T, S, args, trace_value(r));
      return r;
    }
  }
};

// Slots of unknown meaning: log table+slot (once at warn level, every call when tracing) and
// return CUDA_ERROR_NOT_SUPPORTED. The first six integer/pointer arguments, in registers on
// x86-64 whatever the real signature, are shown in the trace line.
CUresult unknown_slot_called(TableId table, size_t slot, const uintptr_t (&regs)[6]);

template <TableId T, size_t S>
CUresult unknown_slot(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4,
                      uintptr_t a5) {
  const uintptr_t regs[6] = {a0, a1, a2, a3, a4, a5};
  return unknown_slot_called(T, S, regs);
}

using UnknownSlotFn = CUresult (*)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t,
                                   uintptr_t);

// The stubs for every slot index of table T (one distinct function per slot, so that the log
// can name it).
template <TableId T, size_t... S>
constexpr std::array<UnknownSlotFn, sizeof...(S)> unknown_stubs(std::index_sequence<S...>) {
  return {&unknown_slot<T, S>...};
}

}  // namespace vgpu::darkapi
