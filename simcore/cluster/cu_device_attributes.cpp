// Names and values of CUdevice_attribute, from the table generated from the toolkit's cuda.h
// (cu_device_attributes.inc: plain numbers, no CUDA header needed).
#include <algorithm>

#include "cu_attribute_ids.h"
#include "simcore/gpu_catalog.h"

namespace simcore {
namespace {

constexpr CuAttribute kAttributes[] = {
#define VGPU_CU_ATTRIBUTE(name, value) {value, #name},
#include "cu_device_attributes.inc"
};

constexpr CuAttribute kAliases[] = {
#define VGPU_CU_ATTRIBUTE(name, value)
#define VGPU_CU_ATTRIBUTE_ALIAS(alias, name, value) {value, #alias},
#include "cu_device_attributes.inc"
    {0, ""},  // keeps the array non-empty should the table ever have no aliases
};

constexpr std::string_view kPrefix = "CU_DEVICE_ATTRIBUTE_";

bool same_name(std::string_view full, std::string_view asked) {
  if (full == asked) return true;
  return asked.substr(0, kPrefix.size()) != kPrefix && full.substr(kPrefix.size()) == asked;
}

}  // namespace

std::span<const CuAttribute> cu_device_attributes() { return kAttributes; }

std::optional<int> cu_device_attribute_value(std::string_view name) {
  for (const CuAttribute& a : kAttributes)
    if (same_name(a.name, name)) return a.value;
  for (const CuAttribute& a : kAliases)
    if (*a.name && same_name(a.name, name)) return a.value;
  return std::nullopt;
}

const char* cu_device_attribute_name(int value) {
  const auto* it = std::find_if(std::begin(kAttributes), std::end(kAttributes),
                                [value](const CuAttribute& a) { return a.value == value; });
  return it == std::end(kAttributes) ? nullptr : it->name;
}

bool is_per_device_attribute(int value) {
  using namespace cu_attr;
  switch (value) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      return true;
    default:
      return false;
  }
}

}  // namespace simcore
