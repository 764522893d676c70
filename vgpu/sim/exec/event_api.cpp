// Event entry points: thin calls into StreamManager's events (virtual-time answers).
#include "sim/core/driver_state.h"
#include "sim/exec/stream.h"
#include "sim/core/virtual_clock.h"

using vgpu::DriverState;

namespace {
vgpu::StreamManager* streams() {
  DriverState* d = DriverState::get();
  return d ? &d->streams() : nullptr;
}
}  // namespace

#define VGPU_STREAMS(sm)                                 \
  vgpu::StreamManager* sm = streams();                    \
  if (sm == nullptr) return CUDA_ERROR_NOT_INITIALIZED

VGPU_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* ph, unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->event_create(ph, flags);
}
VGPU_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent e) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->event_destroy(e);
}
VGPU_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e) { VGPU_CALL_SCOPE(); return cuEventDestroy_v2(e); }

VGPU_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->event_record(e, s, false);
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream s) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->event_record(e, s, true);
}
// CU_EVENT_RECORD_EXTERNAL only changes what a capture records; outside capture it is a record.
VGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  VGPU_CALL_SCOPE();
  if (flags & ~static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  return cuEventRecord(e, s);
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  VGPU_CALL_SCOPE();
  if (flags & ~static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  return cuEventRecord_ptsz(e, s);
}
VGPU_EXPORT CUresult CUDAAPI cuEventQuery(CUevent e) {
  VGPU_QUERY_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->event_query(e);
}
VGPU_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->event_synchronize(e);
}
VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->event_elapsed(ms, a, b);
}
VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  VGPU_CALL_SCOPE();
  return cuEventElapsedTime_v2(ms, a, b);
}
