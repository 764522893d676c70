// The integrity_check table's slot 1: integrity.h's hash over the tables vgpu serves and the
// virtual devices vgpu reports, computed for the calling thread.
#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "front/export_tables/integrity.h"
#include "sim/darkapi/served_tables.h"
#include "sim/darkapi/slots.h"

namespace vgpu::darkapi {
namespace {

// Exactly what cuDeviceGetUuid and cuDeviceGetAttribute(PCI_*) report for each device.
CUresult device_identities(const DriverState& d, std::vector<DeviceIdentity>* out) {
  for (int i = 0; i < d.device_count(); ++i) {
    const Device* dev = d.device(i);
    DeviceIdentity id;
    static_assert(sizeof(id.uuid) == sizeof(dev->uuid().bytes));
    std::memcpy(id.uuid.data(), dev->uuid().bytes, id.uuid.size());
    int domain = 0, bus = 0, device = 0;
    if (dev->attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, &domain) != CUDA_SUCCESS ||
        dev->attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, &bus) != CUDA_SUCCESS ||
        dev->attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, &device) != CUDA_SUCCESS)
      return CUDA_ERROR_INVALID_DEVICE;
    id.pci_domain = domain;
    id.pci_bus = bus;
    id.pci_device = device;
    out->push_back(id);
  }
  return CUDA_SUCCESS;
}

}  // namespace

namespace slots {

CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ServedTables& tables = ServedTables::instance();
  IntegrityRecord record;
  record.version = version;
  record.unix_seconds = unix_seconds;
  std::vector<DeviceIdentity> devices;
  if (version % 10 >= 2) {  // the others are constants (integrity.h)
    const DriverState* d = DriverState::get();
    if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    int driver_version = 0;
    cuDriverGetVersion(&driver_version);
    record.driver_version = static_cast<uint32_t>(driver_version);
    record.process = static_cast<uint32_t>(getpid());
    record.thread = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(
        reinterpret_cast<void*>(pthread_self())));
    record.cudart_table = tables.table(TableId::cudart_interface);
    record.integrity_table = tables.table(TableId::integrity_check);
    record.function = tables.table(TableId::integrity_check)[1];
    if (CUresult r = device_identities(*d, &devices); r != CUDA_SUCCESS) return r;
  }
  const IntegrityDigest digest = integrity_digest(record, devices);
  out[0] = digest[0];
  out[1] = digest[1];
  return CUDA_SUCCESS;
}

}  // namespace slots
}  // namespace vgpu::darkapi
