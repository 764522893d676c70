#include "sim/darkapi/served_tables.h"

#include <utility>

#include "sim/darkapi/served_slots.h"

namespace vgpu::darkapi {
namespace {

// One logging stub per slot index of table T.
template <TableId T>
inline constexpr auto kStubs = unknown_stubs<T>(std::make_index_sequence<info(T).slots>{});

template <size_t... I>
constexpr std::array<std::span<const UnknownSlotFn>, kTableCount> all_stubs(
    std::index_sequence<I...>) {
  return {std::span<const UnknownSlotFn>(kStubs<static_cast<TableId>(I)>)...};
}
constexpr auto kAllStubs = all_stubs(std::make_index_sequence<kTableCount>{});

}  // namespace

std::vector<const void*> build_table(const TableInfo& table, std::span<const SlotImpl> impls,
                                     const void* const* real) {
  std::vector<const void*> slots(table.slots, nullptr);
  for (size_t i = 0; i < table.slots; ++i) {
    if (i == 0 && table.size_header) {
      slots[i] = reinterpret_cast<const void*>(uintptr_t{table.slots} * sizeof(void*));
    } else if (real != nullptr) {
      slots[i] = real[i];  // replaced below where vgpu has its own
    } else {
      slots[i] = reinterpret_cast<const void*>(kAllStubs[static_cast<size_t>(table.id)][i]);
    }
  }
  for (const SlotImpl& impl : impls) {
    if (impl.table != table.id || impl.slot >= table.slots) continue;
    slots[impl.slot] = impl.kind == SlotKind::ours ? impl.fn : nullptr;
  }
  return slots;
}

ServedTables::ServedTables() {
  for (const TableInfo& t : kTables)
    tables_[static_cast<size_t>(t.id)] = build_table(t, slot_impls(), nullptr);
}

const ServedTables& ServedTables::instance() {
  // Never destroyed: runtimes call through these tables from their own exit handlers.
  static const ServedTables* tables = new ServedTables();
  return *tables;
}

const void* const* ServedTables::find(const CUuuid& id) const {
  const TableInfo* t = find_table(id);
  return t ? table(t->id) : nullptr;
}

}  // namespace vgpu::darkapi
