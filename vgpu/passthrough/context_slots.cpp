#include "passthrough/context_slots.h"

#include <cstdint>
#include <mutex>

#include "common/log.h"
#include "common/settings.h"
#include "front/export_tables/register_trampolines.h"
#include "passthrough/context_stubs.h"
#include "passthrough/export_tables.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/traced_slots.h"

// The passthrough's rewrite (register_trampolines.h): a stub in an argument register becomes its
// real context, made now.
extern "C" void vgpu_trampoline_rewrite(uintptr_t* regs) {
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
  if (i >= darkapi::kRegisterTrampolines) {
    log::once(log::Level::warn, "slot trampolines",
              "passthrough: more private table slots than trampolines; the rest take no stub contexts");
    return nullptr;
  }
  return darkapi::register_trampoline(i, real);
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
