// The system calls the calling thread makes, counted by the kernel: a perf event on the
// raw_syscalls:sys_enter tracepoint, for this thread only, read around a timed loop.
//
// Why: a driver call that enters the kernel costs ~0.1-0.3 us on a plain Linux host and several
// times that under a hypervisor or a user-space kernel (gVisor: every system call is a trap into
// its sentry), so "vgpu's common path makes no system call" is a figure the bench checks, not a
// belief (issue 21: the thread's CPU clock, CLOCK_THREAD_CPUTIME_ID, has no vDSO).
//
// Needs tracefs (/sys/kernel/tracing or /sys/kernel/debug/tracing) and perf events allowed for
// the user (perf_event_paranoid, or root); counting() is false otherwise and read() returns -1
// (gVisor has neither).
#pragma once

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

class SyscallCounter {
 public:
  SyscallCounter() {
    long long id = -1;
    for (const char* path : {"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
                             "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id"}) {
      if (FILE* f = std::fopen(path, "r")) {
        if (std::fscanf(f, "%lld", &id) != 1) id = -1;
        std::fclose(f);
      }
      if (id >= 0) break;
    }
    if (id < 0) {
      why_not_ = "no raw_syscalls:sys_enter tracepoint (tracefs not mounted?)";
      return;
    }
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = static_cast<uint64_t>(id);
    attr.exclude_kernel = 0;
    fd_ = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0 /*this thread*/, -1 /*any cpu*/, -1, 0));
    if (fd_ < 0) why_not_ = std::string("perf_event_open: ") + std::strerror(errno);
  }
  ~SyscallCounter() {
    if (fd_ >= 0) close(fd_);
  }
  SyscallCounter(const SyscallCounter&) = delete;
  SyscallCounter& operator=(const SyscallCounter&) = delete;

  bool counting() const { return fd_ >= 0; }
  const std::string& why_not() const { return why_not_; }
  // System calls so far, this read's own included; -1 when not counting.
  long long read() const {
    uint64_t v = 0;
    if (fd_ < 0 || ::read(fd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return -1;
    return static_cast<long long>(v);
  }

 private:
  int fd_ = -1;
  std::string why_not_;
};
