#include "front/export_tables/integrity.h"

#include <cstring>

#include "front/export_tables/md2.h"

namespace vgpu::darkapi {
namespace {

// Writes `v` at `*at` in native byte order and advances.
template <class T> void put(uint8_t*& at, const T& v) {
  std::memcpy(at, &v, sizeof(T));
  at += sizeof(T);
}

// Versions ending in 0 and 1 (e.g. 13000, 13001) get these, whatever the inputs.
constexpr IntegrityDigest kVersionEnds0 = {0x3341181c03cb675cull, 0x8ed383aa1f4cd1e8ull};
constexpr IntegrityDigest kVersionEnds1 = {0x1841181c03cb675cull, 0x8ed383aa1f4cd1e8ull};

}  // namespace

const std::array<uint8_t, 16> kIntegrityKey = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                               0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

std::array<uint8_t, kIntegrityRecordBytes> pack(const IntegrityRecord& r) {
  std::array<uint8_t, kIntegrityRecordBytes> out{};
  uint8_t* at = out.data();
  put(at, r.driver_version);
  put(at, r.version);
  put(at, r.process);
  put(at, r.thread);
  put(at, reinterpret_cast<uint64_t>(r.cudart_table));
  put(at, reinterpret_cast<uint64_t>(r.integrity_table));
  put(at, reinterpret_cast<uint64_t>(r.function));
  put(at, r.unix_seconds);
  return out;
}

std::array<uint8_t, kDeviceIdentityBytes> pack(const DeviceIdentity& d) {
  std::array<uint8_t, kDeviceIdentityBytes> out{};
  uint8_t* at = out.data();
  std::memcpy(at, d.uuid.data(), d.uuid.size());
  at += d.uuid.size();
  put(at, d.pci_domain);
  put(at, d.pci_bus);
  put(at, d.pci_device);
  return out;
}

IntegrityDigest integrity_digest(const IntegrityRecord& record,
                                 std::span<const DeviceIdentity> devices) {
  switch (record.version % 10) {
    case 0: return kVersionEnds0;
    case 1: return kVersionEnds1;
    default: break;
  }
  HmacMd2 mac(kIntegrityKey);
  mac.update(pack(record));
  for (const DeviceIdentity& d : devices) mac.update(pack(d));
  const Md2Digest digest = mac.finish();
  IntegrityDigest out;
  std::memcpy(out.data(), digest.data(), digest.size());
  return out;
}

}  // namespace vgpu::darkapi
