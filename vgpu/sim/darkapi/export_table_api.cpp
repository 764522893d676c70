// cuGetExportTable: the private tables by UUID (catalog.h). Served before cuInit too, as the
// real driver does (cudart fetches one before it initializes the driver).
//
// Measured on a 580 driver: an unknown UUID, a null UUID or a null out-pointer all give
// CUDA_ERROR_INVALID_VALUE; an unknown UUID also sets *ppExportTable to null.
//
// vgpu's own clock table (vgpu_clock_table.h) and the NCCL plugin's contract table
// (contracts/nccl_plugin.h) are answered first: they are no catalogued tables.
#include <cstring>

#include "common/log.h"
#include "front/export_tables/catalog.h"
#include "sim/darkapi/served_tables.h"
#include "front/export_tables/trace.h"
#include "contracts/vgpu_clock_table.h"
#include "front/driver/cuda_api.h"
#include "sim/core/virtual_clock.h"
#include "front/nccl/nccl_plugin_client.h"

using namespace vgpu::darkapi;

VGPU_EXPORT CUresult CUDAAPI cuGetExportTable(const void** ppExportTable,
                                              const CUuuid* pExportTableId) {
  VGPU_CALL_SCOPE();
  if (ppExportTable == nullptr || pExportTableId == nullptr) {
    vgpu::log::warn("cuGetExportTable: null {}", ppExportTable == nullptr ? "ppExportTable"
                                                                          : "pExportTableId");
    if (trace_enabled()) trace_line("cuGetExportTable(null argument) -> 1");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (serve_vgpu_clock_table(pExportTableId, ppExportTable)) return CUDA_SUCCESS;
  if (vgpu::contracts::serve_nccl_contract_table(pExportTableId, ppExportTable)) return CUDA_SUCCESS;
  uint8_t bytes[16];
  std::memcpy(bytes, pExportTableId->bytes, sizeof bytes);
  const TableInfo* table = find_table(*pExportTableId);
  if (table == nullptr) {
    *ppExportTable = nullptr;
    const std::string id = uuid_text(bytes);
    vgpu::log::once(vgpu::log::Level::warn, "cuGetExportTable " + id,
                    fmt::format("cuGetExportTable: unknown private table {}: returning "
                                "CUDA_ERROR_INVALID_VALUE",
                                id));
    if (trace_enabled()) trace_line(fmt::format("cuGetExportTable({}) unknown -> 1", id));
    return CUDA_ERROR_INVALID_VALUE;
  }
  *ppExportTable = ServedTables::instance().table(table->id);
  if (trace_enabled())
    trace_line(fmt::format("cuGetExportTable({}) {} ({} slots) at {} -> 0", uuid_text(bytes),
                           table->name, table->slots, *ppExportTable));
  return CUDA_SUCCESS;
}
