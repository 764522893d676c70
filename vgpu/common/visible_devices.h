// CUDA_VISIBLE_DEVICES as the real driver reads it, for the sim backend (which GPUs of the
// virtual cluster a process sees, renumbered from 0) and the virtual NVML (which node they are
// on). One parser for both, so the driver and NVML never disagree.
//
// The value is a comma list of entries, each an ordinal of the whole cluster or a GPU UUID
// ("GPU-7667...", any prefix that names one GPU only). As the real driver: an ordinal is read
// like strtoul (leading digits; "1gpu" is 1), surrounding spaces are ignored, the first entry
// that names no GPU (garbage, negative, out of range, an unknown or ambiguous UUID) ends the
// list, and a GPU named twice makes the list empty. Unset: every GPU, in order.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vgpu {

struct VisibleDevices {
  std::vector<int> gpus;  // the cluster's GPUs, in the order the process numbers them
  std::string stopped;    // why the list ended early (empty: every entry was used)
};

// `uuids[i]`: GPU i's UUID as NVML writes it ("GPU-..."); its size is the cluster's GPU count.
VisibleDevices parse_visible_devices(std::string_view text, const std::vector<std::string>& uuids);

// From the environment: nullopt when CUDA_VISIBLE_DEVICES is unset (every GPU). Logs one line
// (warn) when the list ended early, naming `who` (the caller: "sim", "NVML").
std::optional<VisibleDevices> visible_devices_from_env(const std::vector<std::string>& uuids, const char* who);

}  // namespace vgpu
