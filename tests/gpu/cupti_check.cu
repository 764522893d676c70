// CUPTI's durations (through vgpu::cupti::Recorder) against cudaEvent durations, on the real driver
// (no vgpu). Each op is issued through the driver API, as the passthrough backend forwards it,
// bracketed by begin_op(tag)/end_op() and by two events on its stream. Kernels spin for 0.1, 1 and
// 10 ms; copies and a memset move 64 MiB.
//
// Three recorders in turn in one process: started before CUDA initializes (as vgpu starts it);
// then on the live context with driver API records off (reported only: CUPTI then writes no tag
// records, which is why they are on by default); then again with the defaults.
//
// Then a fourth recorder for kernels the CUDA runtime launches (<<<>>>), matched by stream order
// through Recorder::expect_kernel, each launch announced as the passthrough backend announces it
// (context, stream handle as the driver sees it, cuFuncGetName's name, grid, block): several
// streams, the legacy and per-thread default streams, a second host thread, unannounced kernels in
// between. Every announced kernel must come back exactly once, with its own duration (spins of
// 20/60/200/600 us alternate on each stream, so a kernel matched to a neighbour's launch shows),
// and every stream with one CUPTI stream id. Also judged: driver-API launches both announced and
// bracketed come back once each. Reported only: runtime launches bracketed by begin_op/end_op
// alone (the tag join), and the runtime launches again announced without names.
//
// Exit status: 0 all judged checks pass; 1 a mismatch or missing op; 3 no CUPTI.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cupti_profiler/recorder.h"

using vgpu::cupti::Completed;
using vgpu::cupti::KernelLaunch;
using vgpu::cupti::OpKind;
using vgpu::cupti::Recorder;
using vgpu::cupti::RecorderOptions;

__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// The same spin under another name, launched with a bigger grid.
__global__ void spin_grid(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// Launched unannounced between announced kernels: must be skipped.
__global__ void touch(int* p) { p[threadIdx.x] += 1; }

#define CHECK_CU(call)                                                          \
  do {                                                                          \
    CUresult r_ = (call);                                                       \
    if (r_ != CUDA_SUCCESS) {                                                   \
      const char* s_ = nullptr;                                                 \
      cuGetErrorName(r_, &s_);                                                  \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #call, s_);  \
      std::exit(2);                                                             \
    }                                                                           \
  } while (0)
#define CHECK_RT(call)                                                                    \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #call,                \
                   cudaGetErrorString(e_));                                               \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

namespace {

constexpr size_t kBytes = 64u << 20;

struct Seen {  // all CUPTI ops of one tag
  int count = 0;
  OpKind kind = OpKind::kernel;
  uint64_t start = UINT64_MAX, end = 0;
  int untimed = 0;
  uint32_t stream_id = 0;
};

struct Collector {
  std::mutex mutex;
  std::map<uint64_t, Seen> by_tag;
  void add(const Completed& c) {
    std::lock_guard<std::mutex> lock(mutex);
    Seen& s = by_tag[c.tag];
    ++s.count;
    s.kind = c.kind;
    s.stream_id = c.stream_id;
    if (c.start_ns == 0 && c.end_ns == 0) {
      ++s.untimed;
      return;
    }
    if (c.start_ns < s.start) s.start = c.start_ns;
    if (c.end_ns > s.end) s.end = c.end_ns;
  }
};

struct Gpu {
  CUstream stream = nullptr;
  CUfunction spin = nullptr;
  CUdeviceptr d0 = 0, d1 = 0;
  void* pinned = nullptr;
  std::vector<char> pageable;
  long long cycles_per_ms = 0;
};

struct Op {
  std::string name;
  OpKind kind;
  bool checked;  // pageable copies are reported, not judged
  std::function<void(Gpu&)> issue;
};

const char* kind_name(OpKind k) {
  return k == OpKind::kernel ? "kernel" : k == OpKind::memcpy ? "memcpy" : "memset";
}

void launch_spin(Gpu& g, double ms) {
  long long cycles = static_cast<long long>(ms * g.cycles_per_ms);
  void* args[] = {&cycles};
  CHECK_CU(cuLaunchKernel(g.spin, 1, 1, 1, 1, 1, 1, 0, g.stream, args, nullptr));
}

std::vector<Op> ops() {
  std::vector<Op> v;
  for (double ms : {0.1, 1.0, 10.0}) {
    char name[32];
    std::snprintf(name, sizeof name, "spin %.1f ms", ms);
    v.push_back({name, OpKind::kernel, true, [ms](Gpu& g) { launch_spin(g, ms); }});
  }
  v.push_back({"HtoD 64 MiB pinned", OpKind::memcpy, true,
               [](Gpu& g) { CHECK_CU(cuMemcpyHtoDAsync(g.d0, g.pinned, kBytes, g.stream)); }});
  v.push_back({"DtoH 64 MiB pinned", OpKind::memcpy, true,
               [](Gpu& g) { CHECK_CU(cuMemcpyDtoHAsync(g.pinned, g.d0, kBytes, g.stream)); }});
  v.push_back({"DtoD 64 MiB", OpKind::memcpy, true,
               [](Gpu& g) { CHECK_CU(cuMemcpyDtoDAsync(g.d1, g.d0, kBytes, g.stream)); }});
  v.push_back({"memset 64 MiB", OpKind::memset, true,
               [](Gpu& g) { CHECK_CU(cuMemsetD32Async(g.d1, 0x5a5a5a5a, kBytes / 4, g.stream)); }});
  v.push_back({"HtoD 64 MiB pageable", OpKind::memcpy, false,
               [](Gpu& g) { CHECK_CU(cuMemcpyHtoDAsync(g.d0, g.pageable.data(), kBytes, g.stream)); }});
  return v;
}

void setup(Gpu& g) {
  CHECK_RT(cudaSetDevice(0));
  CHECK_RT(cudaFree(nullptr));  // primary context current on this thread
  int khz = 0;
  CHECK_RT(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  g.cycles_per_ms = static_cast<long long>(khz);  // kHz = cycles per ms
  cudaFunction_t f = nullptr;
  CHECK_RT(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(&spin)));
  g.spin = reinterpret_cast<CUfunction>(f);
  CHECK_CU(cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuMemAlloc(&g.d0, kBytes));
  CHECK_CU(cuMemAlloc(&g.d1, kBytes));
  CHECK_CU(cuMemAllocHost(&g.pinned, kBytes));
  g.pageable.assign(kBytes, 1);
}

// Runs every op (after an untagged warm-up of each) and compares. Returns the number of failures;
// an unchecked phase only reports.
int run_phase(const char* phase, bool checked, Recorder& rec, Gpu& g, uint64_t tag_base) {
  Collector col;
  rec.set_sink([&col](const Completed& c) { col.add(c); });
  std::vector<Op> list = ops();

  // Warm-up, untagged: loads the module, wakes clocks and copy engines. Must not be reported.
  for (Op& op : list) op.issue(g);
  CHECK_CU(cuStreamSynchronize(g.stream));

  CUevent e0, e1;
  CHECK_CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CHECK_CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  std::vector<float> event_ms(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    // An untagged 2 ms kernel first, so that e0, the op and e1 are all queued before the GPU
    // reaches them: the events then time the op, not the host's submission of it.
    launch_spin(g, 2.0);
    CHECK_CU(cuEventRecord(e0, g.stream));
    rec.begin_op(tag_base + i);
    list[i].issue(g);
    rec.end_op();
    CHECK_CU(cuEventRecord(e1, g.stream));
    CHECK_CU(cuEventSynchronize(e1));
    CHECK_CU(cuEventElapsedTime(&event_ms[i], e0, e1));
  }
  CHECK_CU(cuCtxSynchronize());
  rec.flush();
  rec.set_sink(nullptr);
  cuEventDestroy(e0);
  cuEventDestroy(e1);

  int failures = 0;
  std::printf("\n[%s] CUPTI: %s\n", phase, rec.library_path().c_str());
  std::printf("%-22s %-7s %4s %12s %12s %10s %8s  %s\n", "op", "kind", "recs", "cupti_us",
              "event_us", "diff_us", "diff_%", "verdict");
  std::lock_guard<std::mutex> lock(col.mutex);
  for (size_t i = 0; i < list.size(); ++i) {
    const Op& op = list[i];
    double ev_us = event_ms[i] * 1000.0;
    auto it = col.by_tag.find(tag_base + i);
    if (it == col.by_tag.end() || it->second.end == 0) {
      std::printf("%-22s %-7s %4d %12s %12.1f %10s %8s  %s\n", op.name.c_str(), kind_name(op.kind),
                  it == col.by_tag.end() ? 0 : it->second.count, "-", ev_us, "-", "-",
                  op.checked ? "FAIL missing" : "info: missing");
      if (op.checked) ++failures;
      continue;
    }
    const Seen& s = it->second;
    double cu_us = (s.end - s.start) / 1000.0;
    double diff = cu_us - ev_us;
    bool ok = std::fabs(diff) <= 0.05 * ev_us + 5.0 && s.kind == op.kind && s.untimed == 0;
    const char* verdict = !op.checked ? "info" : ok ? "ok" : "FAIL";
    if (op.checked && !ok) ++failures;
    std::printf("%-22s %-7s %4d %12.1f %12.1f %10.1f %7.2f%%  %s%s\n", op.name.c_str(),
                kind_name(s.kind), s.count, cu_us, ev_us, diff, 100.0 * diff / ev_us, verdict,
                s.kind != op.kind ? " (kind)" : "");
  }
  // Nothing but our tags may come back (the warm-up ops carried none).
  for (auto& [tag, s] : col.by_tag) {
    if (tag < tag_base || tag >= tag_base + list.size()) {
      std::printf("unexpected tag %" PRIu64 " (%d ops)\n", tag, s.count);
      ++failures;
    }
  }
  vgpu::cupti::RecorderStats st = rec.stats();
  std::printf("stats: delivered %" PRIu64 ", pending %" PRIu64 ", untagged_dropped %" PRIu64
              ", untimed %" PRIu64 ", cupti_dropped %" PRIu64 ", buffers %" PRIu64 "\n",
              st.delivered, st.pending, st.untagged_dropped, st.untimed, st.cupti_dropped, st.buffers);
  std::printf("[%s] %s\n", phase,
              !checked ? (failures == 0 ? "(not judged) would pass" : "(not judged) would fail")
                       : (failures == 0 ? "PASS" : "FAIL"));
  return checked ? failures : 0;
}

// ---- phase 4: runtime launches matched by stream order (expect_kernel) ----------------------

// Where a runtime launch goes, and how the passthrough backend would see that stream.
struct Place {
  std::string name;
  cudaStream_t launch;      // what the program passes to <<<>>>
  void* announce;           // the CUstream the driver entry point receives
  bool per_thread_default;  // a _ptsz entry point
  int thread;               // 0 main, 1 the second host thread
  int same_as;              // index of the place naming the same stream, or -1
};

struct Announced {
  uint64_t tag;
  int place;
  double expected_us;
};

const double kSpinsUs[] = {20, 60, 200, 600};

std::string function_name(const void* symbol) {
  cudaFunction_t f = nullptr;
  CHECK_RT(cudaGetFuncBySymbol(&f, symbol));
  const char* name = nullptr;
  CHECK_CU(cuFuncGetName(&name, reinterpret_cast<CUfunction>(f)));
  return name ? name : "";
}

// Launches `rounds` kernels on each place of `thread`, every one announced (with or without
// names), plus unannounced ones in between. Appends what it announced.
void launch_places(Recorder& rec, Gpu& g, const std::vector<Place>& places, int thread, int rounds,
                   bool with_names, uint64_t* next_tag, std::mutex& tag_mutex,
                   std::vector<Announced>& out, int* touch_buffer) {
  CHECK_RT(cudaSetDevice(0));
  CUcontext ctx = nullptr;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  const std::string spin_name = with_names ? function_name(reinterpret_cast<const void*>(&spin)) : "";
  const std::string grid_name =
      with_names ? function_name(reinterpret_cast<const void*>(&spin_grid)) : "";
  for (int r = 0; r < rounds; ++r) {
    for (size_t p = 0; p < places.size(); ++p) {
      const Place& pl = places[p];
      if (pl.thread != thread) continue;
      const double us = kSpinsUs[(r + p) % 4];
      long long cycles = static_cast<long long>(us * g.cycles_per_ms / 1000.0);
      const bool big = (r % 2) == 1;
      KernelLaunch k;
      k.context = ctx;
      k.stream = pl.announce;
      k.per_thread_default = pl.per_thread_default;
      k.name = big ? grid_name : spin_name;
      if (big) {
        k.grid[0] = 4;
        k.grid[1] = 2;
        k.block[0] = 64;
      }
      uint64_t tag;
      {
        std::lock_guard<std::mutex> lock(tag_mutex);
        tag = (*next_tag)++;
      }
      if (!rec.expect_kernel(k, tag)) {
        std::printf("expect_kernel refused place '%s' (stream id unresolved)\n", pl.name.c_str());
      } else {
        std::lock_guard<std::mutex> lock(tag_mutex);
        out.push_back({tag, static_cast<int>(p), us});
      }
      if (big) {
        spin_grid<<<dim3(4, 2, 1), dim3(64, 1, 1), 0, pl.launch>>>(cycles);
      } else {
        spin<<<1, 1, 0, pl.launch>>>(cycles);
      }
      CHECK_RT(cudaGetLastError());
      if (r % 3 == 0) touch<<<1, 32, 0, pl.launch>>>(touch_buffer);
    }
  }
}

// Runtime launches on every place (two host threads), announced; returns the failures.
int run_runtime_phase(const char* phase, bool judged, bool with_names, Recorder& rec, Gpu& g,
                      const std::vector<Place>& places, uint64_t tag_base, int* touch_buffer) {
  Collector col;
  rec.set_sink([&col](const Completed& c) { col.add(c); });
  const vgpu::cupti::RecorderStats before = rec.stats();
  constexpr int kRounds = 24;
  std::mutex tag_mutex;
  uint64_t next_tag = tag_base;
  std::vector<Announced> announced;
  std::thread second([&] {
    launch_places(rec, g, places, 1, kRounds, with_names, &next_tag, tag_mutex, announced, touch_buffer);
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread));
  });
  launch_places(rec, g, places, 0, kRounds, with_names, &next_tag, tag_mutex, announced, touch_buffer);
  second.join();
  CHECK_RT(cudaDeviceSynchronize());
  rec.flush();
  rec.set_sink(nullptr);
  const vgpu::cupti::RecorderStats st = rec.stats();

  int failures = 0;
  struct PerPlace {
    int announced = 0, delivered = 0, twice = 0, implausible = 0;
    std::set<uint32_t> stream_ids;
    double min_ratio = 1e9, max_ratio = 0;
  };
  std::vector<PerPlace> per(places.size());
  std::lock_guard<std::mutex> lock(col.mutex);
  for (const Announced& a : announced) {
    PerPlace& p = per[a.place];
    ++p.announced;
    auto it = col.by_tag.find(a.tag);
    if (it == col.by_tag.end()) continue;
    const Seen& s = it->second;
    ++p.delivered;
    if (s.count != 1) ++p.twice;
    p.stream_ids.insert(s.stream_id);
    if (s.end == 0 || s.kind != OpKind::kernel) {
      ++p.implausible;
      continue;
    }
    const double us = (s.end - s.start) / 1000.0;
    const double ratio = us / a.expected_us;
    p.min_ratio = std::min(p.min_ratio, ratio);
    p.max_ratio = std::max(p.max_ratio, ratio);
    if (us < 0.85 * a.expected_us || us > 1.6 * a.expected_us + 15.0) ++p.implausible;
  }
  std::printf("\n[%s] CUPTI: %s\n", phase, rec.library_path().c_str());
  std::printf("%-30s %9s %9s %6s %11s %14s %14s  %s\n", "stream", "announced", "delivered", "twice",
              "implausible", "cupti ids", "us/expected", "verdict");
  for (size_t i = 0; i < places.size(); ++i) {
    const PerPlace& p = per[i];
    std::string ids;
    for (uint32_t id : p.stream_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    bool ok = p.announced > 0 && p.delivered == p.announced && p.twice == 0 && p.implausible == 0 &&
              p.stream_ids.size() == 1;
    // Places naming one stream share its id; other streams have other ids (one context here).
    auto group = [&](size_t k) { return places[k].same_as >= 0 ? static_cast<size_t>(places[k].same_as) : k; };
    for (size_t j = 0; ok && j < i; ++j)
      if ((group(j) == group(i)) != (per[j].stream_ids == p.stream_ids)) ok = false;
    if (!ok) ++failures;
    char ratio[40];
    std::snprintf(ratio, sizeof ratio, "%.3f-%.3f", p.delivered ? p.min_ratio : 0.0,
                  p.delivered ? p.max_ratio : 0.0);
    std::printf("%-30s %9d %9d %6d %11d %14s %14s  %s\n", places[i].name.c_str(), p.announced,
                p.delivered, p.twice, p.implausible, ids.c_str(), ratio,
                ok ? "ok" : (judged ? "FAIL" : "would fail"));
  }
  // Tags outside the announced ones would be kernels matched to the wrong launch.
  int unexpected = 0;
  for (auto& [tag, s] : col.by_tag)
    if (tag < tag_base || tag >= next_tag) ++unexpected;
  if (unexpected) {
    std::printf("unexpected tags: %d\n", unexpected);
    ++failures;
  }
  const uint64_t dropped = st.expect_dropped - before.expect_dropped;
  std::printf("stats (this phase): expected %" PRIu64 ", matched %" PRIu64 ", expect_dropped %" PRIu64
              ", expect_pending %" PRIu64 ", unresolved %" PRIu64 ", unannounced kernels %" PRIu64
              ", duplicates %" PRIu64 ", cupti_dropped %" PRIu64 "\n",
              st.kernels_expected - before.kernels_expected, st.kernels_matched - before.kernels_matched,
              dropped, st.expect_pending, st.expect_unresolved - before.expect_unresolved,
              st.kernels_unannounced - before.kernels_unannounced, st.duplicates - before.duplicates,
              st.cupti_dropped - before.cupti_dropped);
  if (dropped != 0 || st.expect_pending != 0) ++failures;
  std::printf("[%s] %s\n", phase,
              !judged ? (failures == 0 ? "(not judged) would pass" : "(not judged) would fail")
                      : (failures == 0 ? "PASS" : "FAIL"));
  return judged ? failures : 0;
}

// Runtime launches bracketed by begin_op/end_op only (no announcement): what the tag join finds.
// Reported only. (Under vgpu the bracket sits inside the runtime, around the forwarded
// cuLaunchKernel; here it wraps the runtime call.)
void report_tag_join_for_runtime_launches(Recorder& rec, Gpu& g, cudaStream_t stream, uint64_t tag_base) {
  Collector col;
  rec.set_sink([&col](const Completed& c) { col.add(c); });
  constexpr int kLaunches = 20;
  long long cycles = static_cast<long long>(20.0 * g.cycles_per_ms / 1000.0);
  for (int i = 0; i < kLaunches; ++i) {
    rec.begin_op(tag_base + i);
    spin<<<1, 1, 0, stream>>>(cycles);
    rec.end_op();
  }
  CHECK_RT(cudaStreamSynchronize(stream));
  rec.flush();
  rec.set_sink(nullptr);
  std::lock_guard<std::mutex> lock(col.mutex);
  std::printf("\n[4b: runtime <<<>>> bracketed by begin_op/end_op only] %zu of %d delivered by the tag "
              "join (info)\n", col.by_tag.size(), kLaunches);
}

// Driver-API launches both announced and bracketed: each must come back once. Returns failures.
int run_announced_and_tagged(Recorder& rec, Gpu& g, uint64_t tag_base) {
  Collector col;
  rec.set_sink([&col](const Completed& c) { col.add(c); });
  const vgpu::cupti::RecorderStats before = rec.stats();
  CUcontext ctx = nullptr;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  const std::string name = function_name(reinterpret_cast<const void*>(&spin));
  constexpr int kLaunches = 12;
  for (int i = 0; i < kLaunches; ++i) {
    KernelLaunch k;
    k.context = ctx;
    k.stream = g.stream;
    k.name = name;
    rec.expect_kernel(k, tag_base + i);
    rec.begin_op(tag_base + i);
    launch_spin(g, kSpinsUs[i % 4] / 1000.0);
    rec.end_op();
  }
  CHECK_CU(cuStreamSynchronize(g.stream));
  rec.flush();
  rec.set_sink(nullptr);
  const vgpu::cupti::RecorderStats st = rec.stats();
  int failures = 0, once = 0;
  std::lock_guard<std::mutex> lock(col.mutex);
  for (int i = 0; i < kLaunches; ++i) {
    auto it = col.by_tag.find(tag_base + i);
    const double expected = kSpinsUs[i % 4];
    if (it == col.by_tag.end() || it->second.count != 1 || it->second.end == 0) {
      ++failures;
      continue;
    }
    const double us = (it->second.end - it->second.start) / 1000.0;
    if (us < 0.85 * expected || us > 1.6 * expected + 15.0) {
      ++failures;
      continue;
    }
    ++once;
  }
  // Delivered by the stream-order join, not the tag join.
  if (st.kernels_matched - before.kernels_matched != static_cast<uint64_t>(kLaunches)) ++failures;
  std::printf("\n[4c: driver-API launches announced and bracketed] %d of %d delivered exactly once "
              "with their duration; matched by stream order %" PRIu64 ", duplicates %" PRIu64 " -> %s\n",
              once, kLaunches, st.kernels_matched - before.kernels_matched,
              st.duplicates - before.duplicates, failures == 0 ? "PASS" : "FAIL");
  return failures;
}

int runtime_phases(Gpu& g) {
  std::unique_ptr<Recorder> rec = Recorder::start();
  if (!rec) {
    std::printf("recorder 4 failed to start\n");
    return 1;
  }
  cudaStream_t a, b, blocking, t2;
  CHECK_RT(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK_RT(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  CHECK_RT(cudaStreamCreate(&blocking));
  CHECK_RT(cudaStreamCreateWithFlags(&t2, cudaStreamNonBlocking));
  int* touch_buffer = nullptr;
  CHECK_RT(cudaMalloc(&touch_buffer, 32 * sizeof(int)));
  void* const legacy = reinterpret_cast<void*>(1);      // CU_STREAM_LEGACY
  void* const per_thread = reinterpret_cast<void*>(2);  // CU_STREAM_PER_THREAD
  std::vector<Place> places = {
      {"legacy default (0)", 0, nullptr, false, 0, -1},
      {"cudaStreamLegacy", cudaStreamLegacy, legacy, false, 0, 0},
      {"per-thread (handle)", cudaStreamPerThread, per_thread, false, 0, -1},
      {"per-thread (0 under _ptsz)", cudaStreamPerThread, nullptr, true, 0, 2},
      {"created non-blocking A", a, a, false, 0, -1},
      {"created non-blocking B", b, b, false, 0, -1},
      {"created blocking", blocking, blocking, false, 0, -1},
      {"thread 2: per-thread", cudaStreamPerThread, per_thread, false, 1, -1},
      {"thread 2: created", t2, t2, false, 1, -1},
  };
  // Warm-up, unannounced: loads the kernels.
  spin<<<1, 1>>>(1);
  spin_grid<<<1, 1>>>(1);
  touch<<<1, 32>>>(touch_buffer);
  CHECK_RT(cudaDeviceSynchronize());
  rec->flush();

  int failures = 0;
  failures += run_runtime_phase("4a: runtime <<<>>> announced with expect_kernel", true, true, *rec, g,
                                places, 100000, touch_buffer);
  report_tag_join_for_runtime_launches(*rec, g, a, 200000);
  failures += run_announced_and_tagged(*rec, g, 300000);
  run_runtime_phase("4d: as 4a, announced without names", false, false, *rec, g, places, 400000,
                    touch_buffer);
  // A destroyed stream's handle may come back: the caller forgets it.
  for (cudaStream_t s : {a, b, blocking, t2}) {
    rec->forget_stream(nullptr, s);
    CHECK_RT(cudaStreamDestroy(s));
  }
  CHECK_RT(cudaFree(touch_buffer));
  return failures;
}

}  // namespace

int main() {
  int failures = 0;
  Gpu g;
  {
    // As vgpu starts it: before the program's first CUDA call, default options.
    std::unique_ptr<Recorder> rec = Recorder::start();
    if (!rec) {
      std::printf("CUPTI unavailable (VGPU_LOG_LEVEL=warn says why)\n");
      return 3;
    }
    setup(g);
    failures += run_phase("1: started before cuInit, defaults", true, *rec, g, 1000);
  }
  {
    // Reported, not judged: whether CUPTI writes our tags without driver API records.
    RecorderOptions o;
    o.driver_api_records = false;
    std::unique_ptr<Recorder> rec = Recorder::start(o);
    if (!rec) {
      std::printf("recorder 2 failed to start\n");
      return 1;
    }
    failures += run_phase("2: live context, driver API records off", false, *rec, g, 2000);
  }
  {
    std::unique_ptr<Recorder> rec = Recorder::start();
    if (!rec) {
      std::printf("recorder 3 failed to start\n");
      return 1;
    }
    failures += run_phase("3: started again on a live context, defaults", true, *rec, g, 3000);
  }
  failures += runtime_phases(g);
  // Reported only: host cost per launch of an empty kernel with and without a recorder bracketing it.
  {
    CUcontext ctx = nullptr;
    CHECK_CU(cuCtxGetCurrent(&ctx));
    const std::string name = function_name(reinterpret_cast<const void*>(&spin));
    // announce: also expect_kernel before each launch, as the passthrough backend does.
    auto per_launch_us = [&](Recorder* rec, bool announce) {
      constexpr int kLaunches = 20000;
      long long zero = 0;
      void* args[] = {&zero};
      KernelLaunch k;
      k.context = ctx;
      k.stream = g.stream;
      k.name = name;
      CHECK_CU(cuStreamSynchronize(g.stream));
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kLaunches; ++i) {
        if (rec && announce) rec->expect_kernel(k, 9000000 + i);
        if (rec) rec->begin_op(9000000 + i);
        CHECK_CU(cuLaunchKernel(g.spin, 1, 1, 1, 1, 1, 1, 0, g.stream, args, nullptr));
        if (rec) rec->end_op();
        if (i % 1000 == 999) CHECK_CU(cuStreamSynchronize(g.stream));  // keep the queue short
      }
      CHECK_CU(cuStreamSynchronize(g.stream));
      auto t1 = std::chrono::steady_clock::now();
      return std::chrono::duration<double, std::micro>(t1 - t0).count() / kLaunches;
    };
    double bare = per_launch_us(nullptr, false);
    std::unique_ptr<Recorder> rec = Recorder::start();
    double traced = rec ? per_launch_us(rec.get(), false) : -1;
    if (rec) rec->flush();
    uint64_t delivered_traced = rec ? rec->stats().delivered : 0;
    double announced = rec ? per_launch_us(rec.get(), true) : -1;
    if (rec) rec->flush();
    std::printf("\nlaunch+sync cost per empty kernel: %.2f us without a recorder, %.2f us with "
                "begin_op/end_op around each (%" PRIu64 " delivered), %.2f us with expect_kernel too "
                "(%" PRIu64 " matched by stream order, %" PRIu64 " expect_dropped)\n",
                bare, traced, delivered_traced, announced, rec ? rec->stats().kernels_matched : 0,
                rec ? rec->stats().expect_dropped : 0);
  }
  std::printf("\n%s (%d failures in judged phases)\n", failures == 0 ? "ALL PASS" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
