// The copies of the real driver's private tables that cuGetExportTable hands out
// (export_tables.cpp says which and why), held by the backend's root (passthrough.h).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include "front/export_tables/catalog.h"

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
  // The real driver's 6bd5fb6c[2] (the primary context of a GPU, not made active), which
  // VGPU_LAZY_CONTEXTS answers the first virtual device of each GPU with.
  const void* real_primary_context = nullptr;
  // Only with VGPU_LAZY_CONTEXTS (context_slots.h): copies whose slots translate stub contexts,
  // by table id.
  std::array<TableCopy, darkapi::kTableCount> with_contexts;
  std::atomic<size_t> next_trampoline{0};  // the next free one (front/export_tables/register_trampolines.h)
};

}  // namespace vgpu::pt
