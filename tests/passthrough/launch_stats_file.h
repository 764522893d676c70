// Reading VGPU_LAUNCH_STATS (passthrough/launch_policy.h) in the passthrough's tests: the counts
// the file holds now, by name ("signatures", "launches", "settled", "from_database", "measured").
#pragma once

#include <fstream>
#include <map>
#include <string>

inline std::map<std::string, long> read_launch_stats(const std::string& path) {
  std::map<std::string, long> out;
  std::ifstream f(path);
  std::string field;
  while (f >> field)
    if (auto eq = field.find('='); eq != std::string::npos) out[field.substr(0, eq)] = std::stol(field.substr(eq + 1));
  return out;
}
