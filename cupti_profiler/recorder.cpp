#include "cupti_profiler/recorder.h"

#include "activity_record.h"
#include "common/log.h"
#include "common/settings.h"
#include "cupti_library.h"
#include "cupti_profiler/correlation_matcher.h"
#include "cupti_profiler/stream_order_matcher.h"
#include "stream_id_cache.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace vgpu::cupti {
namespace {

constexpr CUpti_ExternalCorrelationKind kTagKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
// CUPTI wants activity buffers aligned to 8 bytes.
constexpr size_t kBufferAlign = 8;
// Announcements queued by launching threads before one of them matches them itself.
constexpr size_t kMaxStaged = 4096;

}  // namespace

struct Recorder::Impl {
  const CuptiLibrary* lib = nullptr;
  RecorderOptions options;
  std::vector<CUpti_ActivityKind> enabled;

  mutable std::mutex match_mutex;  // both matchers and stats
  CorrelationMatcher matcher;
  StreamOrderMatcher stream_matcher;
  uint64_t graph_kernels = 0;  // kernel records of graph nodes (never announced launches)
  RecorderStats stats;

  // Announcements (and cancellations) wait here, under a lock of their own, until the matcher
  // takes them: a launching thread then never waits for a whole buffer being matched. A record
  // is only produced after its launch was announced, so draining before matching a buffer keeps
  // every announcement ahead of its kernel's record.
  struct Staged {
    bool cancel;
    StreamKey stream;
    KernelShape shape;
    uint64_t tag;
  };
  std::mutex stage_mutex;  // taken after match_mutex, never before it
  std::vector<Staged> staged;
  std::atomic<uint64_t> expect_unresolved{0};

  StreamIdCache stream_ids;  // own lock; CUPTI is asked outside match_mutex

  std::mutex sink_mutex;
  std::shared_ptr<const std::function<void(const Completed&)>> sink;
  std::mutex deliver_mutex;  // serializes calls of the sink

  explicit Impl(const RecorderOptions& o)
      : options(o),
        matcher(o.pending_window),
        stream_matcher(StreamOrderMatcher::Limits{o.pending_window, o.overtake_tolerance, 256}),
        stream_ids([this](void* ctx, void* stream, bool per_thread, StreamKey* out) {
          return resolve_stream(ctx, stream, per_thread, out);
        }) {}

  void process(uint8_t* buffer, size_t valid_bytes, CUcontext context, uint32_t stream_id);
  // A kernel record: the stream-order join first, then the tag join. Under match_mutex.
  void on_kernel(const ParsedRecord& p, std::vector<Completed>& done);
  bool resolve_stream(void* context, void* stream, bool per_thread, StreamKey* out) const;
  bool stream_of(const KernelLaunch& launch, StreamKey* out);
  void update_stats();  // under match_mutex
  void drain_staged();  // under match_mutex
  // Queues one announcement or cancellation; drains it at once if nobody has for long.
  void stage(const Staged& s);
  void deliver(const std::vector<Completed>& done);
};

namespace {

// CUPTI's buffer callbacks carry no user pointer and are registered once per process, so this is
// the one place that knows which recorder (if any) receives the buffers. Immortal: CUPTI's worker
// thread may call back during process exit.
struct Dispatch {
  std::shared_mutex mutex;  // shared while a callback uses `active`; exclusive to change it
  Recorder::Impl* active = nullptr;
  std::mutex register_mutex;  // never taken inside a CUPTI callback
  bool callbacks_registered = false;  // guarded by register_mutex
};

Dispatch& dispatch() {
  static Dispatch* d = new Dispatch;
  return *d;
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  size_t bytes = 0;
  {
    std::shared_lock lock(dispatch().mutex);
    if (dispatch().active) bytes = dispatch().active->options.buffer_bytes;
  }
  // No recorder: hand out nothing, CUPTI drops the records.
  if (bytes == 0) return;
  bytes = (bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  void* p = std::aligned_alloc(kBufferAlign, bytes);
  if (!p) {
    log::once(log::Level::warn, "cupti.buffer_alloc", "cupti: activity buffer allocation failed; records dropped");
    return;
  }
  *buffer = static_cast<uint8_t*>(p);
  *size = bytes;
}

void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                  size_t /*size*/, size_t valid_bytes) noexcept {
  {
    std::shared_lock lock(dispatch().mutex);
    if (Recorder::Impl* impl = dispatch().active; impl && buffer) {
      try {
        impl->process(buffer, valid_bytes, context, stream_id);
      } catch (...) {
        log::once(log::Level::error, "cupti.process", "cupti: failed to process an activity buffer");
      }
    }
  }
  std::free(buffer);
}

}  // namespace

void Recorder::Impl::process(uint8_t* buffer, size_t valid_bytes, CUcontext context,
                             uint32_t stream_id) {
  std::vector<Completed> done;
  {
    std::lock_guard lock(match_mutex);
    ++stats.buffers;
    drain_staged();
    CUpti_Activity* record = nullptr;
    // GetNextRecord answers CUPTI_ERROR_MAX_LIMIT_REACHED at the end of the valid bytes.
    while (valid_bytes > 0 &&
           lib->ActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
      ParsedRecord p = parse_record(record, kTagKind);
      if (p.type == ParsedRecord::Type::tag) {
        matcher.on_tag(p.correlation_id, p.tag, done);
      } else if (p.type == ParsedRecord::Type::op && p.kind == OpKind::kernel) {
        on_kernel(p, done);
      } else if (p.type == ParsedRecord::Type::op) {
        matcher.on_op(p.correlation_id, p.kind, p.start_ns, p.end_ns, done, p.stream.stream_id);
      }
    }
    size_t dropped = 0;
    if (lib->ActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
        dropped > 0) {
      stats.cupti_dropped += dropped;
      log::once(log::Level::warn, "cupti.dropped",
                "cupti: activity records were dropped (buffers full); some ops go unmeasured");
    }
    stats.delivered += done.size();
    for (const Completed& c : done)
      if (c.start_ns == 0 && c.end_ns == 0) ++stats.untimed;
    update_stats();
  }
  if (!done.empty()) deliver(done);
}

void Recorder::Impl::on_kernel(const ParsedRecord& p, std::vector<Completed>& done) {
  if (p.graph_node) {
    ++graph_kernels;
  } else if (stream_matcher.on_kernel(p.stream, p.shape, p.start_ns, p.end_ns, done)) {
    // Delivered by stream order; the tag join must not deliver it again.
    matcher.claim(p.correlation_id);
    return;
  }
  matcher.on_op(p.correlation_id, p.kind, p.start_ns, p.end_ns, done, p.stream.stream_id);
}

void Recorder::Impl::drain_staged() {
  std::vector<Staged> batch;
  {
    std::lock_guard lock(stage_mutex);
    batch.swap(staged);
  }
  for (const Staged& s : batch) {
    if (!s.cancel) {
      stream_matcher.expect(s.stream, s.shape, s.tag);
      ++stats.kernels_expected;
    } else if (stream_matcher.cancel(s.stream, s.tag)) {
      ++stats.expect_cancelled;
    }
  }
}

void Recorder::Impl::stage(const Staged& s) {
  size_t waiting;
  {
    std::lock_guard lock(stage_mutex);
    staged.push_back(s);
    waiting = staged.size();
  }
  // CUPTI hands over no buffers (no kernel records at all?): keep the queue bounded.
  if (waiting >= kMaxStaged) {
    std::lock_guard lock(match_mutex);
    drain_staged();
    update_stats();
  }
}

void Recorder::Impl::update_stats() {
  stats.untagged_dropped = matcher.untagged_dropped();
  stats.pending = matcher.pending_ops();
  stats.duplicates = matcher.duplicates();
  stats.kernels_matched = stream_matcher.matched();
  stats.expect_dropped = stream_matcher.dropped();
  stats.expect_pending = stream_matcher.pending();
  stats.kernels_unannounced = stream_matcher.unannounced() + graph_kernels;
  stats.expect_unresolved = expect_unresolved.load(std::memory_order_relaxed);
}

bool Recorder::Impl::resolve_stream(void* context, void* stream, bool per_thread,
                                    StreamKey* out) const {
  if (!lib->GetStreamIdEx || !lib->GetContextId) {
    log::once(log::Level::warn, "cupti.no_stream_id",
              "cupti: this libcupti has no cuptiGetStreamIdEx/cuptiGetContextId; kernels are "
              "matched by correlation only");
    return false;
  }
  auto* ctx = static_cast<CUcontext>(context);
  uint32_t context_id = 0, stream_id = 0;
  CUptiResult r = lib->GetContextId(ctx, &context_id);
  if (r == CUPTI_SUCCESS)
    r = lib->GetStreamIdEx(ctx, static_cast<CUstream>(stream), per_thread ? 1 : 0, &stream_id);
  if (r != CUPTI_SUCCESS) {
    log::once(log::Level::warn, "cupti.stream_id",
              fmt::format("cupti: cannot resolve a stream's CUPTI id ({}); its kernels are matched "
                          "by correlation only",
                          lib->error_name(r)));
    return false;
  }
  *out = {context_id, stream_id};
  return true;
}

bool Recorder::Impl::stream_of(const KernelLaunch& launch, StreamKey* out) {
  if (launch.context == nullptr) {
    log::once(log::Level::warn, "cupti.expect_no_context",
              "cupti: expect_kernel without a context; that launch is matched by correlation only");
    return false;
  }
  return stream_ids.lookup(launch.context, launch.stream, launch.per_thread_default, out);
}

void Recorder::Impl::deliver(const std::vector<Completed>& done) {
  std::shared_ptr<const std::function<void(const Completed&)>> s;
  {
    std::lock_guard lock(sink_mutex);
    s = sink;
  }
  if (!s || !*s) return;
  std::lock_guard lock(deliver_mutex);
  for (const Completed& c : done) {
    try {
      (*s)(c);
    } catch (const std::exception& e) {
      log::once(log::Level::error, "cupti.sink", fmt::format("cupti: the sink threw: {}", e.what()));
    } catch (...) {
      log::once(log::Level::error, "cupti.sink", "cupti: the sink threw");
    }
  }
}

Recorder::Recorder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Recorder> Recorder::start(const RecorderOptions& options) {
  try {
    std::string error;
    const CuptiLibrary* lib = load_cupti(&error);
    if (!lib) {
      // A path the user set that cannot be used is worth their attention; a missing optional
      // library is not.
      if (!vgpu::settings::text(vgpu::settings::Id::cupti_library).empty()) {
        log::always(fmt::format("vgpu: CUPTI unavailable, no kernel timing: {}", error));
      } else {
        log::warn("cupti: unavailable, no kernel timing: {}", error);
      }
      return nullptr;
    }

    auto impl = std::make_unique<Impl>(options);
    impl->lib = lib;
    Dispatch& d = dispatch();
    {
      std::unique_lock lock(d.mutex);
      if (d.active) {
        log::warn("cupti: a recorder is already active in this process; not starting another");
        return nullptr;
      }
      // Claimed before enabling: CUPTI may ask for a buffer from inside cuptiActivityEnable.
      d.active = impl.get();
    }
    // No CUPTI call is made while holding d.mutex: CUPTI's threads take it (shared) inside our
    // callbacks, possibly while holding CUPTI's own locks.
    {
      std::lock_guard lock(d.register_mutex);
      if (!d.callbacks_registered) {
        CUptiResult r = lib->ActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
        if (r != CUPTI_SUCCESS) {
          log::warn("cupti: cuptiActivityRegisterCallbacks failed ({}), no kernel timing",
                    lib->error_name(r));
          std::unique_lock active_lock(d.mutex);
          d.active = nullptr;
          return nullptr;
        }
        d.callbacks_registered = true;
      }
    }

    auto give_up = [&](std::string_view what, CUptiResult r) -> std::unique_ptr<Recorder> {
      log::warn("cupti: {} failed ({}; {}), no kernel timing", what, lib->error_name(r), lib->path);
      for (CUpti_ActivityKind k : impl->enabled) lib->ActivityDisable(k);
      std::unique_lock lock(d.mutex);
      d.active = nullptr;
      return nullptr;
    };
    auto enable = [&](CUpti_ActivityKind k) {
      CUptiResult r = lib->ActivityEnable(k);
      if (r == CUPTI_SUCCESS) impl->enabled.push_back(k);
      return r;
    };

    CUpti_ActivityKind first = options.serialize_kernels ? CUPTI_ACTIVITY_KIND_KERNEL
                                                         : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    CUpti_ActivityKind second = options.serialize_kernels ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                                          : CUPTI_ACTIVITY_KIND_KERNEL;
    if (CUptiResult r = enable(first); r != CUPTI_SUCCESS) {
      if (CUptiResult r2 = enable(second); r2 != CUPTI_SUCCESS)
        return give_up("enabling kernel activity", r);
    }
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                 CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
      if (CUptiResult r = enable(k); r != CUPTI_SUCCESS)
        return give_up(fmt::format("enabling activity kind {}", static_cast<int>(k)), r);
    }
    // Peer copies between contexts: wanted, not required.
    enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
    if (options.driver_api_records) {
      if (CUptiResult r = enable(CUPTI_ACTIVITY_KIND_DRIVER); r != CUPTI_SUCCESS)
        return give_up("enabling driver API activity", r);
    } else {
      log::warn("cupti: driver API records off: CUPTI will not report the tags, ops stay unmatched");
    }
    if (options.flush_period_ms > 0 && lib->ActivityFlushPeriod) {
      if (CUptiResult r = lib->ActivityFlushPeriod(options.flush_period_ms); r != CUPTI_SUCCESS)
        log::warn("cupti: cuptiActivityFlushPeriod({}) failed ({})", options.flush_period_ms,
                  lib->error_name(r));
    }
    log::info("cupti: recording with {} ({} activity kinds)", lib->path, impl->enabled.size());
    return std::unique_ptr<Recorder>(new Recorder(std::move(impl)));
  } catch (...) {
    log::error("cupti: failed to start the recorder");
    return nullptr;
  }
}

void Recorder::begin_op(uint64_t tag) {
  CUptiResult r = impl_->lib->ActivityPushExternalCorrelationId(kTagKind, tag);
  if (r != CUPTI_SUCCESS)
    log::once(log::Level::warn, "cupti.push",
              "cupti: cuptiActivityPushExternalCorrelationId failed; ops go untagged");
}

void Recorder::end_op() {
  uint64_t last = 0;
  CUptiResult r = impl_->lib->ActivityPopExternalCorrelationId(kTagKind, &last);
  if (r != CUPTI_SUCCESS)
    log::once(log::Level::warn, "cupti.pop",
              "cupti: cuptiActivityPopExternalCorrelationId failed (end_op without begin_op?)");
}

namespace {

KernelShape shape_of(const KernelLaunch& launch) {
  KernelShape shape;
  shape.name_hash = kernel_name_hash(launch.name);
  for (int i = 0; i < 3; ++i) {
    shape.grid[i] = launch.grid[i];
    shape.block[i] = launch.block[i];
  }
  return shape;
}

}  // namespace

bool Recorder::expect_kernel(const KernelLaunch& launch, uint64_t tag) {
  try {
    StreamKey stream;
    if (!impl_->stream_of(launch, &stream)) {
      impl_->expect_unresolved.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    impl_->stage({false, stream, shape_of(launch), tag});
    return true;
  } catch (...) {
    log::once(log::Level::error, "cupti.expect", "cupti: expect_kernel failed");
    return false;
  }
}

void Recorder::cancel_kernel(const KernelLaunch& launch, uint64_t tag) {
  try {
    StreamKey stream;
    if (!impl_->stream_of(launch, &stream)) return;
    impl_->stage({true, stream, KernelShape{}, tag});
  } catch (...) {
    log::once(log::Level::error, "cupti.cancel", "cupti: cancel_kernel failed");
  }
}

void Recorder::forget_stream(void* context, void* stream) {
  try {
    impl_->stream_ids.forget_stream(context, stream);
  } catch (...) {
    log::once(log::Level::error, "cupti.forget", "cupti: forget_stream failed");
  }
}

void Recorder::forget_context(void* context) {
  try {
    impl_->stream_ids.forget_context(context);
  } catch (...) {
    log::once(log::Level::error, "cupti.forget", "cupti: forget_context failed");
  }
}

void Recorder::set_sink(std::function<void(const Completed&)> sink) {
  auto s = std::make_shared<const std::function<void(const Completed&)>>(std::move(sink));
  std::lock_guard lock(impl_->sink_mutex);
  impl_->sink = std::move(s);
}

void Recorder::flush() {
  CUptiResult r = impl_->lib->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS)
    log::once(log::Level::warn, "cupti.flush",
              fmt::format("cupti: cuptiActivityFlushAll failed ({})", impl_->lib->error_name(r)));
}

RecorderStats Recorder::stats() const {
  std::lock_guard lock(impl_->match_mutex);
  try {
    impl_->drain_staged();  // so that what was announced counts as expected/pending now
  } catch (...) {
    log::once(log::Level::error, "cupti.drain", "cupti: failed to queue announced launches");
  }
  impl_->update_stats();
  return impl_->stats;
}

const std::string& Recorder::library_path() const { return impl_->lib->path; }

Recorder::~Recorder() {
  const CuptiLibrary* lib = impl_->lib;
  // Deliver what is buffered while the sink is still attached, then stop producing records and
  // deliver what was produced meanwhile.
  lib->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto it = impl_->enabled.rbegin(); it != impl_->enabled.rend(); ++it) lib->ActivityDisable(*it);
  lib->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // Waits for any callback still processing a buffer for this recorder.
  std::unique_lock lock(dispatch().mutex);
  if (dispatch().active == impl_.get()) dispatch().active = nullptr;
}

}  // namespace vgpu::cupti
