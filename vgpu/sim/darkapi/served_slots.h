// The slots of the private tables the sim backend serves: what each slot is (its name and
// parameters, for VGPU_TRACE lines), the wrapper that traces every call of one, and the stubs of
// slots whose meaning is unknown. (The passthrough serves the real driver's slots instead; the
// trace lines of both are written by front/export_tables/trace.h.)
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "front/export_tables/catalog.h"
#include "front/export_tables/trace.h"

namespace vgpu::darkapi {

// What vgpu puts in one slot of a table it serves.
enum class SlotKind : uint8_t {
  size_header,  // slot 0 of a table with a header
  ours,         // a function of vgpu's
  unknown,      // meaning unknown: a function that logs table+slot and returns an error
                // (the passthrough backend will forward these to the real driver's slot)
  absent,       // the real driver leaves this slot null (cudart may test for it): so do we
};

struct SlotImpl {
  TableId table;
  uint16_t slot;
  SlotKind kind;       // ours or absent
  const char* name;    // what the slot does, e.g. "primary_context"
  const char* params;  // its parameter names, comma-separated, for VGPU_TRACE lines
  const void* fn;      // kind == ours: the (traced) function
};

// Every slot whose meaning vgpu knows: implemented ones and measured-null ones. Any slot of a
// catalogued table not listed here is `unknown`.
std::span<const SlotImpl> slot_impls();
const SlotImpl* find_impl(TableId table, size_t slot);

// "context_local_storage[2] get(value=0x1, ctx=(nil), key=0x2) -> 400"
void trace_slot_call(TableId table, size_t slot, std::string_view args, std::string_view result);

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
