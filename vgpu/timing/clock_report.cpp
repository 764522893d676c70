// VGPU_CLOCK_REPORT (see clock_report.h).
#include "timing/clock_report.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <list>
#include <mutex>
#include <string>
#include <string_view>

#include "common/exit_report.h"
#include "common/log.h"
#include "common/settings.h"
#include "timing/host_samples.h"
#include "timing/thread_clock.h"

namespace vgpu::timing::clock_report {
namespace {

// One thread's entry: its clock while the thread lives; a copy of its tally once it ended.
// Counts: one tally's figures, or a range's share of them.
struct Counts {
  double seconds[ClockTally::kSources] = {};
  unsigned long calls = 0;
  void add(const Counts& o, double sign) {
    for (int i = 0; i < ClockTally::kSources; ++i) seconds[i] += sign * o.seconds[i];
    calls = sign > 0 ? calls + o.calls : calls - o.calls;
  }
};

struct Entry : Counts {
  long tid = 0;
  std::string name;
  const ThreadClock* live = nullptr;
  Counts at_start;   // the tally when the open range began (or when the thread registered in it)
  Counts in_ranges;  // what closed ranges added

  void copy_from(const ClockTally& t) {
    for (int i = 0; i < ClockTally::kSources; ++i) seconds[i] = t.seconds[i].load(std::memory_order_relaxed);
    calls = t.calls.load(std::memory_order_relaxed);
  }
};

// Owned by the process for its whole life (never destroyed: threads may end after static
// destructors ran).
struct Registry {
  std::mutex mu;
  std::list<Entry> entries;
  bool ranged = false;   // a range was opened: lines count ranges only
  bool in_range = false;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::string format_line(long tid, std::string_view name, const Counts& c, bool ranged) {
  return fmt::format(
      "{{\"pid\": {}, \"tid\": {}, \"name\": \"{}\", \"calls\": {}, \"cpu_s\": {:.6f}, \"driver_s\": {:.6f}, "
      "\"sync_s\": {:.6f}, \"poll_s\": {:.6f}, \"horizon_s\": {:.6f}, \"handoff_s\": {:.6f}, \"dropped_s\": {:.6f}, "
      "\"raised_s\": {:.6f}, \"nccl_s\": {:.6f}{}}}\n",
      ::getpid(), tid, name, c.calls, c.seconds[ClockTally::cpu], c.seconds[ClockTally::driver],
      c.seconds[ClockTally::sync], c.seconds[ClockTally::poll], c.seconds[ClockTally::horizon],
      c.seconds[ClockTally::handoff], c.seconds[ClockTally::dropped], c.seconds[ClockTally::raised],
      c.seconds[ClockTally::nccl], ranged ? ", \"range\": true" : "");
}

// The entry's tally now (registry lock held): the live clock's, else the copy kept at its end.
Counts current(Entry& e) {
  if (e.live != nullptr) e.copy_from(e.live->tally());
  return e;
}

// Made on the thread's first registration; its destructor, at the thread's end, keeps a copy of
// the tally (the clock's storage goes with the thread).
struct ThreadEnd {
  std::list<Entry>::iterator entry;
  ~ThreadEnd() {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    if (entry->live != nullptr) entry->copy_from(entry->live->tally());
    entry->live = nullptr;
  }
};

bool wanted() {
  static const bool on = settings::is_set(settings::Id::clock_report);
  return on;
}

}  // namespace

void register_thread(const ThreadClock& clock) {
  host_samples::arm_if_wanted();  // the same moment suits the sampler: the driver is in use
  if (!wanted()) return;
  try {
    Registry& r = registry();
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    std::list<Entry>::iterator it;
    {
      std::lock_guard lock(r.mu);
      it = r.entries.insert(r.entries.end(), Entry{});
      it->tid = static_cast<long>(::syscall(SYS_gettid));
      it->name = name;
      it->live = &clock;
      if (r.in_range) it->at_start = current(*it);
    }
    static thread_local ThreadEnd end{it};
    static std::once_flag armed;
    std::call_once(armed, [] { append_report_at_exit(settings::Id::clock_report, lines); });
  } catch (...) {  // a report is never worth failing the program's call
  }
}

void range_start() {
  host_samples::range_start();
  if (!wanted()) return;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (r.in_range) return;
  r.in_range = r.ranged = true;
  for (Entry& e : r.entries) e.at_start = current(e);
}

void range_stop() {
  host_samples::range_stop();
  if (!wanted()) return;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (!r.in_range) return;
  r.in_range = false;
  for (Entry& e : r.entries) {
    e.in_ranges.add(current(e), +1);
    e.in_ranges.add(e.at_start, -1);
  }
}

std::string lines() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::string out;
  for (Entry& e : r.entries) {
    Counts shown = current(e);
    if (r.ranged) {  // the ranges' share: the closed ones, and the open one so far
      Counts open = shown;
      open.add(e.at_start, -1);
      shown = e.in_ranges;
      if (r.in_range) shown.add(open, +1);
    }
    out += format_line(e.tid, json_safe(e.name), shown, r.ranged);
  }
  return out;
}

}  // namespace vgpu::timing::clock_report
