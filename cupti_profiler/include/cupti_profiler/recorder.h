// The real GPU duration of each forwarded kernel, copy and memset, measured by the CUPTI Activity
// API. Two ways to name an op:
//  - expect_kernel(launch, tag) right before forwarding a kernel launch: the next kernel record
//    of that CUDA stream with the same name and shape is the launch's (stream order). Works
//    whichever API the program launched through (the CUDA runtime included).
//  - begin_op(tag) / end_op() around any forwarded driver call (copies, memsets, graph launches):
//    CUPTI's external correlation joins the op's record to the tag. Only reliable for ops whose
//    record carries the correlation id of the bracketed driver call, i.e. not for kernels the CUDA
//    runtime launched (their records carry the runtime call's id).
// The recorder hands each op's device start/end timestamps to the sink under its tag.
//
// CUPTI is optional at run time: it is dlopen'ed (never linked), so a process without it simply
// gets no recorder. This header names no CUPTI or CUDA type, so any translation unit (including
// nvcc-compiled ones) can include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace vgpu::cupti {

enum class OpKind { kernel, memcpy, memset };

// One op executed on the device. start_ns/end_ns are CUPTI timestamps (ns); both are 0 when CUPTI
// delivered the record without timing (e.g. a forced flush caught it unfinished). One tag can
// complete several times when one driver call produced several device ops (a graph launch, a
// copy the driver split): the consumer gets each of them.
struct Completed {
  uint64_t tag;
  OpKind kind;
  uint64_t start_ns, end_ns;
  uint32_t stream_id = 0;  // CUPTI's id of the stream it ran on (unique within its context); 0: unknown
};

// Identifies the kernel a forwarded launch will produce. `context`/`stream` are the CUcontext and
// CUstream handles the launch was forwarded with: stream may be 0, CU_STREAM_LEGACY ((void*)1) or
// CU_STREAM_PER_THREAD ((void*)2); `per_thread_default` is true when the entry point was a _ptsz
// variant, so that stream 0 means the calling thread's per-thread default stream. `context` must
// be the launch's context (the current one), not null. `name` is the function's name as
// cuFuncGetName/cuKernelGetName return it (mangled); empty when unknown (then any name matches).
struct KernelLaunch {
  void* context = nullptr;
  void* stream = nullptr;
  bool per_thread_default = false;
  std::string_view name;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
};

// Counters of what the recorder saw, for logs and tests.
struct RecorderStats {
  uint64_t delivered = 0;          // ops handed to the sink (or dropped for want of a sink)
  uint64_t untagged_dropped = 0;   // ops whose correlation never met a tag within the window
  uint64_t pending = 0;            // ops waiting for their tag right now
  uint64_t untimed = 0;            // delivered ops that CUPTI reported without timestamps
  uint64_t cupti_dropped = 0;      // records CUPTI lost because its buffers were full
  uint64_t buffers = 0;            // activity buffers processed
  // expect_kernel (stream-order join):
  uint64_t kernels_expected = 0;     // announcements accepted
  uint64_t kernels_matched = 0;      // of those, delivered (also counted in `delivered`)
  uint64_t expect_dropped = 0;       // overtaken by later kernels of their stream, or aged out
  uint64_t expect_pending = 0;       // announcements waiting for their kernel right now
  uint64_t expect_cancelled = 0;     // withdrawn by cancel_kernel
  uint64_t expect_unresolved = 0;    // expect_kernel calls that returned false (stream id unknown)
  uint64_t kernels_unannounced = 0;  // kernel records that matched no announcement (graph nodes,
                                     // launches not announced); they go on to the tag join
  uint64_t duplicates = 0;           // kernels both announced and tagged: delivered once, counted here
};

struct RecorderOptions {
  // CUPTI_ACTIVITY_KIND_KERNEL instead of CONCURRENT_KERNEL: CUPTI serializes every kernel, so
  // each is measured alone (slower; NCCL kernels of several ranks then cannot overlap).
  bool serialize_kernels = false;
  // CUPTI_ACTIVITY_KIND_DRIVER (one API record per driver call). Needed: CUPTI 13 writes the
  // EXTERNAL_CORRELATION records that carry our tags only beside API records; without them no op
  // is ever reported (measured on an H100 with the 580 driver, tests/gpu/cupti_check). Settable
  // only so that this can be checked again.
  bool driver_api_records = true;
  // Size of each activity buffer handed to CUPTI.
  size_t buffer_bytes = 4u << 20;
  // If > 0, ask CUPTI to hand over completed buffers at least this often (cuptiActivityFlushPeriod);
  // 0 leaves it to CUPTI's heuristics and to flush().
  uint32_t flush_period_ms = 0;
  // How many recent correlation ids are remembered on each side while waiting for the other; also
  // how many later announcements (all streams together) an expect_kernel announcement waits
  // through before it is forgotten.
  size_t pending_window = 1u << 16;
  // How many later kernels of its stream may overtake an announced kernel before it is given up.
  // One stream runs its kernels in order, so an overtaken announcement normally never completes
  // (its launch failed or was captured into a graph, or CUPTI lost the record); a little
  // tolerance keeps two threads that announce and launch on one stream in a race, or buffers
  // processed out of order, from losing measurements. 0: drop at the first overtaking.
  size_t overtake_tolerance = 16;
};

class Recorder {
 public:
  // Loads libcupti (VGPU_CUPTI_LIBRARY, else libcupti.so.13 / libcupti.so from the loader path,
  // the toolkit, and the nvidia python wheels), registers the buffer callbacks and enables
  // kernel, memcpy, memset and external-correlation activity. Returns nullptr (and logs one line)
  // when CUPTI is unavailable or cannot be enabled, or when another Recorder is already active
  // (CUPTI's buffer callbacks are process-wide: one recorder per process at a time).
  static std::unique_ptr<Recorder> start(const RecorderOptions& options = {});

  // Bracket one forwarded driver call on the calling thread: every device op that call issues is
  // reported with `tag`. Calls nest (CUPTI keeps a per-thread stack). Never fail the caller.
  void begin_op(uint64_t tag);
  void end_op();

  // Announce a kernel launch about to be forwarded: call it right before forwarding, on the
  // launching thread (a per-thread default stream is the calling thread's). The next kernel
  // record CUPTI reports on the same stream with the same name, grid and block is delivered as
  // Completed{tag, OpKind::kernel, start, end, stream_id}. Kernel records that match no
  // announcement (graph nodes, launches not announced) are skipped here (the tag join still sees
  // them); announcements overtaken by later kernels of their stream (see
  // RecorderOptions::overtake_tolerance) are dropped and counted (stats().expect_dropped).
  // A kernel also bracketed by begin_op/end_op is delivered once, by this path.
  // Returns false (the launch then gets no measurement from this path) when the CUPTI stream id
  // cannot be resolved. Never throws; one log line per kind of problem.
  bool expect_kernel(const KernelLaunch& launch, uint64_t tag);
  // The announced launch was not forwarded, or failed, or went into a stream capture: forget the
  // announcement (newest one of `tag` on that stream) so it cannot take another kernel's record.
  void cancel_kernel(const KernelLaunch& launch, uint64_t tag);
  // Stream ids are cached per (context, stream handle). Handles are reused after destruction:
  // call forget_stream on cuStreamDestroy and forget_context on cuCtxDestroy /
  // cuDevicePrimaryCtxReset (before or after forwarding; kernels already announced on them are
  // still matched).
  void forget_stream(void* context, void* stream);
  void forget_context(void* context);

  // Receives each completed op that carried a tag. Called from CUPTI's buffer-completion thread,
  // or from the thread calling flush(); calls are serialized. The sink must not call flush() or
  // destroy the recorder. Exceptions it throws are caught and logged.
  void set_sink(std::function<void(const Completed&)> sink);

  // Hands over every buffered record now (cuptiActivityFlushAll with FLUSH_FORCED); the sink has
  // been called for them when this returns. Synchronize the device work first: an op still
  // running is delivered untimed.
  void flush();

  RecorderStats stats() const;
  // Where libcupti was loaded from.
  const std::string& library_path() const;

  // Flushes, disables the activity kinds and detaches from CUPTI's callbacks.
  ~Recorder();

  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  struct Impl;

 private:
  explicit Recorder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::cupti
