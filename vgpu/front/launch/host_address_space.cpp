#include "front/launch/host_address_space.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "timing/outside_cpu_time.h"

namespace vgpu {

std::vector<std::pair<uint64_t, uint64_t>> HostAddressSpace::parse_maps(const char* text) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const char* line = text; line != nullptr && *line != '\0';) {
    char* end = nullptr;
    const uint64_t begin = std::strtoull(line, &end, 16);
    uint64_t stop = 0;
    bool readable = false;
    if (end != nullptr && *end == '-') {
      char* after = nullptr;
      stop = std::strtoull(end + 1, &after, 16);
      if (after != nullptr && *after == ' ') readable = after[1] == 'r';
    }
    if (readable && stop > begin && stop > kLowest) out.emplace_back(std::max(begin, kLowest), stop);
    line = std::strchr(line, '\n');
    if (line != nullptr) ++line;
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool HostAddressSpace::lookup(uint64_t value) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(value, UINT64_MAX));
  if (it == ranges_.begin()) return false;
  --it;
  return value < it->second;
}

void HostAddressSpace::refresh() {
  std::string text;
  if (FILE* f = std::fopen("/proc/self/maps", "re")) {
    char buf[8192];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  auto ranges = parse_maps(text.c_str());
  std::unique_lock l(mu_);
  ranges_ = std::move(ranges);
  refreshed_at_ = OutsideCpuTime::wall_seconds();
  refresh_due_at_.store(refreshed_at_ + kRefreshSeconds, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

bool HostAddressSpace::contains(uint64_t value) {
  if (value < kLowest || value >= kUserEnd) return false;
  double refreshed_at;
  {
    std::shared_lock l(mu_);
    if (lookup(value)) return true;
    refreshed_at = refreshed_at_;
  }
  if (refreshed_at >= 0 && OutsideCpuTime::wall_seconds() - refreshed_at < kRefreshSeconds) return false;
  try {
    refresh();
  } catch (...) {
    return false;  // out of memory reading the maps: the value stays in the signature
  }
  std::shared_lock l(mu_);
  return lookup(value);
}

}  // namespace vgpu
