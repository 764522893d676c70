#include "passthrough/traced_slots.h"

#include <array>
#include <cstdint>
#include <utility>

#include "front/driver/query_lines.h"
#include "passthrough/export_tables.h"
#include "passthrough/passthrough.h"

namespace vgpu::pt {
namespace {

using darkapi::TableId;

struct TracedSlot {
  TableId table;
  size_t slot;
  const char* prefix;  // the UUID's first 8 hex digits, as the sim's lines name the table
};
constexpr TracedSlot kTraced[] = {
    {TableId::library_1734dc26, 4, "1734dc26"},
    // cuBLAS calls [13] right after a [4] that succeeded (seen on the sim, 2026-11-26): traced so
    // that the real driver's answer can be read, as the sim refuses it (unknown slot).
    {TableId::library_1734dc26, 13, "1734dc26"},
    {TableId::context_info, 39, "21318c60"},
    {TableId::context_info, 51, "21318c60"},
};
static_assert(std::size(kTraced) == std::tuple_size_v<decltype(ExportTables::traced_real)>);

// The real slot's signature is not known: six integer registers and eight stack words are passed
// on as they came (a slot with fewer arguments ignores the rest; the stack words are the caller's
// frame, readable), and the 64-bit return register comes back; CUresult is its low 32 bits.
using Forwarded = uintptr_t (*)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t,
                                uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);

template <size_t I>
uintptr_t forward(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5, uintptr_t s0,
                  uintptr_t s1, uintptr_t s2, uintptr_t s3, uintptr_t s4, uintptr_t s5, uintptr_t s6, uintptr_t s7) {
  const auto real = reinterpret_cast<Forwarded>(Passthrough::get().export_tables().traced_real[I]);
  const uintptr_t r = real(a0, a1, a2, a3, a4, a5, s0, s1, s2, s3, s4, s5, s6, s7);
  const uintptr_t regs[6] = {a0, a1, a2, a3, a4, a5};
  query_trace::private_slot(kTraced[I].prefix, kTraced[I].slot, regs, static_cast<uint32_t>(r));
  return r;
}

template <size_t... I>
std::array<Forwarded, sizeof...(I)> forwarders(std::index_sequence<I...>) {
  return {&forward<I>...};
}
const std::array<Forwarded, std::size(kTraced)> kForwarders = forwarders(std::make_index_sequence<std::size(kTraced)>());

}  // namespace

size_t real_table_slots(const void* const* real, TableId id) {
  size_t n = darkapi::info(id).slots;
  const auto header = reinterpret_cast<uintptr_t>(real[0]);
  if (header % sizeof(void*) == 0 && header / sizeof(void*) >= 2 && header / sizeof(void*) <= 256)
    n = header / sizeof(void*);
  return n;
}

const void* const* traced_table(TableId id, const void* const* real) {
  if (!query_trace::enabled() || real == nullptr) return nullptr;
  ExportTables& tables = Passthrough::get().export_tables();
  TableCopy* copy = id == TableId::library_1734dc26 ? &tables.library_1734dc26
                    : id == TableId::context_info   ? &tables.context_info
                                                    : nullptr;
  if (copy == nullptr) return nullptr;
  std::call_once(copy->once, [&] {
    const size_t n = real_table_slots(real, id);
    copy->slots.assign(real, real + n);
    for (size_t i = 0; i < std::size(kTraced); ++i)
      if (kTraced[i].table == id && kTraced[i].slot < n && copy->slots[kTraced[i].slot] != nullptr) {
        tables.traced_real[i] = copy->slots[kTraced[i].slot];
        copy->slots[kTraced[i].slot] = reinterpret_cast<const void*>(kForwarders[i]);
      }
  });
  return copy->slots.data();
}

}  // namespace vgpu::pt
