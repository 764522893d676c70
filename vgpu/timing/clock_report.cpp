// VGPU_CLOCK_REPORT (see clock_report.h).
#include "timing/clock_report.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <list>
#include <mutex>
#include <string>

#include "common/exit_report.h"
#include "common/log.h"
#include "common/settings.h"
#include "timing/thread_clock.h"

namespace vgpu::timing::clock_report {
namespace {

// One thread's entry: its clock while the thread lives; a copy of its tally once it ended.
struct Entry {
  long tid = 0;
  std::string name;
  const ThreadClock* live = nullptr;
  double seconds[ClockTally::kSources] = {};
  unsigned long calls = 0;

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
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::string format_line(const Entry& e) {
  return fmt::format(
      "{{\"pid\": {}, \"tid\": {}, \"name\": \"{}\", \"calls\": {}, \"cpu_s\": {:.6f}, \"driver_s\": {:.6f}, "
      "\"sync_s\": {:.6f}, \"poll_s\": {:.6f}, \"horizon_s\": {:.6f}, \"handoff_s\": {:.6f}, \"dropped_s\": {:.6f}, \"raised_s\": {:.6f}}}\n",
      ::getpid(), e.tid, e.name, e.calls, e.seconds[ClockTally::cpu], e.seconds[ClockTally::driver],
      e.seconds[ClockTally::sync], e.seconds[ClockTally::poll], e.seconds[ClockTally::horizon],
      e.seconds[ClockTally::handoff], e.seconds[ClockTally::dropped], e.seconds[ClockTally::raised]);
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
    }
    static thread_local ThreadEnd end{it};
    static std::once_flag armed;
    std::call_once(armed, [] { append_report_at_exit(settings::Id::clock_report, lines); });
  } catch (...) {  // a report is never worth failing the program's call
  }
}

std::string lines() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::string out;
  for (Entry& e : r.entries) {
    Entry shown = e;
    if (e.live != nullptr) shown.copy_from(e.live->tally());
    // Names may contain anything a program chose: keep the JSON valid.
    for (char& c : shown.name)
      if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '_';
    out += format_line(shown);
  }
  return out;
}

}  // namespace vgpu::timing::clock_report
