// Driver-call overhead of the passthrough backend against the real driver, measured in one
// process and one run: the same calls through the real libcuda.so.1 and through vgpu's
// passthrough libcuda.so.1 (which forwards to that same real driver), as a ratio.
//
//   passthrough_call_overhead <real libcuda> <vgpu passthrough libcuda> <empty_kernel.fatbin> [rounds] [evict KiB [stride]]
//
// Prints one table row per call: calls per second through each library, vgpu/real, and vgpu's
// own time per call (the difference of the two libraries' time per call). Each library is
// measured `rounds` times (default 2), alternating, and keeps its best run. Beside it, the
// spread: each round's own ratio (its vgpu run over the real run just before it), as the median
// and the least and greatest of the rounds (on an H200 host the best-run ratio of launches moved
// 0.76-0.93x between runs minutes apart: one figure says little, the spread says how little). Then the system calls
// the calling thread made per call through each library (the least of the rounds), counted by
// the kernel where perf events can count them (syscall_counter.h); "n/a" where they cannot
// (gVisor has no perf events). Then the CPU's counters per call for each call mode, the calling
// thread's user space only (hw_counters.h: cycles, instructions, L1d/L1i read misses, LLC
// misses, dTLB/iTLB read misses, branch misses, and the software task clock), through each
// library and their difference, vgpu's own count per call: where vgpu's own time goes on a host
// ("hw" lines; "n/a" for what the host's PMU does not count, e.g. a KVM guest without one).
//
// Without a GPU, the "real" library can be bench/passthrough's free_calls_driver (its hot calls
// cost next to nothing, free_calls_overrides.cpp): the last column is then vgpu's own cost.
//
// [evict KiB] (default 0): before every timed call the loop writes one byte of each cache line
// of a buffer that large, through either library alike (its time cancels out of the own-ns
// column; the rates and ratios then include it). Over the stand-in, back-to-back calls find
// vgpu's data in the L1 cache; on a GPU host the real driver's own call and the framework's work
// between calls evict it, and vgpu's own time there was 1.7-3.5x the stand-in's (issue 21). With
// 64 (more than an L1 data cache) the stand-in's own-ns column counts those misses too.
// [stride] (default 64): bytes between two bytes written. 4160 (a page and a line) touches one
// line of each of evict KiB / 4160 pages, in every cache set: besides the lines, the TLB's
// entries for vgpu's pages go, and over the stand-in on this KVM container the event record's own
// time rose from ~41 to ~50-56 ns with 4160 KiB (a GPU host's was 67.5), where 64 KiB of lines left
// it at ~36-42 (docs/results.md, callcost11).
#include <cuda.h>
#include <dlfcn.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "cache_eviction.h"
#include "host_primitives.h"
#include "hw_counters.h"
#include "syscall_counter.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

struct Driver {
  void* h = nullptr;
  template <class F> F fn(const char* name) {
    void* p = dlsym(h, name);
    if (!p) { std::fprintf(stderr, "missing %s\n", name); std::exit(2); }
    return reinterpret_cast<F>(p);
  }
};

#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { std::fprintf(stderr, "%s -> %d\n", #call, (int)r_); std::exit(1); } } while (0)

// The second kernel of empty_kernel.cu: as empty, under a name as long as PyTorch's kernels'.
constexpr const char* kLongName = "empty_as_long_as_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_name";

// Whether the CPU, as the process sees it, says its time-stamp counter is invariant (CPUID
// 0x80000007, EDX bit 8). vgpu reads its wall clock (twice per timed call) from the TSC then at
// once, else only once two calibration windows agreed (timing/tsc_clock.h): what the bench
// prints, since a sandbox may hide the leaf (gVisor answers only the CPUID leaves it knows, and
// this one is not among them).
bool invariant_tsc() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)) != 0;
#else
  return false;
#endif
}

struct Rates { double launch, launch_long, launch_args, alloc_free, event_record, memcpy_async; };

// elementwise_like's by-value struct (empty_kernel.cu).
struct ElementwiseArgs {
  int dims;
  unsigned sizes[24];
  unsigned long long strides[24];
};

// The calls measured, in Rates' order: the index of a call's hardware counts.
enum Call { kLaunch, kLaunchLong, kLaunchArgs, kAllocFree, kEventRecord, kMemcpyAsync, kCalls };

// One measurement's calls per second, the thread's system calls per call (< 0: not counted) and
// its hardware counts per call.
struct Run {
  Rates rate{};
  Rates syscalls{};
  std::array<HwCounters::PerCall, kCalls> hw{};
};

Run measure(const char* path, const std::vector<char>& image, const SyscallCounter& sys, const HwCounters& hw,
            CacheEviction& eviction) {
  Driver d;
  d.h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!d.h) { std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror()); std::exit(2); }
  auto init = d.fn<CUresult (*)(unsigned)>("cuInit");
  auto retain = d.fn<CUresult (*)(CUcontext*, CUdevice)>("cuDevicePrimaryCtxRetain");
  auto set_current = d.fn<CUresult (*)(CUcontext)>("cuCtxSetCurrent");
  auto load = d.fn<CUresult (*)(CUmodule*, const void*)>("cuModuleLoadData");
  auto get_function = d.fn<CUresult (*)(CUfunction*, CUmodule, const char*)>("cuModuleGetFunction");
  auto stream_create = d.fn<CUresult (*)(CUstream*, unsigned)>("cuStreamCreate");
  auto stream_sync = d.fn<CUresult (*)(CUstream)>("cuStreamSynchronize");
  auto launch = d.fn<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, CUstream, void**, void**)>("cuLaunchKernel");
  auto alloc = d.fn<CUresult (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = d.fn<CUresult (*)(CUdeviceptr)>("cuMemFree_v2");
  auto event_create = d.fn<CUresult (*)(CUevent*, unsigned)>("cuEventCreate");
  auto event_record = d.fn<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  auto host_alloc = d.fn<CUresult (*)(void**, size_t)>("cuMemAllocHost_v2");
  auto copy_async = d.fn<CUresult (*)(CUdeviceptr, const void*, size_t, CUstream)>("cuMemcpyHtoDAsync_v2");

  CHECK(init(0));
  CUcontext ctx;
  CHECK(retain(&ctx, 0));
  CHECK(set_current(ctx));
  CUmodule mod;
  CHECK(load(&mod, image.data()));
  CUfunction f, f_long, f_args;
  CHECK(get_function(&f, mod, "empty"));
  CHECK(get_function(&f_long, mod, kLongName));
  CHECK(get_function(&f_args, mod, "elementwise_like"));
  CUstream s;
  CHECK(stream_create(&s, CU_STREAM_NON_BLOCKING));
  using clock = std::chrono::steady_clock;
  // Read at the start of each timed loop (t0) and at its end (rate()): the loop's system calls
  // and hardware counts. The counters are read outside the system call count's two reads, so
  // their reads' system calls are not counted, and outside the clock's.
  long long sys_at_start = 0;
  double* syscalls_of = nullptr;
  HwCounters::Reading hw_at_start;
  HwCounters::PerCall* hw_of = nullptr;
  auto rate = [&](int n, clock::time_point t0) {
    const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
    const long long s = sys.read();
    const HwCounters::Reading hw_at_end = hw.read();
    *syscalls_of = s < 0 ? -1.0 : static_cast<double>(s - sys_at_start - 1) / n;  // -1: this read's own
    *hw_of = HwCounters::per_call(hw_at_start, hw_at_end, n);
    return n / seconds;
  };
  Run run{};
  auto start = [&](Call call, double* syscalls) {
    syscalls_of = syscalls;
    hw_of = &run.hw[call];
    hw_at_start = hw.read();
    sys_at_start = sys.read();
    return clock::now();
  };
  Rates& r = run.rate;
  constexpr int kLaunches = 200000;
  auto launches = [&](Call call, CUfunction fn, double* syscalls, void** params = nullptr) {
    for (int i = 0; i < 2000; ++i) CHECK(launch(fn, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));  // warm up
    CHECK(stream_sync(s));
    const auto t0 = start(call, syscalls);
    for (int i = 0; i < kLaunches; ++i) {
      eviction.touch();
      CHECK(launch(fn, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
      if (i % 1000 == 999) CHECK(stream_sync(s));  // keep the queue from filling
    }
    CHECK(stream_sync(s));
    return rate(kLaunches, t0);
  };
  r.launch = launches(kLaunch, f, &run.syscalls.launch);
  r.launch_long = launches(kLaunchLong, f_long, &run.syscalls.launch_long);
  {
    // Its arguments: two allocations, a count, and the struct: one dimension filled, the rest
    // host addresses (of this frame and the heap: a stack holds frame pointers and pointers).
    CUdeviceptr out_buf, in_buf;
    CHECK(alloc(&out_buf, 4096));
    CHECK(alloc(&in_buf, 4096));
    unsigned n = 1024;
    ElementwiseArgs args{};
    std::vector<char> heap(4096);
    args.dims = 1;
    args.sizes[0] = n;
    args.strides[0] = 4;
    for (unsigned i = 1; i < 24; ++i) {
      args.sizes[i] = i;
      args.strides[i] = i % 2 ? reinterpret_cast<uintptr_t>(&args) + 8 * i : reinterpret_cast<uintptr_t>(heap.data()) + 64 * i;
    }
    void* params[] = {&out_buf, &in_buf, &n, &args};
    r.launch_args = launches(kLaunchArgs, f_args, &run.syscalls.launch_args, params);
    CHECK(mem_free(out_buf));
    CHECK(mem_free(in_buf));
  }

  constexpr int kAllocs = 20000;
  auto t0 = start(kAllocFree, &run.syscalls.alloc_free);
  for (int i = 0; i < kAllocs; ++i) {
    CUdeviceptr p;
    eviction.touch();
    CHECK(alloc(&p, 2u << 20));
    CHECK(mem_free(p));
  }
  r.alloc_free = rate(kAllocs, t0);

  CUevent e;
  CHECK(event_create(&e, CU_EVENT_DISABLE_TIMING));
  constexpr int kEvents = 200000;
  t0 = start(kEventRecord, &run.syscalls.event_record);
  for (int i = 0; i < kEvents; ++i) {
    eviction.touch();
    CHECK(event_record(e, s));
  }
  CHECK(stream_sync(s));
  r.event_record = rate(kEvents, t0);

  void* host;
  CHECK(host_alloc(&host, 4096));
  CUdeviceptr dev;
  CHECK(alloc(&dev, 4096));
  constexpr int kCopies = 100000;
  t0 = start(kMemcpyAsync, &run.syscalls.memcpy_async);
  for (int i = 0; i < kCopies; ++i) {
    eviction.touch();
    CHECK(copy_async(dev, host, 4096, s));
    if (i % 1000 == 999) CHECK(stream_sync(s));
  }
  CHECK(stream_sync(s));
  r.memcpy_async = rate(kCopies, t0);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 7) {
    std::fprintf(stderr,
                 "usage: %s <real libcuda> <vgpu passthrough libcuda> <empty_kernel.fatbin> [rounds] [evict KiB [stride]]\n",
                 argv[0]);
    return 2;
  }
  const int rounds = argc >= 5 ? std::max(1, std::atoi(argv[4])) : 2;
  const long evict_kib = argc >= 6 ? std::max(0L, std::atol(argv[5])) : 0;
  CacheEviction eviction(static_cast<size_t>(evict_kib) * 1024,
                         argc == 7 ? static_cast<size_t>(std::max(1L, std::atol(argv[6]))) : 64);
  std::ifstream in(argv[3], std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), {});
  if (image.empty()) { std::fprintf(stderr, "cannot read %s\n", argv[3]); return 2; }
  // vgpu must find the same real driver the baseline uses.
  setenv("VGPU_REAL_LIBCUDA", argv[1], 1);
  // A process that uses the real driver has several threads (the driver starts its own), and
  // from its second thread on the C library and libstdc++ take their multi-threaded paths
  // (atomic reference counts of shared_ptr, malloc's arena locks). The stand-in starts none: an
  // idle thread of the bench's own makes its figures those of a multi-threaded process too.
  std::mutex idle_mu;
  std::condition_variable idle_cv;
  bool done = false;
  std::thread idle([&] {
    std::unique_lock l(idle_mu);
    idle_cv.wait(l, [&] { return done; });
  });
  // Alternating and keeping each library's best run evens out warm-up and clock drift.
  const SyscallCounter sys;
  const HwCounters hw;
  Rates real{}, vgpu{};
  Rates real_sys{-1, -1, -1, -1, -1, -1}, vgpu_sys{-1, -1, -1, -1, -1, -1};
  auto best = [](Rates& b, const Rates& r) {
    b = {std::max(b.launch, r.launch), std::max(b.launch_long, r.launch_long), std::max(b.launch_args, r.launch_args),
         std::max(b.alloc_free, r.alloc_free), std::max(b.event_record, r.event_record),
         std::max(b.memcpy_async, r.memcpy_async)};
  };
  auto least = [](double& b, double r) { b = b < 0 ? r : std::min(b, r); };
  auto fewest = [&least](Rates& b, const Rates& r) {
    least(b.launch, r.launch);
    least(b.launch_long, r.launch_long);
    least(b.launch_args, r.launch_args);
    least(b.alloc_free, r.alloc_free);
    least(b.event_record, r.event_record);
    least(b.memcpy_async, r.memcpy_async);
  };
  std::vector<Rates> ratios;  // each round's vgpu over real
  // Each call's and counter's least count per call over the rounds (< 0: not counted), as the
  // system calls: the round least disturbed by the rest of the host.
  std::array<HwCounters::PerCall, kCalls> real_hw, vgpu_hw;
  for (auto* t : {&real_hw, &vgpu_hw})
    for (auto& c : *t) c.fill(-1);
  auto least_hw = [](std::array<HwCounters::PerCall, kCalls>& b, const std::array<HwCounters::PerCall, kCalls>& r) {
    for (size_t c = 0; c < kCalls; ++c)
      for (size_t e = 0; e < HwCounters::kEvents; ++e)
        if (r[c][e] >= 0) b[c][e] = b[c][e] < 0 ? r[c][e] : std::min(b[c][e], r[c][e]);
  };
  for (int round = 0; round < rounds; ++round) {
    const Run a = measure(argv[1], image, sys, hw, eviction);
    best(real, a.rate);
    fewest(real_sys, a.syscalls);
    least_hw(real_hw, a.hw);
    const Run b = measure(argv[2], image, sys, hw, eviction);
    best(vgpu, b.rate);
    fewest(vgpu_sys, b.syscalls);
    least_hw(vgpu_hw, b.hw);
    ratios.push_back({b.rate.launch / a.rate.launch, b.rate.launch_long / a.rate.launch_long,
                      b.rate.launch_args / a.rate.launch_args, b.rate.alloc_free / a.rate.alloc_free,
                      b.rate.event_record / a.rate.event_record, b.rate.memcpy_async / a.rate.memcpy_async});
  }
  if (evict_kib > 0)
    std::printf("(%ld KiB written between calls, a byte every %zu: compare the own-ns column)\n", evict_kib,
                eviction.stride);
  std::printf("%-34s %14s %14s %12s %14s %14s %14s  %s\n", "call", "real calls/s", "vgpu calls/s", "vgpu/real",
              "vgpu own ns", "real sys/call", "vgpu sys/call", "rounds' vgpu/real: median (least-greatest)");
  auto count = [](double v) {
    char buf[32];
    if (v < 0)
      std::snprintf(buf, sizeof buf, "n/a");
    else
      std::snprintf(buf, sizeof buf, "%.4f", v);
    return std::string(buf);
  };
  // The rounds' ratios of one call (`of` picks it): "median (least-greatest)".
  auto spread = [&ratios](double Rates::*of) {
    std::vector<double> v;
    for (const Rates& r : ratios) v.push_back(r.*of);
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    const double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f (%.3f-%.3f)", median, v.front(), v.back());
    return std::string(buf);
  };
  auto row = [&count, &spread](const char* name, double a, double b, double sa, double sb, double Rates::*of) {
    std::printf("%-34s %14.0f %14.0f %12.3f %14.1f %14s %14s  %s\n", name, a, b, b / a, (1 / b - 1 / a) * 1e9,
                count(sa).c_str(), count(sb).c_str(), spread(of).c_str());
  };
  row("cuLaunchKernel (empty, 1x1)", real.launch, vgpu.launch, real_sys.launch, vgpu_sys.launch, &Rates::launch);
  row("cuLaunchKernel (249-byte name)", real.launch_long, vgpu.launch_long, real_sys.launch_long,
      vgpu_sys.launch_long, &Rates::launch_long);
  row("cuLaunchKernel (PyTorch-like args)", real.launch_args, vgpu.launch_args, real_sys.launch_args,
      vgpu_sys.launch_args, &Rates::launch_args);
  row("cuMemAlloc+cuMemFree (2 MiB)", real.alloc_free, vgpu.alloc_free, real_sys.alloc_free, vgpu_sys.alloc_free,
      &Rates::alloc_free);
  row("cuEventRecord", real.event_record, vgpu.event_record, real_sys.event_record, vgpu_sys.event_record,
      &Rates::event_record);
  row("cuMemcpyHtoDAsync (4 KiB pinned)", real.memcpy_async, vgpu.memcpy_async, real_sys.memcpy_async,
      vgpu_sys.memcpy_async, &Rates::memcpy_async);
  // The hardware counts: per call, through each library and vgpu's own (vgpu - real), a line each,
  // every line starting "hw " (the table above stays as scripts parse it).
  {
    std::printf("hw %-40s", "per call, user space, least of rounds");
    for (const auto& e : HwCounters::kList) std::printf(" %16s", e.name);
    std::printf("\n");
    const char* names[kCalls] = {"cuLaunchKernel (empty, 1x1)", "cuLaunchKernel (249-byte name)",
                                 "cuLaunchKernel (PyTorch-like args)", "cuMemAlloc+cuMemFree (2 MiB)",
                                 "cuEventRecord", "cuMemcpyHtoDAsync (4 KiB pinned)"};
    auto cell = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", v);
      return std::string(buf);
    };
    for (size_t c = 0; c < kCalls; ++c) {
      for (int which = 0; which < 3; ++which) {
        std::printf("hw %-34s %-5s", names[c], which == 0 ? "real" : which == 1 ? "vgpu" : "own");
        for (size_t e = 0; e < HwCounters::kEvents; ++e) {
          const double a = real_hw[c][e], b = vgpu_hw[c][e];
          const bool ok = which == 0 ? a >= 0 : which == 1 ? b >= 0 : a >= 0 && b >= 0;
          std::printf(" %16s", ok ? cell(which == 0 ? a : which == 1 ? b : b - a).c_str() : "n/a");
        }
        std::printf("\n");
      }
    }
    // What the host refused, one line per reason (a KVM guest without a PMU refuses every
    // hardware event alike).
    std::vector<std::string> reasons;
    for (size_t e = 0; e < HwCounters::kEvents; ++e)
      if (!hw.counting(e) && std::find(reasons.begin(), reasons.end(), hw.why_not(e)) == reasons.end())
        reasons.push_back(hw.why_not(e));
    for (const std::string& why : reasons) {
      std::string names;
      for (size_t e = 0; e < HwCounters::kEvents; ++e)
        if (!hw.counting(e) && hw.why_not(e) == why) names += std::string(names.empty() ? "" : ", ") + HwCounters::kList[e].name;
      std::printf("hw (not counted here: %s: perf_event_open: %s)\n", names.c_str(), why.c_str());
    }
  }
  {
    // Where no PMU counts cycles: the host's cost of the operations a settled call is made of
    // (host_primitives.h), to read the own-ns column in cycles, TSC reads and locked pairs.
    const HostPrimitives p = HostPrimitives::measure();
    std::printf("hw host: TSC read %.2f ns, locked compare-exchange + release %.2f ns, one cycle %.3f ns (%.2f GHz); "
                "cuEventRecord own ~%.0f cycles\n",
                p.tsc_read_ns, p.locked_pair_ns, p.cycle_ns, 1 / p.cycle_ns,
                (1 / vgpu.event_record - 1 / real.event_record) * 1e9 / p.cycle_ns);
  }
  if (!sys.counting()) std::printf("(system calls not counted here: %s)\n", sys.why_not().c_str());
  std::printf("invariant TSC per CPUID: %s\n",
              invariant_tsc() ? "yes (vgpu's wall clock: the TSC)"
                              : "no (vgpu's wall clock: the TSC once checked, timing/tsc_clock.h)");
  {
    std::lock_guard l(idle_mu);
    done = true;
  }
  idle_cv.notify_one();
  idle.join();
  return 0;
}
