// CUPTI's durations (through vgpu::cupti::Recorder) against cudaEvent durations, on the real driver
// (no vgpu). Each op is issued through the driver API, as the passthrough backend forwards it,
// bracketed by begin_op(tag)/end_op() and by two events on its stream. Kernels spin for 0.1, 1 and
// 10 ms; copies and a memset move 64 MiB.
//
// Three recorders in turn in one process: started before CUDA initializes (as vgpu starts it);
// then on the live context with driver API records off (reported only: CUPTI then writes no tag
// records, which is why they are on by default); then again with the defaults.
// Exit status: 0 all ops present and within 5% + 5 us; 1 a mismatch or missing op; 3 no CUPTI.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cupti_profiler/recorder.h"

using vgpu::cupti::Completed;
using vgpu::cupti::OpKind;
using vgpu::cupti::Recorder;
using vgpu::cupti::RecorderOptions;

__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

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
};

struct Collector {
  std::mutex mutex;
  std::map<uint64_t, Seen> by_tag;
  void add(const Completed& c) {
    std::lock_guard<std::mutex> lock(mutex);
    Seen& s = by_tag[c.tag];
    ++s.count;
    s.kind = c.kind;
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
  // Reported only: host cost per launch of an empty kernel with and without a recorder bracketing it.
  {
    auto per_launch_us = [&g](Recorder* rec) {
      constexpr int kLaunches = 20000;
      long long zero = 0;
      void* args[] = {&zero};
      CHECK_CU(cuStreamSynchronize(g.stream));
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kLaunches; ++i) {
        if (rec) rec->begin_op(9000000 + i);
        CHECK_CU(cuLaunchKernel(g.spin, 1, 1, 1, 1, 1, 1, 0, g.stream, args, nullptr));
        if (rec) rec->end_op();
        if (i % 1000 == 999) CHECK_CU(cuStreamSynchronize(g.stream));  // keep the queue short
      }
      CHECK_CU(cuStreamSynchronize(g.stream));
      auto t1 = std::chrono::steady_clock::now();
      return std::chrono::duration<double, std::micro>(t1 - t0).count() / kLaunches;
    };
    double bare = per_launch_us(nullptr);
    std::unique_ptr<Recorder> rec = Recorder::start();
    double traced = rec ? per_launch_us(rec.get()) : -1;
    if (rec) rec->flush();
    std::printf("\nlaunch+sync cost per empty kernel: %.2f us without a recorder, %.2f us with one "
                "(begin_op/end_op around each; %" PRIu64 " delivered)\n",
                bare, traced, rec ? rec->stats().delivered : 0);
  }
  std::printf("\n%s (%d failures in judged phases)\n", failures == 0 ? "ALL PASS" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
