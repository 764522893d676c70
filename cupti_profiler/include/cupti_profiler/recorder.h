// The real GPU duration of each forwarded kernel, copy and memset, measured by the CUPTI Activity
// API. The passthrough backend brackets every driver call it forwards with begin_op(tag) /
// end_op(); CUPTI then reports the op's device start/end timestamps, and the recorder hands them
// to the sink under that tag.
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
};

// Counters of what the recorder saw, for logs and tests.
struct RecorderStats {
  uint64_t delivered = 0;          // ops handed to the sink (or dropped for want of a sink)
  uint64_t untagged_dropped = 0;   // ops whose correlation never met a tag within the window
  uint64_t pending = 0;            // ops waiting for their tag right now
  uint64_t untimed = 0;            // delivered ops that CUPTI reported without timestamps
  uint64_t cupti_dropped = 0;      // records CUPTI lost because its buffers were full
  uint64_t buffers = 0;            // activity buffers processed
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
  // How many recent correlation ids are remembered on each side while waiting for the other.
  size_t pending_window = 1u << 16;
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
