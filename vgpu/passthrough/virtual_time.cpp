#include "passthrough/virtual_time.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "timing/launch_latency.h"
#include "timing/stream_order.h"
#include "passthrough/nccl_timing.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/thread_clock.h"
#include "passthrough/timeline_writer.h"

namespace vgpu::pt {
namespace {

// Stands for the calling thread's per-thread default stream in stream keys.
thread_local char t_per_thread_stream;

constexpr uint32_t kResolveEvery = 256;  // a thread's submissions between opportunistic resolves
constexpr int kCalibrationTries = 8;    // gate calibrations a context may try (gate_latency.h)

using EventRecordFn = CUresult (*)(CUevent, CUstream);
using EventQueryFn = CUresult (*)(CUevent);
using ElapsedFn = CUresult (*)(float*, CUevent, CUevent);

CUresult real_record(CUevent e, CUstream s) { return VGPU_REAL("cuEventRecord", EventRecordFn)(e, s); }

}  // namespace

struct VirtualTime::Impl {
  struct StreamInfo {
    CUcontext context;
    StreamKind kind;
  };
  struct Measurement {
    CUevent begin, end;
    CUcontext context;
    Timing timing;
    GateLatency latency;  // given back from the elapsed time (gated measurements)
  };

  std::mutex mu;
  std::unordered_map<CUstream, StreamInfo> streams;
  std::unordered_map<CUevent, int> event_devices;  // the program's events: their virtual device
  std::unordered_map<uint64_t, Measurement> measurements;
  std::unordered_map<CUcontext, std::vector<CUevent>> event_pool;
  // Per context: a host flag the GPU can wait on (Bracket's gate); null when unavailable.
  struct Gate {
    volatile uint32_t* host = nullptr;
    CUdeviceptr device = 0;
    uint32_t value = 0;
    int calibrations = 0;  // tries so far (gate_latency.h)
    GateLatency latency;
  };
  std::unordered_map<CUcontext, Gate> gates;
  uint64_t next_measurement = 0;

  // Runs `f` with `ctx` current.
  template <class F>
  auto in_context(CUcontext ctx, F f) {
    CUcontext current = nullptr;
    VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&current);
    const bool switch_ctx = current != ctx;
    if (switch_ctx) VGPU_REAL("cuCtxPushCurrent_v2", CUresult (*)(CUcontext))(ctx);
    auto r = f();
    if (switch_ctx) {
      CUcontext popped = nullptr;
      VGPU_REAL("cuCtxPopCurrent_v2", CUresult (*)(CUcontext*))(&popped);
    }
    return r;
  }
  // A timing event of `ctx` (created with the context current).
  CUevent take_event(CUcontext ctx) {
    {
      std::lock_guard l(mu);
      auto& pool = event_pool[ctx];
      if (!pool.empty()) {
        CUevent e = pool.back();
        pool.pop_back();
        return e;
      }
    }
    return in_context(ctx, [] {
      CUevent e = nullptr;
      return VGPU_REAL("cuEventCreate", CUresult (*)(CUevent*, unsigned))(&e, CU_EVENT_DEFAULT) == CUDA_SUCCESS
                 ? e
                 : nullptr;
    });
  }
  // The context's gate, made on first use (with the context current); host null when the
  // driver cannot make one.
  Gate* gate(CUcontext ctx) {
    std::lock_guard l(mu);
    auto it = gates.find(ctx);
    if (it != gates.end()) return it->second.host ? &it->second : nullptr;
    Gate g;
    in_context(ctx, [&g] {
      void* p = nullptr;
      if (VGPU_REAL("cuMemHostAlloc", CUresult (*)(void**, size_t, unsigned))(
              &p, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS &&
          VGPU_REAL("cuMemHostGetDevicePointer_v2", CUresult (*)(CUdeviceptr*, void*, unsigned))(&g.device, p, 0) ==
              CUDA_SUCCESS) {
        g.host = static_cast<volatile uint32_t*>(p);
        *g.host = 0;
      }
      return 0;
    });
    auto& stored = gates[ctx] = g;
    return stored.host ? &stored : nullptr;
  }
  void give_back(CUcontext ctx, CUevent e) {
    if (e == nullptr) return;
    std::lock_guard l(mu);
    event_pool[ctx].push_back(e);
  }
};

VirtualTime* VirtualTime::get() { return Passthrough::get().virtual_time(); }

VirtualTime* VirtualTime::make() {
  // Lives until exit: programs synchronize from exit handlers.
  auto* v = new VirtualTime;
  v->impl_ = new Impl;
  // Each virtual device's busy time, kernel count and virtual clock, for vgpu-smi and
  // vgpu-run's summary (status region).
  TimelineWriter* trace = TimelineWriter::get();  // VGPU_TIMELINE
  // Every op written out: event records keep theirs (virtual_timeline.h).
  v->timeline_.set_elide_event_records(trace == nullptr);
  v->timeline_.set_on_resolved([trace](const TimedOp& op) {
    if (trace != nullptr) trace->add(op);
    if (op.duration <= 0 && !op.kernel) return;
    if (PassState* s = PassState::get()) s->report_work(op.device, op.duration, op.kernel, op.finish);
  });
  return v;
}

bool VirtualTime::target_looked_up(CUstream stream, bool per_thread, StreamTarget* out, TargetCache& cache) {
  out->real = stream;
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (cache.owner != this || cache.generation != generation) {
    cache = TargetCache{};
    cache.owner = this;
    cache.generation = generation;
  }
  const timing::StreamArg arg = timing::stream_arg(stream, per_thread);
  if (arg != timing::StreamArg::handle) {
    CUcontext ctx = nullptr;
    if (VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx) != CUDA_SUCCESS || ctx == nullptr)
      return false;
    const bool ptds = arg == timing::StreamArg::per_thread;
    out->context = ctx;
    out->key = {ctx, ptds ? static_cast<const void*>(&t_per_thread_stream) : nullptr};
    out->kind = timing::stream_kind(arg, false);
    out->record_on = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  } else if (cache.stream == stream && stream != nullptr) {
    out->context = cache.context;
    out->key = {cache.context, stream};
    out->kind = cache.kind;
    out->record_on = stream;
  } else {
    Impl::StreamInfo info{};
    bool known;
    {
      std::lock_guard l(impl_->mu);
      auto it = impl_->streams.find(stream);
      known = it != impl_->streams.end();
      if (known) info = it->second;
    }
    if (!known) {
      unsigned flags = 0;
      if (VGPU_REAL("cuStreamGetCtx", CUresult (*)(CUstream, CUcontext*))(stream, &info.context) != CUDA_SUCCESS ||
          VGPU_REAL("cuStreamGetFlags", CUresult (*)(CUstream, unsigned*))(stream, &flags) != CUDA_SUCCESS)
        return false;
      info.kind = timing::stream_kind(timing::StreamArg::handle, (flags & CU_STREAM_NON_BLOCKING) != 0);
      std::lock_guard l(impl_->mu);
      impl_->streams.emplace(stream, info);
    }
    out->context = info.context;
    out->key = {info.context, stream};
    out->kind = info.kind;
    out->record_on = stream;
    cache.stream = stream;
    cache.context = info.context;
    cache.kind = info.kind;
  }
  if (cache.device_context != out->context || cache.device < 0) {
    PassState* s = PassState::get();
    cache.device_context = out->context;
    cache.device = s ? s->device_of(out->context) : -1;  // < 0 (unknown): asked again next time
  }
  out->device = std::max(0, cache.device);
  return true;
}

// Each moves the record memos' generation after the count: a thread that reads the generation
// from before reads the count from before too, and its memo is stale once made.
void VirtualTime::capture_opened() {
  open_captures_.fetch_add(1, std::memory_order_acq_rel);
  timeline_.invalidate_record_memos();
}

void VirtualTime::capture_closed() {
  int n = open_captures_.load(std::memory_order_acquire);
  while (n > 0 && !open_captures_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
  }
  timeline_.invalidate_record_memos();
}

bool VirtualTime::capturing_now(const StreamTarget& t) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = VGPU_REAL("cuStreamIsCapturing", CUresult (*)(CUstream, CUstreamCaptureStatus*))(t.record_on, &status);
  // An error here means a capture elsewhere forbids touching this stream: do not add work.
  return r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

VirtualTime::Bracket VirtualTime::begin(const StreamTarget& t, const Timing& timing, bool gated) {
  Bracket b;
  if (timing.source == Timing::Source::known) return b;
  CUevent e = impl_->take_event(t.context);
  if (e == nullptr) return b;
  if (gated) {
    if (Impl::Gate* g = impl_->gate(t.context)) {
      // Measurements of one context are serialized (measure_lock.h): the gate's counter and
      // its calibration, made before the context's first gated measurement, need no lock.
      if (!g->latency.calibrated() && g->calibrations < kCalibrationTries) {
        ++g->calibrations;
        g->latency = impl_->in_context(t.context, [g] { return measure_gate_latency(g->host, g->device, &g->value); });
      }
      b.latency_ = g->latency;
      const uint32_t value = ++g->value;
      if (VGPU_REAL("cuStreamWaitValue32_v2", CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned))(
              t.record_on, g->device, value, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS) {
        b.gate_ = g->host;
        b.gate_value_ = value;
      }
    }
  }
  b.begin_ = e;
  b.context_ = t.context;
  if (real_record(e, t.record_on) != CUDA_SUCCESS) {
    b.begin_ = nullptr;
    impl_->give_back(t.context, e);
  }
  return b;
}

void VirtualTime::open_gate(Bracket& b) {
  if (b.gate_ == nullptr) return;
  __atomic_store_n(b.gate_, b.gate_value_, __ATOMIC_RELEASE);
  b.gate_ = nullptr;
}

void VirtualTime::abandon(Bracket& b) {
  open_gate(b);
  impl_->give_back(b.context_, b.begin_);
  b.begin_ = nullptr;
}

OpRef VirtualTime::submit(const StreamTarget& t, Timing&& timing, Bracket& b, bool keep_op,
                          const thread_clock::Pause* pause) {
  const double issue = issue_time(t.device, pause);
  double duration = timing.source == Timing::Source::known ? timing.seconds : -1;
  // Read before `timing` moves into the measurement: once the op is on the timeline another
  // thread's resolve may measure it and erase that measurement.
  const bool nccl = timing.source == Timing::Source::nccl;
  const int nccl_gpu = timing.nccl_gpu;
  const nccl_timing::Attribution nccl_attribution = nccl ? timing.nccl : nccl_timing::Attribution{};
  const bool kernel = timing.kernel;
  std::string label = std::move(timing.label);
  uint64_t id = 0;
  if (duration < 0) {
    CUevent end = b.active() ? impl_->take_event(t.context) : nullptr;
    if (end == nullptr || real_record(end, t.record_on) != CUDA_SUCCESS) {
      // Cannot measure: the op counts as instantaneous (logged once).
      log::once(log::Level::warn, "vtime-unmeasured",
                "passthrough: could not place timing events on a stream; some ops take no virtual time");
      impl_->give_back(t.context, end);
      abandon(b);
      duration = 0;
    } else {
      std::lock_guard l(impl_->mu);
      id = ++impl_->next_measurement;
      impl_->measurements.emplace(id, Impl::Measurement{b.begin_, end, t.context, std::move(timing),
                                                        b.gate_ ? b.latency_ : GateLatency{}});
      b.begin_ = nullptr;
    }
  }
  open_gate(b);
  OpRef op = !keep_op && id == 0 && !nccl && duration >= 0
                 ? timeline_.append_unless_placed(t.key, t.kind, t.device, issue, duration, kernel, std::move(label))
                 : timeline_.append(t.key, t.kind, t.device, issue, duration, {}, id, kernel, std::move(label),
                                    /*start_first=*/nccl);
  CallThread& thread = pause != nullptr ? pause->thread() : this_call_thread();
  if (thread.traces < 0) thread.traces = log::enabled(log::Level::trace) ? 1 : 0;
  if (thread.traces > 0)
    log::trace("vtime: op on device {} stream {} issue {:.9f} duration {:.9f}", t.device, t.key.stream, issue,
               duration);
  // Counted per thread (CallThread::submissions): a process-wide counter was a locked
  // instruction on every launch and copy, on a cache line every thread's calls read.
  const bool resolve_now = ++thread.submissions % kResolveEvery == 0;
  // Not under impl_->mu: the timeline's lock is taken first everywhere else (resolve -> measure).
  if (id != 0 && nccl) {
    nccl_timing::launched(nccl_attribution, op);
    const std::optional<double> start = timeline_.start_if_ready(op);
    nccl_timing::set_kernel_start(nccl_gpu, start ? *start : issue);
    log::debug("vtime: NCCL kernel on gpu {} (launch {}) issued {:.9f}, start {}", nccl_gpu, nccl_attribution.launch,
               issue, start ? fmt::format("{:.9f}", *start) : std::string("not known yet"));
  }
  if (resolve_now) resolve(nullptr);
  return op;
}

void VirtualTime::wait_measured(const OpRef& op, double timeout_s) {
  if (!op || op->measurement == 0) return;
  CUevent end = nullptr;
  {
    std::lock_guard l(impl_->mu);
    auto it = impl_->measurements.find(op->measurement);
    if (it == impl_->measurements.end()) return;
    end = it->second.end;
  }
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (VGPU_REAL("cuEventQuery", EventQueryFn)(end) != CUDA_ERROR_NOT_READY) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (static_cast<double>(now.tv_sec - start.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec - start.tv_nsec) >
        timeout_s)
      return;
    sched_yield();
  }
}

double VirtualTime::measure(TimedOp& op, std::optional<double> start_if_needed, bool force) {
  Impl::Measurement m;
  {
    std::lock_guard l(impl_->mu);
    auto it = impl_->measurements.find(op.measurement);
    if (it == impl_->measurements.end()) return force ? 0 : -1;
    m = it->second;
  }
  CUresult r = VGPU_REAL("cuEventQuery", EventQueryFn)(m.end);
  if (r == CUDA_ERROR_NOT_READY) {
    if (!force) return -1;
    r = VGPU_REAL("cuEventSynchronize", EventQueryFn)(m.end);
  }
  float ms = 0;
  if (r == CUDA_SUCCESS) r = VGPU_REAL("cuEventElapsedTime", ElapsedFn)(&ms, m.begin, m.end);
  double seconds = 0;
  if (r != CUDA_SUCCESS) {
    log::once(log::Level::warn, "vtime-measure",
              fmt::format("passthrough: reading a timing event failed ({}); the op takes no virtual time",
                          static_cast<int>(r)));
  } else {
    seconds = static_cast<double>(ms) * 1e-3;
    if (m.latency.calibrated()) seconds = std::max(seconds - m.latency.overhead, m.latency.floor);
  }
  if (m.timing.source == Timing::Source::nccl) {
    const double start = start_if_needed.value_or(op.issue);  // given: appended start_first
    seconds = nccl_timing::finish(m.timing.nccl_gpu, m.timing.nccl, start, &op.moving_from) - start;
    log::debug("vtime: NCCL kernel on gpu {} (launch {}, log window from {}) {:.9f} .. {:.9f}, real {:.9f} s",
               m.timing.nccl_gpu, m.timing.nccl.launch, m.timing.nccl.since, start, start + seconds,
               static_cast<double>(ms) * 1e-3);
  } else if (r == CUDA_SUCCESS && m.timing.on_measured) {
    seconds = m.timing.on_measured(seconds);
  }
  {
    std::lock_guard l(impl_->mu);
    impl_->measurements.erase(op.measurement);
  }
  impl_->give_back(m.context, m.begin);
  impl_->give_back(m.context, m.end);
  return seconds;
}

std::optional<double> VirtualTime::start_of(const OpRef& op) {
  if (std::optional<double> s = timeline_.start_if_ready(op, /*wait=*/false)) return s;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  int64_t last = last_start_resolve_ns_.load(std::memory_order_relaxed);
  if (ns - last < static_cast<int64_t>(kStartResolveSeconds * 1e9) ||
      !last_start_resolve_ns_.compare_exchange_strong(last, ns, std::memory_order_relaxed))
    return std::nullopt;
  resolve(nullptr, /*wait=*/false);
  return timeline_.start_if_ready(op, /*wait=*/false);
}

void VirtualTime::resolve(const OpRef& target, bool wait) {
  timeline_.resolve(
      [this](TimedOp& op, std::optional<double> start, bool force) { return measure(op, start, force); },
      target, wait);
}

void VirtualTime::stream_waits(const StreamTarget& t, CUevent event) {
  OpRef waited = event_op(event);
  if (!waited) return;
  timeline_.append(t.key, t.kind, t.device, issue_time(t.device), 0, {waited});
}

void VirtualTime::event_created(CUevent event, int device) {
  std::lock_guard l(impl_->mu);
  impl_->event_devices[event] = device;
  event_generation_.fetch_add(1, std::memory_order_acq_rel);  // threads' cached event devices
  timeline_.invalidate_record_memos();  // a memo of the same handle may hold another device's answer
}

int VirtualTime::event_device_looked_up(CUevent event, EventDeviceCache& cache) {
  std::lock_guard l(impl_->mu);
  auto it = impl_->event_devices.find(event);
  const int device = it == impl_->event_devices.end() ? -1 : it->second;
  // Read under the lock that creations and destructions bump it under: the pair is consistent.
  cache = {this, event_generation_.load(std::memory_order_relaxed), event, device};
  return device;
}

void VirtualTime::event_destroyed(CUevent event) {
  timeline_.forget_event(event);
  std::lock_guard l(impl_->mu);
  impl_->event_devices.erase(event);
  event_generation_.fetch_add(1, std::memory_order_acq_rel);  // threads' cached event devices
  timeline_.invalidate_record_memos();  // after the erase, as above
}

OpRef VirtualTime::event_op(CUevent event) { return timeline_.event_op(event); }

std::optional<float> VirtualTime::elapsed_ms(CUevent start, CUevent end) {
  OpRef a = event_op(start), b = event_op(end);
  if (!a || !b) return std::nullopt;
  resolve(a);
  resolve(b);
  const std::optional<double> fa = timeline_.finish(a), fb = timeline_.finish(b);
  if (!fa || !fb) return std::nullopt;
  return static_cast<float>((*fb - *fa) * 1e3);
}

void VirtualTime::synchronized(const OpRef& op, int device) {
  if (op) {
    resolve(op);
    if (const std::optional<double> f = timeline_.finish(op)) thread_clock::advance_to(*f, device);
  }
  // The work reported in batches goes to the status region (device_activity.h): a program that
  // synchronized sees all its work in vgpu-smi. (Inside the synchronization's Pause: not charged.)
  if (PassState* s = PassState::get()) s->flush_reported_work();
}

void VirtualTime::context_synchronized(CUcontext context, int device) {
  const std::vector<OpRef> tails = timeline_.tails_of_context(context);
  for (const OpRef& op : tails) synchronized(op, device);
  if (tails.empty()) synchronized(nullptr, device);
}

void VirtualTime::stream_destroyed(CUstream stream) {
  CUcontext ctx = nullptr;
  {
    std::lock_guard l(impl_->mu);
    auto it = impl_->streams.find(stream);
    if (it != impl_->streams.end()) {
      ctx = it->second.context;
      impl_->streams.erase(it);
    }
  }
  // After the erase: a thread's target() that misses its cache from here on finds it gone.
  generation_.fetch_add(1, std::memory_order_acq_rel);
  timeline_.invalidate_record_memos();  // also for a stream the timeline never had
  if (ctx != nullptr) timeline_.destroy_stream({ctx, stream});
}

void VirtualTime::context_destroyed(CUcontext context) {
  timeline_.forget_context(context);
  {
    std::lock_guard l(impl_->mu);
    std::erase_if(impl_->streams, [context](const auto& kv) { return kv.second.context == context; });
    impl_->event_pool.erase(context);  // the context took its events with it
    std::erase_if(impl_->measurements, [context](const auto& kv) { return kv.second.context == context; });
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);  // threads' cached targets and devices (target())
  timeline_.invalidate_record_memos();
}

}  // namespace vgpu::pt
