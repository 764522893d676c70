// The CUDA runtime's integrity check (private table d4082055, slot 1), as a pure function.
//
// cudart calls the slot as (uint32 version, uint64 unix_seconds, uint64 out[2]) and computes
// the same value itself from what it can see: the driver version, its process and thread, the
// addresses of the tables and of the function the driver handed out, and the driver's device
// list. A mismatch makes every runtime call fail with cudaErrorIntegrityCheckFailed (103).
// So the hash must cover exactly the tables vgpu serves and the devices vgpu reports.
//
// Facts (public clean-room work, ZLUDA's dark_api, confirmed on a real 580 driver; see
// shared/reference/dark-api-observations.md):
//  * version % 10 == 0 or 1: two fixed constants, independent of every input;
//  * otherwise HMAC-MD2 with a fixed 16-byte key over a packed 48-byte record
//      {u32 driver version, u32 version, u32 pid, u32 low half of pthread_self(),
//       cudart table address, integrity table address, integrity function address,
//       u64 unix_seconds}
//    followed, per device in ordinal order, by a packed 28-byte entry
//      {16-byte UUID, i32 PCI domain, i32 PCI bus, i32 PCI device};
//  * the 16-byte digest is returned as two native-endian u64.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace vgpu::darkapi {

struct IntegrityRecord {
  uint32_t driver_version = 0;  // what cuDriverGetVersion reports
  uint32_t version = 0;         // the runtime's argument
  uint32_t process = 0;         // getpid()
  uint32_t thread = 0;          // low 32 bits of the calling thread's pthread_self()
  const void* cudart_table = nullptr;     // the 6bd5fb6c table handed out
  const void* integrity_table = nullptr;  // the d4082055 table handed out
  const void* function = nullptr;         // slot 1 of that table, as handed out
  uint64_t unix_seconds = 0;    // the runtime's argument
};

struct DeviceIdentity {
  std::array<uint8_t, 16> uuid{};
  int32_t pci_domain = 0, pci_bus = 0, pci_device = 0;
};

// Byte layouts the hash covers (native byte order, no padding).
constexpr size_t kIntegrityRecordBytes = 48;
constexpr size_t kDeviceIdentityBytes = 28;
std::array<uint8_t, kIntegrityRecordBytes> pack(const IntegrityRecord& r);
std::array<uint8_t, kDeviceIdentityBytes> pack(const DeviceIdentity& d);

// The HMAC key (the runtime's, fixed).
extern const std::array<uint8_t, 16> kIntegrityKey;

using IntegrityDigest = std::array<uint64_t, 2>;

// The value slot 1 must write for this record and device list.
IntegrityDigest integrity_digest(const IntegrityRecord& record,
                                 std::span<const DeviceIdentity> devices);

}  // namespace vgpu::darkapi
