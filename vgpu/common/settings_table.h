// The settings registry (settings.h) as a table: Markdown for the README (its table of settings
// is generated from this and checked by a test) and JSON for tools that want to check names
// (vgpu-run's tests, scripts).
#pragma once

#include <string>

namespace vgpu::settings {

// One row per setting: variable, type, default, meaning, read by. Ends with a newline.
std::string markdown_table();
// [{"name":..., "type":..., "default":..., "meaning":..., "readers":..., "accepted":..., "reading":...}, ...]
std::string json_table();

}  // namespace vgpu::settings
