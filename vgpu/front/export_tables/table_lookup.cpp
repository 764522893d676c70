// Finding a catalogued table by the UUID a caller passes, and naming UUIDs in log lines: shared
// by both backends' cuGetExportTable.
#include <fmt/format.h>

#include <cstring>

#include "front/export_tables/catalog.h"

namespace vgpu::darkapi {

const TableInfo* find_table(const CUuuid& id) {
  for (const TableInfo& t : kTables)
    if (std::memcmp(t.uuid.data(), id.bytes, t.uuid.size()) == 0) return &t;
  return nullptr;
}

std::string uuid_text(const std::array<uint8_t, 16>& b) {
  return fmt::format("{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
                     "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                     b[12], b[13], b[14], b[15]);
}

std::string uuid_text(const uint8_t (&bytes)[16]) {
  std::array<uint8_t, 16> b;
  std::memcpy(b.data(), bytes, b.size());
  return uuid_text(b);
}

}  // namespace vgpu::darkapi
