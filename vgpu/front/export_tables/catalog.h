// The private export tables ("dark API") that cudart 13 (static and shared), cuBLAS and NCCL
// fetch with cuGetExportTable: one row per table, in one place.
//
// A table is an array of pointers. Most start with a size header (slot 0 holds the table's
// byte size, 8 x slot count); the context-local-storage table has none. Every figure below was
// measured on a real 580-series driver (tests/darkapi/data/real_driver_probe_h200_580.txt,
// made by tests/darkapi/real_driver_probe.cpp; shared/reference/dark-api-observations.md):
// slot counts, size headers, and which slots the real driver leaves null. The meaning of
// individual slots comes from public clean-room work (ZLUDA's dark_api) and those measurements;
// see the slot implementations in cudart_slots.cpp, context_local_storage.cpp,
// context_slots.cpp and integrity_slot.cpp.
//
// The measured UUIDs are written as the bytes the runtime passes, in order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "front/driver/cuda_api.h"

namespace vgpu::darkapi {

enum class TableId : uint8_t {
  runtime_f8cff951,       // fetched before cuInit; 3 slots, none called by cudart 13.0
  cudart_interface,       // primary context of a device, fat-binary modules
  tools_callback_hooks,   // buffers the profiler callbacks are switched on through
  tools_tls,              // the calling thread's current context
  context_local_storage,  // per-context key/value store with destructor callbacks
  context_checks,         // called by cudart on start-up; answers "nothing special"
  runtime_69a28e9f,       // called by cudart (slots 19, 21, 24, 25); meaning unknown
  integrity_check,        // the runtime's HMAC-MD2 self-check (integrity.h)
  library_1734dc26,       // requested once by cuBLAS/NCCL; meaning unknown
  context_info,           // requested once by cuBLAS/NCCL; slot 4 is cuCtxGetId
  tools_module,           // requested by cuFFT: slot 7 visits the functions of a module.
                          // Its slot count was not measured (no real driver here; the probe
                          // asks for it): 64 slots, every one but 7 a logging stub, cover the
                          // size check cuFFT makes (more than 7 slots)
};

struct TableInfo {
  TableId id;
  const char* name;
  std::array<uint8_t, 16> uuid;
  uint16_t slots;    // entries, header included
  bool size_header;  // slot 0 holds 8 * slots
};

inline constexpr TableInfo kTables[] = {
    {TableId::runtime_f8cff951, "runtime_f8cff951",
     {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9}, 3, true},
    {TableId::cudart_interface, "cudart_interface",
     {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}, 13, true},
    {TableId::tools_callback_hooks, "tools_callback_hooks",
     {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}, 7, true},
    {TableId::tools_tls, "tools_tls",
     {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc}, 3, true},
    {TableId::context_local_storage, "context_local_storage",
     {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93}, 4, false},
    {TableId::context_checks, "context_checks",
     {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e}, 15, true},
    {TableId::runtime_69a28e9f, "runtime_69a28e9f",
     {0x69, 0xa2, 0x8e, 0x9f, 0x24, 0x49, 0x8b, 0x47, 0xb0, 0x30, 0xc5, 0xda, 0x33, 0x0e, 0xa4, 0xe9}, 34, true},
    {TableId::integrity_check, "integrity_check",
     {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2}, 3, true},
    {TableId::library_1734dc26, "library_1734dc26",
     {0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca}, 17, true},
    {TableId::context_info, "context_info",
     {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2}, 93, true},
    {TableId::tools_module, "tools_module",
     {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e}, 64, true},
};

inline constexpr size_t kTableCount = std::size(kTables);
inline constexpr size_t kMaxSlots = 93;

constexpr const TableInfo& info(TableId id) { return kTables[static_cast<size_t>(id)]; }
static_assert([] {
  for (size_t i = 0; i < kTableCount; ++i)
    if (static_cast<size_t>(kTables[i].id) != i || kTables[i].slots > kMaxSlots) return false;
  return true;
}());

// The catalog row for a UUID the runtime asked for; nullptr when vgpu does not know it.
const TableInfo* find_table(const CUuuid& id);

// "6bd5fb6c-5bf4-e74a-8987-d93912fd9df9": the bytes in order, grouped like a GUID.
std::string uuid_text(const uint8_t (&bytes)[16]);
std::string uuid_text(const std::array<uint8_t, 16>& bytes);


}  // namespace vgpu::darkapi
