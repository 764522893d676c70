#include "front/export_tables/register_trampolines.h"

extern "C" {
uintptr_t vgpu_trampoline_watch_base = 0;
uintptr_t vgpu_trampoline_watch_span = 0;
}

// The trampolines: entry i (16 bytes apart from vgpu_slot_trampolines) loads i into r11 and goes
// to the common part. r10 and r11 are the only registers touched on the way to the real slot:
// neither carries an argument in the System V calling convention (r10 is the static chain, which
// C and C++ functions do not take). When an argument register holds a stub, every register an
// argument or a variadic call's vector count can be in (rdi, rsi, rdx, rcx, r8, r9, rax,
// xmm0-7) is saved around the call to vgpu_trampoline_rewrite, which rewrites the six integer
// ones in place.
extern "C" {
__attribute__((visibility("hidden"))) const void* vgpu_slot_targets[vgpu::darkapi::kRegisterTrampolines];
}

// clang-format off
asm(R"(
  .text
  .p2align 4
  .globl vgpu_slot_trampolines
  .hidden vgpu_slot_trampolines
  .type vgpu_slot_trampolines, @function
vgpu_slot_trampolines:
  .set vgpu_slot_index, 0
  .rept 512
  endbr64
  movl $vgpu_slot_index, %r11d
  jmp vgpu_slot_common
  .p2align 4
  .set vgpu_slot_index, vgpu_slot_index + 1
  .endr
  .size vgpu_slot_trampolines, . - vgpu_slot_trampolines

  .p2align 4
  .type vgpu_slot_common, @function
vgpu_slot_common:
  .irp reg, rdi, rsi, rdx, rcx, r8, r9
  mov %\reg, %r10
  sub vgpu_trampoline_watch_base(%rip), %r10
  cmp vgpu_trampoline_watch_span(%rip), %r10
  jb 1f
  .endr
  lea vgpu_slot_targets(%rip), %r10
  jmp *(%r10,%r11,8)
1:
  push %rbp
  mov %rsp, %rbp
  sub $192, %rsp
  and $-16, %rsp
  mov %rdi, 0(%rsp)
  mov %rsi, 8(%rsp)
  mov %rdx, 16(%rsp)
  mov %rcx, 24(%rsp)
  mov %r8, 32(%rsp)
  mov %r9, 40(%rsp)
  mov %rax, 48(%rsp)
  mov %r11, 56(%rsp)
  movdqa %xmm0, 64(%rsp)
  movdqa %xmm1, 80(%rsp)
  movdqa %xmm2, 96(%rsp)
  movdqa %xmm3, 112(%rsp)
  movdqa %xmm4, 128(%rsp)
  movdqa %xmm5, 144(%rsp)
  movdqa %xmm6, 160(%rsp)
  movdqa %xmm7, 176(%rsp)
  mov %rsp, %rdi
  call vgpu_trampoline_rewrite
  mov 0(%rsp), %rdi
  mov 8(%rsp), %rsi
  mov 16(%rsp), %rdx
  mov 24(%rsp), %rcx
  mov 32(%rsp), %r8
  mov 40(%rsp), %r9
  mov 48(%rsp), %rax
  mov 56(%rsp), %r11
  movdqa 64(%rsp), %xmm0
  movdqa 80(%rsp), %xmm1
  movdqa 96(%rsp), %xmm2
  movdqa 112(%rsp), %xmm3
  movdqa 128(%rsp), %xmm4
  movdqa 144(%rsp), %xmm5
  movdqa 160(%rsp), %xmm6
  movdqa 176(%rsp), %xmm7
  mov %rbp, %rsp
  pop %rbp
  lea vgpu_slot_targets(%rip), %r10
  jmp *(%r10,%r11,8)
  .size vgpu_slot_common, . - vgpu_slot_common
  )");
// clang-format on

extern "C" void vgpu_slot_trampolines();


extern "C" void vgpu_slot_trampolines();

namespace vgpu::darkapi {

const void* register_trampoline(size_t index, const void* target) {
  if (index >= kRegisterTrampolines) return nullptr;
  vgpu_slot_targets[index] = target;
  return reinterpret_cast<const char*>(&vgpu_slot_trampolines) + 16 * index;
}

}  // namespace vgpu::darkapi
