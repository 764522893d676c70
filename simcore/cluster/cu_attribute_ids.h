// CUdevice_attribute values by their cuda.h names, as plain integers (simcore::cu_attr::
// CU_DEVICE_ATTRIBUTE_WARP_SIZE == 10): the catalog names attributes as cuda.h does without
// including it. Private to simcore/cluster; the values come from cu_device_attributes.inc.
#pragma once

namespace simcore::cu_attr {

#define VGPU_CU_ATTRIBUTE(name, value) inline constexpr int name = value;
#define VGPU_CU_ATTRIBUTE_ALIAS(alias, name, value) inline constexpr int alias = value;
#include "cu_device_attributes.inc"

}  // namespace simcore::cu_attr
