#include "passthrough/launch_policy.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace vgpu::pt {
namespace {

LaunchPolicy parse_policy() {
  const char* v = std::getenv("VGPU_LAUNCH_POLICY");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "all") == 0) return LaunchPolicy::all;
  if (std::strcmp(v, "first") == 0) return LaunchPolicy::first;
  if (std::strcmp(v, "none") == 0) return LaunchPolicy::none;
  log::always(fmt::format("vgpu: VGPU_LAUNCH_POLICY='{}' is not one of all, first, none; using all", v));
  return LaunchPolicy::all;
}

int parse_samples() {
  const char* v = std::getenv("VGPU_MEASURE_SAMPLES");
  if (v == nullptr || *v == '\0') return 3;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > 1000) {
    log::always(fmt::format("vgpu: VGPU_MEASURE_SAMPLES='{}' is not a number from 1 to 1000; using 3", v));
    return 3;
  }
  return static_cast<int>(n);
}

}  // namespace

LaunchPolicy launch_policy() {
  static const LaunchPolicy p = parse_policy();
  return p;
}

const char* policy_name(LaunchPolicy p) {
  switch (p) {
    case LaunchPolicy::all: return "all";
    case LaunchPolicy::first: return "first";
    case LaunchPolicy::none: return "none";
  }
  return "?";
}

KernelDurations& KernelDurations::get() {
  static KernelDurations* d = new KernelDurations;  // used by launches during exit too
  return *d;
}

int KernelDurations::samples_wanted() {
  static const int n = parse_samples();
  return n;
}

std::optional<double> KernelDurations::settled(const std::string& signature) {
  std::lock_guard l(mu_);
  auto it = entries_.find(signature);
  if (it == entries_.end() || it->second.median < 0) return std::nullopt;
  return it->second.median;
}

void KernelDurations::settle(const std::string& signature, double seconds) {
  std::lock_guard l(mu_);
  Entry& e = entries_[signature];
  e.samples.clear();
  e.median = seconds;
}

bool KernelDurations::seen(const std::string& signature) {
  std::lock_guard l(mu_);
  return entries_.count(signature) != 0;
}

std::optional<double> KernelDurations::add_sample(const std::string& signature, double seconds) {
  std::lock_guard l(mu_);
  Entry& e = entries_[signature];
  if (e.median >= 0) return std::nullopt;
  e.samples.push_back(seconds);
  if (static_cast<int>(e.samples.size()) < samples_wanted()) return std::nullopt;
  // The first sample of a signature is usually its function's first launch in the context,
  // which is measured without the stream gate (launch_api.cpp) and so includes the host's
  // launch latency: with three or more samples it is left out.
  std::vector<double> s(e.samples.begin() + (e.samples.size() >= 3 ? 1 : 0), e.samples.end());
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  e.median = n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  e.samples.clear();
  e.samples.shrink_to_fit();
  return e.median;
}

}  // namespace vgpu::pt
