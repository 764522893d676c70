// A stand-in libcupti for CI (no GPU): the entry points the recorder resolves, plus test
// hooks that play the driver's part. fake_cupti_op() acts as one driver call on the calling thread:
// it takes the next correlation id, writes an EXTERNAL_CORRELATION record for the id on top of
// that thread's CUSTOM0 stack (if any, and only with driver API records on, as the real CUPTI
// does) and the op's record, each either now or held back until
// fake_cupti_release(), so records reach the recorder in either order and in later buffers.
// Buffers are requested from and completed to the recorder's callbacks outside the fake's lock,
// on whichever thread calls cuptiActivityFlushAll() or fake_cupti_deliver().
// fake_cupti_kernel() is one kernel launch on a (context, stream) as the driver sees it; its
// record carries the CUPTI stream id that cuptiGetStreamIdEx gives for the same stream (ids are
// per context, so two contexts reuse the same numbers), and, like a CUDA-runtime launch on a real
// GPU, may carry another correlation id than the tagged driver call.
#include <cupti.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Record = std::vector<uint8_t>;

struct Fake {
  std::mutex mutex;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  std::set<int> enabled;
  int fail_enable = -1;  // activity kind whose enable fails
  uint32_t next_correlation = 1;
  std::vector<Record> ready, held;
  size_t dropped = 0;  // reported once by the next GetNumDroppedRecords
  uint32_t period_ms = 0;
  // Streams as the driver knows them: (context, handle or null, per-thread, owning thread when
  // per-thread) -> stream id within the context.
  std::map<std::tuple<void*, void*, bool, std::thread::id>, uint32_t> stream_ids;
  std::map<void*, uint32_t> stream_count;  // per context, for numbering
  std::map<void*, uint32_t> context_ids;
  uint64_t stream_id_calls = 0;
  std::set<std::string> names;  // kernel names the records point into (kept for good)
  // When set, one delivery at a time, in the order the records became ready (as one CUPTI
  // worker thread hands over buffers); else concurrent deliveries may overtake each other.
  bool ordered = false;
  std::mutex delivery_mutex;
};

Fake& fake() {
  static Fake* f = new Fake;
  return *f;
}

thread_local std::vector<uint64_t> t_stack;  // CUSTOM0 ids pushed on this thread

template <class R> Record bytes_of(const R& r) {
  Record b(sizeof r);
  std::memcpy(b.data(), &r, sizeof r);
  return b;
}

size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return 0;
  }
}

uint32_t context_id_locked(void* ctx) {
  Fake& f = fake();
  auto [it, inserted] = f.context_ids.try_emplace(ctx, 0);
  if (inserted) it->second = static_cast<uint32_t>(f.context_ids.size());
  return it->second;
}

// The driver's view of a stream: NULL stream of the context (legacy, or this thread's per-thread
// one) or a real handle. Ids start at 7 in each context, as CUPTI's tend to.
uint32_t stream_id_locked(void* ctx, void* stream, bool per_thread) {
  Fake& f = fake();
  if (stream != nullptr) per_thread = false;
  auto key = std::make_tuple(ctx, stream, per_thread,
                             per_thread ? std::this_thread::get_id() : std::thread::id());
  auto [it, inserted] = f.stream_ids.try_emplace(key, 0);
  if (inserted) it->second = 7 + f.stream_count[ctx]++;
  return it->second;
}

// Hands every ready record to the recorder, in buffers of whatever size it gives.
void deliver_now();

void deliver() {
  Fake& f = fake();
  bool ordered;
  {
    std::lock_guard lock(f.mutex);
    ordered = f.ordered;
  }
  if (!ordered) return deliver_now();
  std::lock_guard lock(f.delivery_mutex);
  deliver_now();
}

void deliver_now() {
  Fake& f = fake();
  std::vector<Record> records;
  CUpti_BuffersCallbackRequestFunc request;
  CUpti_BuffersCallbackCompleteFunc complete;
  {
    std::lock_guard lock(f.mutex);
    records.swap(f.ready);
    request = f.request;
    complete = f.complete;
  }
  if (!request || !complete) return;
  size_t i = 0;
  while (i < records.size()) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    request(&buffer, &size, &max_records);
    if (!buffer || size == 0) {  // no buffer: CUPTI drops what it has
      std::lock_guard lock(f.mutex);
      f.dropped += records.size() - i;
      return;
    }
    size_t used = 0;
    while (i < records.size() && used + records[i].size() <= size) {
      std::memcpy(buffer + used, records[i].data(), records[i].size());
      used += records[i].size();
      ++i;
    }
    complete(nullptr, 0, buffer, size, used);
    if (used == 0) return;  // a record larger than the buffer: give up rather than spin
  }
}

}  // namespace

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_FAKE";
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc complete) {
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard lock(fake().mutex);
  fake().request = request;
  fake().complete = complete;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard lock(fake().mutex);
  if (static_cast<int>(kind) == fake().fail_enable) return CUPTI_ERROR_NOT_COMPATIBLE;
  fake().enabled.insert(kind);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard lock(fake().mutex);
  fake().enabled.erase(kind);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  deliver();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t ms) {
  std::lock_guard lock(fake().mutex);
  fake().period_ms = ms;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                   CUpti_Activity** record) {
  size_t offset = 0;
  if (*record) {
    offset = reinterpret_cast<uint8_t*>(*record) - buffer;
    size_t step = record_size((*record)->kind);
    if (step == 0) return CUPTI_ERROR_INVALID_KIND;
    offset += step;
  }
  if (offset >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  std::lock_guard lock(fake().mutex);
  *dropped = fake().dropped;
  fake().dropped = 0;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                               uint64_t id) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return CUPTI_ERROR_INVALID_PARAMETER;
  t_stack.push_back(id);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                              uint64_t* last) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (t_stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last) *last = t_stack.back();
  t_stack.pop_back();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetContextId(CUcontext context, uint32_t* id) {
  if (!context) return CUPTI_ERROR_INVALID_CONTEXT;
  if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard lock(fake().mutex);
  *id = context_id_locked(context);
  return CUPTI_SUCCESS;
}

// Strict about what the recorder must have normalized: the special handles CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD are refused (the recorder passes NULL and the per-thread flag instead), as
// is the handle 0xbad (a stream CUPTI cannot resolve).
FAKE_EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t per_thread,
                                           uint32_t* id) {
  void* s = reinterpret_cast<void*>(stream);
  if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
  if (s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || s == reinterpret_cast<void*>(0xbad))
    return CUPTI_ERROR_INVALID_STREAM;
  if (!context) return CUPTI_ERROR_INVALID_CONTEXT;
  std::lock_guard lock(fake().mutex);
  ++fake().stream_id_calls;
  *id = stream_id_locked(context, s, per_thread != 0);
  return CUPTI_SUCCESS;
}

// ---- test hooks ----------------------------------------------------------------------------

enum FakeOrder { kNow = 0, kOpLater = 1, kTagLater = 2 };

// One driver call producing one device op of `kind` (0 kernel, 1 memcpy, 2 memset) that ran from
// start to end. Returns its correlation id.
FAKE_EXPORT uint32_t fake_cupti_op(int kind, uint64_t start, uint64_t end, int order) {
  Fake& f = fake();
  std::lock_guard lock(f.mutex);
  uint32_t corr = f.next_correlation++;
  // Like CUPTI 13 on a real GPU: the tag record accompanies an API record, so it needs both kinds.
  if (!t_stack.empty() && f.enabled.count(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) &&
      f.enabled.count(CUPTI_ACTIVITY_KIND_DRIVER)) {
    CUpti_ActivityExternalCorrelation e;
    std::memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e.externalId = t_stack.back();
    e.correlationId = corr;
    (order == kTagLater ? f.held : f.ready).push_back(bytes_of(e));
  }
  Record op;
  if (kind == 0) {
    CUpti_ActivityKind k = f.enabled.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                               ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                               : CUPTI_ACTIVITY_KIND_KERNEL;
    if (!f.enabled.count(k)) return corr;
    CUpti_ActivityKernel10 r;
    std::memset(&r, 0, sizeof r);
    r.kind = k;
    r.start = start;
    r.end = end;
    r.correlationId = corr;
    op = bytes_of(r);
  } else if (kind == 1) {
    if (!f.enabled.count(CUPTI_ACTIVITY_KIND_MEMCPY)) return corr;
    CUpti_ActivityMemcpy6 r;
    std::memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    r.start = start;
    r.end = end;
    r.correlationId = corr;
    op = bytes_of(r);
  } else {
    if (!f.enabled.count(CUPTI_ACTIVITY_KIND_MEMSET)) return corr;
    CUpti_ActivityMemset4 r;
    std::memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    r.start = start;
    r.end = end;
    r.correlationId = corr;
    op = bytes_of(r);
  }
  (order == kOpLater ? f.held : f.ready).push_back(std::move(op));
  return corr;
}

enum FakeKernelFlags {
  kRuntimeLaunch = 1,  // the kernel record carries another correlation id than the tagged call
  kGraphNode = 2,      // a graph launched it (graphId/graphNodeId set)
  kKernelLater = 4,    // the kernel record is held back until fake_cupti_release()
  kTagRecordLater = 8, // the tag record is held back
};

// One kernel launch of `name` with grid/block on `stream` of `context` (stream 0 with
// per_thread_default: the calling thread's per-thread default stream; CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD as the driver reads them), which ran from start to end. Tagged like
// fake_cupti_op when the thread has an id pushed. Returns the kernel record's correlation id.
FAKE_EXPORT uint32_t fake_cupti_kernel(void* context, void* stream, int per_thread_default,
                                       const char* name, const uint32_t* grid,
                                       const uint32_t* block, uint64_t start, uint64_t end,
                                       int flags) {
  Fake& f = fake();
  std::lock_guard lock(f.mutex);
  uint32_t driver_corr = f.next_correlation++;
  uint32_t kernel_corr = (flags & kRuntimeLaunch) ? f.next_correlation++ : driver_corr;
  if (!t_stack.empty() && f.enabled.count(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) &&
      f.enabled.count(CUPTI_ACTIVITY_KIND_DRIVER)) {
    CUpti_ActivityExternalCorrelation e;
    std::memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e.externalId = t_stack.back();
    e.correlationId = driver_corr;
    ((flags & kTagRecordLater) ? f.held : f.ready).push_back(bytes_of(e));
  }
  CUpti_ActivityKind k = f.enabled.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                             ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                             : CUPTI_ACTIVITY_KIND_KERNEL;
  if (!f.enabled.count(k)) return kernel_corr;
  bool per_thread = false;
  if (stream == CU_STREAM_LEGACY) {
    stream = nullptr;
  } else if (stream == CU_STREAM_PER_THREAD) {
    stream = nullptr;
    per_thread = true;
  } else if (stream == nullptr) {
    per_thread = per_thread_default != 0;
  }
  CUpti_ActivityKernel10 r;
  std::memset(&r, 0, sizeof r);
  r.kind = k;
  r.start = start;
  r.end = end;
  r.correlationId = kernel_corr;
  r.contextId = context_id_locked(context);
  r.streamId = stream_id_locked(context, stream, per_thread);
  r.name = name ? f.names.insert(name).first->c_str() : nullptr;
  r.gridX = static_cast<int32_t>(grid[0]);
  r.gridY = static_cast<int32_t>(grid[1]);
  r.gridZ = static_cast<int32_t>(grid[2]);
  r.blockX = static_cast<int32_t>(block[0]);
  r.blockY = static_cast<int32_t>(block[1]);
  r.blockZ = static_cast<int32_t>(block[2]);
  if (flags & kGraphNode) {
    r.graphId = 1;
    r.graphNodeId = 1;
  }
  ((flags & kKernelLater) ? f.held : f.ready).push_back(bytes_of(r));
  return kernel_corr;
}

// cuStreamDestroy: the handle may come back as another stream, with a new id.
FAKE_EXPORT void fake_cupti_destroy_stream(void* context, void* stream) {
  std::lock_guard lock(fake().mutex);
  std::erase_if(fake().stream_ids, [&](const auto& kv) {
    return std::get<0>(kv.first) == context && std::get<1>(kv.first) == stream;
  });
}

// cuCtxDestroy: a context created later at the same address is another context (new ids).
FAKE_EXPORT void fake_cupti_destroy_context(void* context) {
  Fake& f = fake();
  std::lock_guard lock(f.mutex);
  std::erase_if(f.stream_ids, [&](const auto& kv) { return std::get<0>(kv.first) == context; });
  uint32_t next = 0;
  for (auto& [c, id] : f.context_ids) next = std::max(next, id);
  f.context_ids[context] = next + 1;
}

FAKE_EXPORT void fake_cupti_ordered_delivery(int on) {
  std::lock_guard lock(fake().mutex);
  fake().ordered = on != 0;
}

FAKE_EXPORT uint64_t fake_cupti_stream_id_calls() {
  std::lock_guard lock(fake().mutex);
  return fake().stream_id_calls;
}

// Records held back by fake_cupti_op become ready for the next delivery.
FAKE_EXPORT void fake_cupti_release() {
  std::lock_guard lock(fake().mutex);
  for (Record& r : fake().held) fake().ready.push_back(std::move(r));
  fake().held.clear();
}

// CUPTI's worker thread handing over completed buffers.
FAKE_EXPORT void fake_cupti_deliver() { deliver(); }

FAKE_EXPORT void fake_cupti_fail_enable(int kind) {
  std::lock_guard lock(fake().mutex);
  fake().fail_enable = kind;
}

FAKE_EXPORT void fake_cupti_set_dropped(size_t n) {
  std::lock_guard lock(fake().mutex);
  fake().dropped = n;
}

FAKE_EXPORT int fake_cupti_enabled_count() {
  std::lock_guard lock(fake().mutex);
  return static_cast<int>(fake().enabled.size());
}

FAKE_EXPORT uint32_t fake_cupti_flush_period() {
  std::lock_guard lock(fake().mutex);
  return fake().period_ms;
}
