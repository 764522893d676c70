// The CPU's own counts of what a timed loop did (cycles, instructions, cache/TLB misses, branch
// misses), for the calling thread and user space only, read around each of the call-rate bench's
// timed loops (call_overhead_bench.cpp). The loop through the real driver and the one through
// vgpu's library do the same calls, so (vgpu - real) per call is vgpu's own cost in each counter:
// where the GPU host's own nanoseconds go (issue 21: the same instructions cost ~2.2x the
// stand-in's ns there, and nobody knew whether misses, the TSC reads or branches paid for it).
//
// Each event is opened alone, not as a group: a host that allows cycles but not, say, LLC misses
// still reports the rest ("n/a" for the one it refuses). User space only (exclude_kernel,
// exclude_hv), which perf_event_paranoid 2 allows an unprivileged user. When the kernel has more
// events open than the PMU has counters it time-shares them; read() scales each count by the
// time it was enabled over the time it counted (the kernel reports both), as perf stat does.
//
// A machine with no PMU (a KVM guest without a virtual one: "software events only") reports the
// hardware events "n/a"; the software task clock beside them works everywhere perf events do,
// which keeps the reading and scaling checked there.
#pragma once

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

// A cache event's config: which cache, which operation, which result (perf_event_open(2)).
constexpr uint64_t perf_cache_event(uint64_t id, uint64_t op, uint64_t result) { return id | (op << 8) | (result << 16); }

class HwCounters {
 public:
  struct Event {
    const char* name;  // column header: what one call's count means
    uint32_t type;
    uint64_t config;
  };
  static constexpr size_t kEvents = 9;
  static constexpr std::array<Event, kEvents> kList{{
      {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
      {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
      {"L1d read misses", PERF_TYPE_HW_CACHE,
       perf_cache_event(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
      {"L1i read misses", PERF_TYPE_HW_CACHE,
       perf_cache_event(PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
      {"LLC misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
      {"dTLB read misses", PERF_TYPE_HW_CACHE,
       perf_cache_event(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
      {"iTLB read misses", PERF_TYPE_HW_CACHE,
       perf_cache_event(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
      {"branch misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
      // Software: the thread's CPU time in ns, kernel's included (a clock, not a count: the
      // exclusions do not apply to it); the check that the reading works where the hardware
      // ones are n/a.
      {"task-clock ns", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
  }};
  // One reading of every event: the kernel's value, time enabled and time running.
  struct Reading {
    std::array<uint64_t, kEvents> value{}, enabled{}, running{};
    std::array<bool, kEvents> ok{};
  };
  // Per call between two readings; < 0 for an event not counted (or never scheduled between them).
  using PerCall = std::array<double, kEvents>;

  HwCounters() {
    for (size_t i = 0; i < kEvents; ++i) {
      perf_event_attr attr{};
      attr.size = sizeof attr;
      attr.type = kList[i].type;
      attr.config = kList[i].config;
      attr.exclude_kernel = 1;  // what perf_event_paranoid 2 allows; the task clock ignores it
      attr.exclude_hv = 1;
      attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
      fd_[i] = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0 /*this thread*/, -1 /*any cpu*/, -1, 0));
      if (fd_[i] < 0) why_not_[i] = std::strerror(errno);
    }
  }
  ~HwCounters() {
    for (int fd : fd_)
      if (fd >= 0) close(fd);
  }
  HwCounters(const HwCounters&) = delete;
  HwCounters& operator=(const HwCounters&) = delete;

  bool counting(size_t i) const { return fd_[i] >= 0; }
  const std::string& why_not(size_t i) const { return why_not_[i]; }
  Reading read() const {
    Reading r;
    for (size_t i = 0; i < kEvents; ++i) {
      uint64_t v[3] = {0, 0, 0};
      r.ok[i] = fd_[i] >= 0 && ::read(fd_[i], v, sizeof v) == static_cast<ssize_t>(sizeof v);
      r.value[i] = v[0];
      r.enabled[i] = v[1];
      r.running[i] = v[2];
    }
    return r;
  }
  // The count between two readings over n calls, scaled for time-sharing: the loop's count times
  // the time it was enabled over the time it counted, both over the loop only.
  static PerCall per_call(const Reading& a, const Reading& b, int n) {
    PerCall p;
    for (size_t i = 0; i < kEvents; ++i) {
      const uint64_t running = b.running[i] - a.running[i];
      if (!a.ok[i] || !b.ok[i] || running == 0) {
        p[i] = -1;
        continue;
      }
      const double count = static_cast<double>(b.value[i] - a.value[i]);
      p[i] = count * static_cast<double>(b.enabled[i] - a.enabled[i]) / static_cast<double>(running) / n;
    }
    return p;
  }

 private:
  std::array<int, kEvents> fd_{};
  std::array<std::string, kEvents> why_not_;
};
