// The tables vgpu hands to cuGetExportTable callers: built once from the catalog, never
// changed or freed afterwards (their addresses are part of the integrity hash, and runtimes
// keep the pointers for the life of the process), available before cuInit like the real ones.
//
// build_table() is the one place that turns a catalog row into an array of slots. The
// passthrough backend will call it with the real driver's table: slots vgpu implements (they
// take or return devices and contexts, and the integrity hash, which must cover vgpu's tables
// and virtual devices) are vgpu's; slots of unknown meaning are then forwarded to the real
// driver's function instead of the logging stub; null slots stay null.
#pragma once

#include <span>
#include <vector>

#include "sim/darkapi/served_slots.h"

namespace vgpu::darkapi {

// `real`: the real driver's table for the same UUID, or nullptr (sim backend).
std::vector<const void*> build_table(const TableInfo& table, std::span<const SlotImpl> impls,
                                     const void* const* real);

class ServedTables {
 public:
  static const ServedTables& instance();

  const void* const* table(TableId id) const { return tables_[static_cast<size_t>(id)].data(); }
  // nullptr for a UUID that is not in the catalog.
  const void* const* find(const CUuuid& id) const;

 private:
  ServedTables();
  std::vector<const void*> tables_[kTableCount];
};

}  // namespace vgpu::darkapi
