#include "passthrough/context_slots.h"

#include <cstdint>
#include <mutex>

#include "common/log.h"
#include "common/settings.h"
#include "passthrough/context_stubs.h"
#include "passthrough/export_tables.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/traced_slots.h"

// The trampolines: entry i (16 bytes apart from vgpu_slot_trampolines) loads i into r11 and goes
// to the common part. r10 and r11 are the only registers touched on the way to the real slot:
// neither carries an argument in the System V calling convention (r10 is the static chain, which
// C and C++ functions do not take). When an argument register holds a stub, every register an
// argument or a variadic call's vector count can be in (rdi, rsi, rdx, rcx, r8, r9, rax,
// xmm0-7) is saved around the call to vgpu_translate_slot_registers, which rewrites the six
// integer ones in place.
extern "C" {
__attribute__((visibility("hidden"))) const void* vgpu_slot_targets[vgpu::pt::kSlotTrampolines];
__attribute__((visibility("hidden"))) void vgpu_translate_slot_registers(uintptr_t* regs);
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
  sub vgpu_context_stub_base(%rip), %r10
  cmp vgpu_context_stub_span(%rip), %r10
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
  call vgpu_translate_slot_registers
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

extern "C" void vgpu_translate_slot_registers(uintptr_t* regs) {
  for (int i = 0; i < 6; ++i) {
    auto ctx = reinterpret_cast<CUcontext>(regs[i]);
    if (!vgpu::pt::context_stubs::is_stub(ctx)) continue;
    if (const CUresult r = vgpu::pt::real_context_arg(&ctx); r != CUDA_SUCCESS) {
      // The real driver must not see a stub: it gets no context instead, which it refuses or
      // reads as the current one.
      vgpu::log::warn("passthrough: a private table slot was given virtual device {}'s context, whose real "
                      "context could not be made (error {}): passing none",
                      vgpu::pt::context_stubs::device_of(reinterpret_cast<CUcontext>(regs[i])), static_cast<int>(r));
      ctx = nullptr;
    }
    regs[i] = reinterpret_cast<uintptr_t>(ctx);
  }
}

namespace vgpu::pt {
namespace {

using darkapi::TableId;

bool takes_contexts(TableId id) {
  switch (id) {
    case TableId::context_local_storage:
    case TableId::context_checks:
    case TableId::context_info:
    case TableId::tools_module:
    case TableId::runtime_69a28e9f:
    case TableId::library_1734dc26:
    case TableId::tools_tls:
      return true;
    default:
      return false;
  }
}

// The trampoline that goes to `real`; nullptr when all are taken (the slot is then handed out
// as it is, with one line).
const void* trampoline_to(const void* real) {
  const size_t i = Passthrough::get().export_tables().next_trampoline.fetch_add(1, std::memory_order_relaxed);
  if (i >= kSlotTrampolines) {
    log::once(log::Level::warn, "slot trampolines",
              "passthrough: more private table slots than trampolines; the rest take no stub contexts");
    return nullptr;
  }
  vgpu_slot_targets[i] = real;
  return reinterpret_cast<const char*>(&vgpu_slot_trampolines) + 16 * i;
}

}  // namespace

const void* const* context_translating_table(TableId id, const void* const* real) {
  // By the setting, not by whether stubs exist yet: a table fetched before cuInit is kept by its
  // caller, and a trampoline with no stub block passes every call straight on.
  if (real == nullptr || !takes_contexts(id) || !settings::flag(settings::Id::lazy_contexts)) return nullptr;
  TableCopy& copy = Passthrough::get().export_tables().with_contexts[static_cast<size_t>(id)];
  std::call_once(copy.once, [&] {
    const size_t n = real_table_slots(real, id);
    copy.slots.assign(real, real + n);
    for (size_t i = darkapi::info(id).size_header ? 1 : 0; i < n; ++i) {
      if (copy.slots[i] == nullptr) continue;
      if (const void* t = trampoline_to(copy.slots[i])) copy.slots[i] = t;
    }
  });
  return copy.slots.data();
}

}  // namespace vgpu::pt
