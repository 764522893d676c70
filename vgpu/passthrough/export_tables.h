// The copies of the real driver's private tables that cuGetExportTable hands out
// (export_tables.cpp says which and why), held by the backend's root (passthrough.h).
#pragma once

#include <array>
#include <mutex>
#include <vector>

namespace vgpu::pt {

// A copy of a real table with some slots replaced; built once, never freed (runtimes keep
// the pointer, and its address is part of the hash).
struct TableCopy {
  std::once_flag once;
  std::vector<const void*> slots;
};

struct ExportTables {
  TableCopy cudart;     // cudart_interface
  TableCopy integrity;  // integrity_check
  // Only with VGPU_QUERY_TRACE (traced_slots.h): copies whose guessed slots are logged, and the
  // real slots those forward to.
  TableCopy library_1734dc26, context_info;
  std::array<const void*, 4> traced_real{};
};

}  // namespace vgpu::pt
