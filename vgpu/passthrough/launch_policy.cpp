#include "passthrough/launch_policy.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "common/log.h"
#include "common/settings.h"
#include "passthrough/passthrough.h"
#include "timing/outside_cpu_time.h"

namespace vgpu::pt {
namespace {

LaunchPolicy parse_policy() {
  const std::string v = settings::text(settings::Id::launch_policy);
  if (v == "first") return LaunchPolicy::first;
  if (v == "none") return LaunchPolicy::none;
  return LaunchPolicy::all;
}

int parse_samples() { return static_cast<int>(settings::integer(settings::Id::measure_samples)); }

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

KernelDurations& KernelDurations::get() { return Passthrough::get().durations(); }

int KernelDurations::samples_wanted() {
  static const int n = parse_samples();
  return n;
}

KernelDurations::KernelDurations() {
  std::string path = settings::text(settings::Id::launch_stats);
  if (path.empty()) return;
  // "%p" becomes the process id, so that the ranks of a job each keep their own file.
  if (const size_t at = path.find("%p"); at != std::string::npos) path.replace(at, 2, std::to_string(::getpid()));
  stats_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (stats_fd_ < 0) {
    log::always(fmt::format("vgpu: VGPU_LAUNCH_STATS: cannot write {}", path));
    return;
  }
  // The last settled launches' counts (the root, and so this object, is never destroyed).
  std::atexit([] {
    if (KernelDurations* d = Passthrough::get().durations_if_made()) d->publish_pending();
  });
}

void KernelDurations::publish_pending() {
  if (!pending_.load(std::memory_order_relaxed)) return;
  std::lock_guard l(mu_);
  publish(/*now=*/true);
}

void KernelDurations::publish(bool now) {
  if (stats_fd_ < 0) return;
  const double wall = vgpu::OutsideCpuTime::wall_seconds();
  if (!now && published_at_ >= 0 && wall - published_at_ < kPublishEvery) {
    pending_.store(true, std::memory_order_relaxed);
    return;
  }
  published_at_ = wall;
  pending_.store(false, std::memory_order_relaxed);
  const Counts c = counts_locked();
  char line[160];
  const int n = std::snprintf(line, sizeof line,
                              "signatures=%012llu launches=%012llu settled=%012llu from_database=%012llu "
                              "measured=%012llu\n",
                              c.signatures, c.launches, c.settled, c.from_database, c.measured());
  if (n > 0 && ::pwrite(stats_fd_, line, static_cast<size_t>(n), 0) < 0) {
    ::close(stats_fd_);  // a full disk or a closed file: stop trying
    stats_fd_ = -1;
  }
}

KernelDurations::Counts KernelDurations::counts_locked() const {
  Counts c = counts_;
  c.signatures = entries_.groups();
  c.from_database += from_job_.load(std::memory_order_relaxed);
  return c;
}

KernelDurations::Counts KernelDurations::counts() {
  std::lock_guard l(mu_);
  return counts_locked();
}

std::optional<double> KernelDurations::settled(const LaunchSignature& signature, uint64_t hash) {
  std::lock_guard l(mu_);
  ++counts_.launches;
  const std::optional<double> found = entries_.settled(signature, hash);
  if (found) ++counts_.settled;
  // Not found: the launch is measured (measuring() writes at once) or takes another rank's
  // duration for its work (taken_from_job(): a settled launch's rate of writes).
  publish(/*now=*/false);
  return found;
}

void KernelDurations::taken_from_job() {
  // No lock (settled() took it for this launch already): a counter of its own, and the stats
  // written at the next write or synchronization.
  from_job_.fetch_add(1, std::memory_order_relaxed);
  pending_.store(true, std::memory_order_relaxed);
}

void KernelDurations::measuring() {
  std::lock_guard l(mu_);
  publish(/*now=*/true);  // a measured launch costs far more than the write
}

void KernelDurations::settle(const LaunchSignature& signature, double seconds) {
  std::lock_guard l(mu_);
  ++counts_.from_database;
  entries_.settle(signature, seconds);
  publish(/*now=*/true);
}

bool KernelDurations::seen(const LaunchSignature& signature) {
  std::lock_guard l(mu_);
  return entries_.seen(signature);
}

std::optional<double> KernelDurations::add_sample(const LaunchSignature& signature, double seconds, bool learn,
                                                 double* least) {
  std::lock_guard l(mu_);
  return entries_.add_sample(signature, seconds, learn, least);
}

std::optional<SettledGroup> KernelDurations::settled_group(const LaunchSignature& signature) {
  std::lock_guard l(mu_);
  return entries_.settled_group(signature);
}

std::vector<SettledGroup> KernelDurations::export_groups() {
  std::lock_guard l(mu_);
  return entries_.export_groups();
}

}  // namespace vgpu::pt
