// cuGetExportTable under the passthrough backend. The real driver's private tables are handed
// out as they are, except the two the runtime's integrity hash covers (cudart_interface and
// integrity_check): vgpu hands out copies of those, whose slots are the real driver's except
//  - cudart_interface slot 2, the primary context of a device: the virtual device's (under
//    VGPU_LAZY_CONTEXTS a handle whose real context is made when first used), and
//  - integrity_check slot 1: the hash over vgpu's copies and vgpu's virtual devices
//    (darkapi/integrity.h), which is what the runtime recomputes and compares.
// shared/reference/dark-api-observations.md records that exactly this runs PyTorch, cuBLAS,
// Triton and NCCL on a real H100.
#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "front/device/device_registry.h"
#include "front/export_tables/catalog.h"
#include "front/export_tables/integrity.h"
#include "front/export_tables/trace.h"
#include "contracts/vgpu_clock_table.h"
#include "front/driver/cuda_api.h"
#include "front/nccl/nccl_plugin_client.h"
#include "passthrough/context_slots.h"
#include "passthrough/export_tables.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/traced_slots.h"

namespace vgpu::pt {
namespace {

using darkapi::TableId;

CUresult primary_context_slot(CUcontext* out, CUdevice device) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s = PassState::get();
  if (s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  using RealSlot = CUresult (*)(CUcontext*, CUdevice);
  const auto real_slot = reinterpret_cast<RealSlot>(Passthrough::get().export_tables().real_primary_context);
  const CUresult r = s->primary_handle(device, out, real_slot);
  if (darkapi::trace_enabled())
    darkapi::trace_line(fmt::format("6bd5fb6c[2] primary_context(device={}) -> {} ({})", device,
                                    static_cast<int>(r), static_cast<void*>(*out)));
  return r;
}

CUresult integrity_slot(uint32_t version, uint64_t unix_seconds, uint64_t* out);

const void* const* copy_of(TableCopy& copy, const void* const* real, TableId id) {
  std::call_once(copy.once, [&] {
    const size_t n = real_table_slots(real, id);
    copy.slots.assign(real, real + n);
    if (id == TableId::cudart_interface && n > 2) {
      Passthrough::get().export_tables().real_primary_context = copy.slots[2];
      copy.slots[2] = reinterpret_cast<const void*>(&primary_context_slot);
    }
    if (id == TableId::integrity_check && n > 1)
      copy.slots[1] = reinterpret_cast<const void*>(&integrity_slot);
  });
  return copy.slots.data();
}

CUresult integrity_slot(uint32_t version, uint64_t unix_seconds, uint64_t* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  darkapi::IntegrityRecord record;
  record.version = version;
  record.unix_seconds = unix_seconds;
  std::vector<darkapi::DeviceIdentity> devices;
  if (version % 10 >= 2) {  // the others are constants (integrity.h)
    const PassState* s = PassState::get();
    if (s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    record.driver_version = static_cast<uint32_t>(backend_driver_version());
    record.process = static_cast<uint32_t>(getpid());
    record.thread = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(reinterpret_cast<void*>(pthread_self())));
    const ExportTables& tables = Passthrough::get().export_tables();
    record.cudart_table = tables.cudart.slots.data();
    record.integrity_table = tables.integrity.slots.data();
    record.function = tables.integrity.slots.size() > 1 ? tables.integrity.slots[1] : nullptr;
    for (int i = 0; i < s->device_count(); ++i) {
      const Device* d = s->device(i);
      darkapi::DeviceIdentity id;
      std::memcpy(id.uuid.data(), d->uuid().bytes, id.uuid.size());
      id.pci_domain = d->pci().domain;
      id.pci_bus = d->pci().bus;
      id.pci_device = d->pci().device;
      devices.push_back(id);
    }
  }
  const darkapi::IntegrityDigest digest = darkapi::integrity_digest(record, devices);
  out[0] = digest[0];
  out[1] = digest[1];
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace vgpu::pt

VGPU_EXPORT CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid* id) {
  using namespace vgpu;
  if (darkapi::serve_vgpu_clock_table(id, table)) return CUDA_SUCCESS;  // vgpu's own, first
  if (contracts::serve_nccl_contract_table(id, table)) return CUDA_SUCCESS;  // the NCCL plugin's
  if (table == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto real_get = VGPU_REAL("cuGetExportTable", CUresult (*)(const void**, const CUuuid*));
  if (real_get == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const void* real = nullptr;
  const CUresult r = real_get(&real, id);
  uint8_t bytes[16];
  std::memcpy(bytes, id->bytes, sizeof bytes);
  if (r != CUDA_SUCCESS || real == nullptr) {
    if (darkapi::trace_enabled())
      darkapi::trace_line(fmt::format("cuGetExportTable({}) real -> {}", darkapi::uuid_text(bytes), static_cast<int>(r)));
    *table = real;
    return r;
  }
  const darkapi::TableInfo* info = darkapi::find_table(*id);
  const auto* real_slots = static_cast<const void* const*>(real);
  pt::ExportTables& copies = pt::Passthrough::get().export_tables();
  if (info != nullptr && info->id == darkapi::TableId::cudart_interface)
    *table = pt::copy_of(copies.cudart, real_slots, info->id);
  else if (info != nullptr && info->id == darkapi::TableId::integrity_check)
    *table = pt::copy_of(copies.integrity, real_slots, info->id);
  else if (const void* const* traced = info ? pt::traced_table(info->id, real_slots) : nullptr)
    *table = traced;
  else
    *table = real;
  if (info != nullptr)  // VGPU_LAZY_CONTEXTS: the slots that may be given a stub context
    if (const void* const* t = pt::context_translating_table(info->id, static_cast<const void* const*>(*table)))
      *table = t;
  if (darkapi::trace_enabled())
    darkapi::trace_line(fmt::format("cuGetExportTable({}) {} -> 0 ({})", darkapi::uuid_text(bytes),
                                    info ? info->name : "unknown to vgpu",
                                    *table == real ? "the real table" : "vgpu's copy"));
  return CUDA_SUCCESS;
}

