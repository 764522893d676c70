#include "visible_devices.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "log.h"

namespace vgpu {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The GPU an entry names, or -1 with *why set.
int gpu_of(std::string_view entry, const std::vector<std::string>& uuids, std::string* why) {
  const int total = static_cast<int>(uuids.size());
  if (entry.starts_with("GPU-")) {
    int found = -1;
    for (int i = 0; i < total; ++i) {
      if (!std::string_view(uuids[i]).starts_with(entry)) continue;
      if (found >= 0) {
        *why = fmt::format("'{}' names more than one GPU", entry);
        return -1;
      }
      found = i;
    }
    if (found < 0) *why = fmt::format("'{}' is no GPU's UUID", entry);
    return found;
  }
  // strtoul-like: the leading digits ("1gpu" is 1); none, or a sign, is no ordinal.
  size_t digits = 0;
  while (digits < entry.size() && std::isdigit(static_cast<unsigned char>(entry[digits]))) ++digits;
  if (digits == 0) {
    *why = fmt::format("'{}' is not an ordinal or a GPU UUID", entry);
    return -1;
  }
  long value = 0;
  for (size_t i = 0; i < digits; ++i) {
    value = value * 10 + (entry[i] - '0');
    if (value >= total) break;  // no overflow: anything this large is out of range
  }
  if (value >= total) {
    *why = fmt::format("'{}' is out of range (the cluster has {} GPUs)", entry, total);
    return -1;
  }
  return static_cast<int>(value);
}

}  // namespace

VisibleDevices parse_visible_devices(std::string_view text, const std::vector<std::string>& uuids) {
  VisibleDevices out;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    const int gpu = gpu_of(entry, uuids, &out.stopped);
    if (gpu < 0) break;
    if (std::find(out.gpus.begin(), out.gpus.end(), gpu) != out.gpus.end()) {
      out.gpus.clear();  // as the real driver: a repeated GPU leaves none visible
      out.stopped = fmt::format("GPU {} is listed twice: no GPU is visible", gpu);
      break;
    }
    out.gpus.push_back(gpu);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::optional<VisibleDevices> visible_devices_from_env(const std::vector<std::string>& uuids, const char* who) {
  const char* text = std::getenv("CUDA_VISIBLE_DEVICES");
  if (text == nullptr) return std::nullopt;
  VisibleDevices v = parse_visible_devices(text, uuids);
  if (!v.stopped.empty())
    log::warn("vgpu {}: CUDA_VISIBLE_DEVICES='{}': {}; {} GPU(s) visible", who, text, v.stopped, v.gpus.size());
  return v;
}

}  // namespace vgpu
