// Trampolines in front of private-table slots whose signatures are not known (x86-64 System V).
// A trampoline compares the six integer argument registers with one watched address range (two
// instructions each) and jumps to its target with every register and the stack as they came; when
// one register holds an address in the range, it saves every register an argument can be in (rdi,
// rsi, rdx, rcx, r8, r9, rax for a variadic call's vector count, xmm0-7), calls the rewrite
// function with the six integer ones to change in place, restores them all and jumps. The
// target's return registers and stack arguments are never touched, so the trampoline is invisible
// to a slot of any signature (its own stack frame is gone before the jump).
//
// The passthrough uses it for virtual contexts (passthrough/context_slots.h): the range is its
// stub block, the rewrite swaps a stub for its real context.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// The watched range [base, base + span); span 0 (the start) watches nothing. Read by the
// trampolines without a lock: set it before handing out a table that holds them.
extern uintptr_t vgpu_trampoline_watch_base __attribute__((visibility("hidden")));
extern uintptr_t vgpu_trampoline_watch_span __attribute__((visibility("hidden")));
// Called with the six integer argument registers (rdi, rsi, rdx, rcx, r8, r9) when one is in the
// range; may rewrite any of them. Defined by the user of the trampolines.
void vgpu_trampoline_rewrite(uintptr_t* regs) __attribute__((visibility("hidden")));
}

namespace vgpu::darkapi {

// How many trampolines there are (the `.rept` count in register_trampolines.cpp).
inline constexpr size_t kRegisterTrampolines = 512;

// Trampoline `index` (< kRegisterTrampolines), made to jump to `target`: its address. Each index
// is the caller's to hand out once (the targets are one process-wide array, as the assembly needs
// fixed addresses).
const void* register_trampoline(size_t index, const void* target);

}  // namespace vgpu::darkapi
