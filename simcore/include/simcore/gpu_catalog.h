// The catalog of GPU models a virtual cluster can be made of: the published figures of each
// model and what a real device of that model answers to every cuDeviceGetAttribute query.
// The catalog is immutable and built once on first use; every function here is thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "simcore/cluster_spec.h"

namespace simcore {

// Every model, in catalog order (H100-SXM-80GB first: the default).
std::span<const GpuModel> gpu_catalog();

// Looks a model up by catalog id, alias ("H100", "a100", "B200-180GB") or the name the driver
// reports ("NVIDIA H200"); case-insensitive, '_' and ' ' count as '-'. nullptr when unknown.
const GpuModel* find_gpu_model(std::string_view id_or_alias);

// "H100-SXM-80GB, H200-141GB, A100-SXM-80GB, B200": for error messages.
std::string known_gpu_models();

// ---- CUdevice_attribute ---------------------------------------------------------------------
// The list is the toolkit's cuda.h's, as the plain-number table generated from it
// (simcore/cluster/cu_device_attributes.inc, checked against cuda.h by a test): one entry per
// value in enum order, under the name cuda.h does not mark as a deprecated alias.
struct CuAttribute {
  int value;
  const char* name;  // "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"
};
std::span<const CuAttribute> cu_device_attributes();

// The value of a name, with or without the "CU_DEVICE_ATTRIBUTE_" prefix, deprecated aliases
// included (e.g. "SHARED_MEMORY_PER_BLOCK" is 8).
std::optional<int> cu_device_attribute_value(std::string_view name);
// The name of a value, or nullptr when cuda.h has none.
const char* cu_device_attribute_name(int value);

// Attributes whose answer differs between two devices of the same model (PCI bus/device/domain,
// board group, host NUMA node): the catalog leaves them out of GpuModel::attributes and the
// driver answers them per virtual device.
bool is_per_device_attribute(int value);

}  // namespace simcore
