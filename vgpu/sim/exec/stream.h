// Streams and events: stream order, cross-stream waits, host functions at their point in the
// stream, synchronization, and the virtual timeline of every stream. OWNER: the execution
// helper. The declarations below are the interface other concerns rely on; add to them, do not
// change them.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "sim/core/stream_queue.h"
#include "sim/core/stream_work.h"
#include "front/driver/cuda_api.h"

namespace vgpu {

class DriverState;
struct LaunchItem;

class StreamManager final : public StreamQueue {
 public:
  explicit StreamManager(DriverState& driver);
  ~StreamManager();

  // What memory/ queues through (sim/core/stream_queue.h says what each does).
  CUresult submit(CUstream stream, Work work, bool per_thread = false) override;
  CUresult submit_and_wait(CUstream stream, Work work, bool per_thread = false) override;
  CUresult device_of(CUstream stream, bool per_thread, int* device) const override;

  // Wait for all work of every stream of the context (cuCtxSynchronize), advancing the calling
  // thread's virtual clock.
  CUresult synchronize_context(CUcontext ctx);
  // A context is being destroyed: drain and destroy its streams.
  void context_destroyed(CUcontext ctx);

  // --- Added by the owner: what the stream/event/capture entry points need. ---
  // Every `per_thread` argument means: the entry point was a _ptds/_ptsz variant, so stream 0
  // names the per-thread default stream.

  // Streams (stream_api.cpp). Priorities are clamped to [kGreatestPriority, 0].
  static constexpr int kGreatestPriority = -5;
  CUresult create(CUstream* out, unsigned int flags, int priority);
  CUresult destroy(CUstream stream);
  CUresult query(CUstream stream, bool per_thread);
  CUresult synchronize(CUstream stream, bool per_thread);
  CUresult wait_event(CUstream stream, CUevent event, unsigned int flags, bool per_thread);
  struct Info {
    CUcontext ctx = nullptr;
    int device = 0;
    unsigned int flags = 0;
    int priority = 0;
    unsigned long long id = 0;
  };
  CUresult info(CUstream stream, bool per_thread, Info* out);
  CUresult get_attribute(CUstream stream, bool per_thread, int attr, CUstreamAttrValue* out);
  CUresult set_attribute(CUstream stream, bool per_thread, int attr, const CUstreamAttrValue& v);
  CUresult copy_attributes(CUstream dst, CUstream src, bool per_thread);
  // An op that starts only once `ready()` returns true (cuStreamWaitValue*): polled by a driver
  // thread. Not capturable.
  CUresult submit_wait(CUstream stream, std::function<bool()> ready, bool per_thread);

  // Events (event_api.cpp).
  CUresult event_create(CUevent* out, unsigned int flags);
  CUresult event_destroy(CUevent event);
  CUresult event_record(CUevent event, CUstream stream, bool per_thread);
  CUresult event_query(CUevent event);
  CUresult event_synchronize(CUevent event);
  CUresult event_elapsed(float* ms, CUevent start, CUevent end);

  // Capture (capture_api.cpp). `graph` null: capture into a new graph.
  CUresult begin_capture(CUstream stream, CUstreamCaptureMode mode, CUgraph graph,
                         const CUgraphNode* deps, size_t num_deps, bool per_thread);
  CUresult end_capture(CUstream stream, CUgraph* out, bool per_thread);
  // Any output may be null. *deps stays valid until the next capture call on the stream.
  CUresult capture_info(CUstream stream, bool per_thread, CUstreamCaptureStatus* status,
                        cuuint64_t* id, CUgraph* graph, const CUgraphNode** deps,
                        size_t* num_deps);
  CUresult update_capture_dependencies(CUstream stream, const CUgraphNode* deps, size_t n,
                                       unsigned int flags, bool per_thread);

  // A graph launch: the items in order (real effects in that order on the stream); in virtual
  // time each item waits only for its own deps (roots: the stream's previous work). While the
  // stream is captured, the items become nodes of the capture instead.
  CUresult submit_items(CUstream stream, std::vector<LaunchItem> items, bool per_thread);
  // Places the rest of a graph launch held at a node that meets the other ranks' replays
  // (Work::on_meet), after `arrivals`, outside a graph launch: a held rank whose peers did not
  // come before its thread's next driver call (sim/exec/nccl_graph_meet.h).
  void place_rest(const Work::PlaceRest& rest, const std::vector<uint64_t>& arrivals);

  // Reports the work submitted so far to the job's status region (sim/exec/activity_report.h);
  // also done by itself at synchronizations and in batches. At exit, before the region is left.
  void flush_activity();
  // NCCL collectives on the sim backend (sim/exec/nccl_collectives.h): appends `work` to the stream
  // whose last op has simcore event `last`, if nothing was appended to it since; false when no
  // stream ends with it (or it is being captured). Work::on_timeline is honoured.
  bool append_after_last(uint64_t last, Work work);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu
