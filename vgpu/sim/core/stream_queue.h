// What the layers below the streams (sim/memory: copies, sets, prefetches, pool operations)
// need of them: queue work on a stream argument, and ask which device a stream runs on.
// StreamManager (sim/exec/stream.h) implements it; DriverState::stream_queue() hands it out, so
// that memory/ reaches the streams without including exec/ (which includes memory/).
#pragma once

#include "front/driver/cuda_api.h"
#include "sim/core/stream_work.h"

namespace vgpu {

class StreamQueue {
 public:
  // Queue `work` on `stream`, after everything before it on that stream. `stream` may be 0 (the
  // current context's legacy default stream, or its per-thread default stream when
  // `per_thread` is set, as for the _ptds/_ptsz entry points), CU_STREAM_LEGACY,
  // CU_STREAM_PER_THREAD, or a stream handle. While the stream is being captured, the work is
  // recorded into the graph instead. CUDA_ERROR_INVALID_HANDLE for a stream that is not live,
  // CUDA_ERROR_INVALID_CONTEXT when 0 is passed and no context is current.
  virtual CUresult submit(CUstream stream, Work work, bool per_thread = false) = 0;

  // submit() and wait until the work has run, advancing the calling thread's virtual clock to
  // its virtual finish: what the synchronous copies and sets do.
  virtual CUresult submit_and_wait(CUstream stream, Work work, bool per_thread = false) = 0;

  // The virtual device a stream handle runs on (resolving 0/LEGACY/PER_THREAD as submit does).
  virtual CUresult device_of(CUstream stream, bool per_thread, int* device) const = 0;

 protected:
  ~StreamQueue() = default;
};

}  // namespace vgpu
