// Graph and stream-capture entry points: thin calls into GraphManager and StreamManager.
#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/exec/graph.h"
#include "sim/exec/module_registry.h"
#include "sim/exec/nccl_collectives.h"
#include "sim/exec/nccl_graph_meet.h"
#include "sim/exec/stream.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/copy.h"
#include "sim/memory/memory.h"

using vgpu::DriverState;
using vgpu::GraphManager;
using vgpu::StreamManager;
using vgpu::Work;

#define VGPU_STATE(d)                  \
  DriverState* d = DriverState::get(); \
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED

namespace {

thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult begin(CUstream s, CUstreamCaptureMode mode, bool pt) {
  VGPU_STATE(d);
  return d->streams().begin_capture(s, mode, nullptr, nullptr, 0, pt);
}
CUresult begin_to_graph(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData*,
                        size_t n, CUstreamCaptureMode mode, bool pt) {
  VGPU_STATE(d);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return d->streams().begin_capture(s, mode, g, deps, n, pt);
}
CUresult end(CUstream s, CUgraph* g, bool pt) {
  VGPU_STATE(d);
  return d->streams().end_capture(s, g, pt);
}
CUresult is_capturing(CUstream s, CUstreamCaptureStatus* st, bool pt) {
  VGPU_STATE(d);
  if (st == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return d->streams().capture_info(s, pt, st, nullptr, nullptr, nullptr, nullptr);
}
CUresult info_v3(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                 const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n, bool pt) {
  VGPU_STATE(d);
  if (st == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = d->streams().capture_info(s, pt, st, id, g, deps, n);
  if (edges) *edges = nullptr;  // all edges are default edges: CUDA reports null
  return r;
}
CUresult update_deps(CUstream s, CUgraphNode* deps, const CUgraphEdgeData*, size_t n,
                     unsigned flags, bool pt) {
  VGPU_STATE(d);
  return d->streams().update_capture_dependencies(s, deps, n, flags, pt);
}
CUresult launch(CUgraphExec e, CUstream s, bool pt) {
  VGPU_STATE(d);
  const CUresult rc = d->graphs().launch(e, s, pt);
  // A replayed collective whose other ranks are in other processes meets them now, with the
  // streams' lock released (nccl_graph_meet.h).
  d->modules().nccl().meet_graph_replays_across();
  return rc;
}
CUresult upload(CUgraphExec e, CUstream s, bool pt) {
  VGPU_STATE(d);
  if (!d->graphs().find_exec(e)) return CUDA_ERROR_INVALID_VALUE;
  int dev;
  return d->streams().device_of(s, pt, &dev);  // validates the stream; nothing to upload
}

}  // namespace

// ---- capture ----
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream s) { VGPU_CALL_SCOPE(); return begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, false); }
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream s) { VGPU_CALL_SCOPE(); return begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, true); }
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m) { VGPU_CALL_SCOPE(); return begin(s, m, false); }
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode m) { VGPU_CALL_SCOPE(); return begin(s, m, true); }
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* ed, size_t n, CUstreamCaptureMode m) {
  VGPU_CALL_SCOPE();
  return begin_to_graph(s, g, deps, ed, n, m, false);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* ed, size_t n, CUstreamCaptureMode m) {
  VGPU_CALL_SCOPE();
  return begin_to_graph(s, g, deps, ed, n, m, true);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph* g) { VGPU_CALL_SCOPE(); return end(s, g, false); }
VGPU_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) { VGPU_CALL_SCOPE(); return end(s, g, true); }
VGPU_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* st) { VGPU_CALL_SCOPE(); return is_capturing(s, st, false); }
VGPU_EXPORT CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* st) { VGPU_CALL_SCOPE(); return is_capturing(s, st, true); }
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id) {
  VGPU_CALL_SCOPE();
  return info_v3(s, st, id, nullptr, nullptr, nullptr, nullptr, false);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id) {
  VGPU_CALL_SCOPE();
  return info_v3(s, st, id, nullptr, nullptr, nullptr, nullptr, true);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g, const CUgraphNode** deps, size_t* n) {
  VGPU_CALL_SCOPE();
  return info_v3(s, st, id, g, deps, nullptr, n, false);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g, const CUgraphNode** deps, size_t* n) {
  VGPU_CALL_SCOPE();
  return info_v3(s, st, id, g, deps, nullptr, n, true);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g, const CUgraphNode** deps, const CUgraphEdgeData** ed, size_t* n) {
  VGPU_CALL_SCOPE();
  return info_v3(s, st, id, g, deps, ed, n, false);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g, const CUgraphNode** deps, const CUgraphEdgeData** ed, size_t* n) {
  VGPU_CALL_SCOPE();
  return info_v3(s, st, id, g, deps, ed, n, true);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode* deps, size_t n, unsigned int f) {
  VGPU_CALL_SCOPE();
  return update_deps(s, deps, nullptr, n, f, false);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies_ptsz(CUstream s, CUgraphNode* deps, size_t n, unsigned int f) {
  VGPU_CALL_SCOPE();
  return update_deps(s, deps, nullptr, n, f, true);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode* deps, const CUgraphEdgeData* ed, size_t n, unsigned int f) {
  VGPU_CALL_SCOPE();
  return update_deps(s, deps, ed, n, f, false);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream s, CUgraphNode* deps, const CUgraphEdgeData* ed, size_t n, unsigned int f) {
  VGPU_CALL_SCOPE();
  return update_deps(s, deps, ed, n, f, true);
}
VGPU_EXPORT CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  VGPU_CALL_SCOPE();
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

// ---- graphs ----
VGPU_EXPORT CUresult CUDAAPI cuGraphCreate(CUgraph* g, unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return d->graphs().create(g);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().destroy(g);
}

namespace {
CUresult add(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, CUgraphNodeType type,
             Work w, CUevent e = nullptr) {
  VGPU_STATE(d);
  return d->graphs().add_node(g, type, std::move(w), e, deps, n, out);
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n) {
  VGPU_CALL_SCOPE();
  return add(out, g, deps, n, CU_GRAPH_NODE_TYPE_EMPTY, Work{});
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, const CUDA_HOST_NODE_PARAMS* p) {
  VGPU_CALL_SCOPE();
  if (p == nullptr || p->fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.kind = Work::Kind::host_function;
  w.label = "host node";
  w.execute = [fn = p->fn, data = p->userData] { fn(data); };
  return add(out, g, deps, n, CU_GRAPH_NODE_TYPE_HOST, std::move(w));
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, CUevent e) {
  VGPU_CALL_SCOPE();
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return add(out, g, deps, n, CU_GRAPH_NODE_TYPE_EVENT_RECORD, Work{}, e);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, CUevent e) {
  VGPU_CALL_SCOPE();
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return add(out, g, deps, n, CU_GRAPH_NODE_TYPE_WAIT_EVENT, Work{}, e);
}

// Memcpy, memset and kernel nodes are made by capturing the very entry point that would run
// them into the graph on a private stream: the node holds exactly the Work (effect and price)
// that direct submission would queue, built by the code that owns copies and launches.
namespace {
template <class Fn>
CUresult add_by_capture(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, Fn fn) {
  VGPU_STATE(d);
  if (out == nullptr || (n > 0 && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  if (!d->graphs().find(g)) return CUDA_ERROR_INVALID_VALUE;
  StreamManager& sm = d->streams();
  CUstream s = nullptr;
  if (CUresult r = sm.create(&s, CU_STREAM_NON_BLOCKING, 0); r != CUDA_SUCCESS) return r;
  CUresult r = sm.begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED, g, deps, n, false);
  const CUgraphNode* made = nullptr;
  size_t count = 0;
  if (r == CUDA_SUCCESS) {
    r = fn(s);
    CUstreamCaptureStatus st;
    if (r == CUDA_SUCCESS) r = sm.capture_info(s, false, &st, nullptr, nullptr, &made, &count);
    CUgraphNode node = count == 1 ? made[0] : nullptr;
    CUgraph ended = nullptr;
    CUresult e = sm.end_capture(s, &ended, false);
    if (r == CUDA_SUCCESS) r = e;
    if (r == CUDA_SUCCESS && node == nullptr) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) *out = node;
  }
  sm.destroy(s);
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  VGPU_CALL_SCOPE();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return add_by_capture(out, g, deps, n, [p](CUstream s) {
    return vgpu::sim::memset2d("cuGraphAddMemsetNode", p->dst, p->pitch, p->value, p->elementSize,
                               p->width, p->height, vgpu::sim::Submit{s, true, false});
  });
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, const CUDA_MEMCPY3D* p, CUcontext) {
  VGPU_CALL_SCOPE();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return add_by_capture(out, g, deps, n, [p](CUstream s) {
    return vgpu::sim::copy3d("cuGraphAddMemcpyNode", *p, vgpu::sim::Submit{s, true, false});
  });
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, const CUDA_KERNEL_NODE_PARAMS* p) {
  VGPU_CALL_SCOPE();
  if (p == nullptr || (p->func == nullptr && p->kern == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return add_by_capture(out, g, deps, n, [p](CUstream s) {
    // A CUkernel may stand where a CUfunction is expected (as the real driver allows).
    CUfunction f = p->func ? p->func : reinterpret_cast<CUfunction>(p->kern);
    return cuLaunchKernel(f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                          p->blockDimZ, p->sharedMemBytes, s, p->kernelParams, p->extra);
  });
}
namespace {
// The v1 kernel-node parameters (no CUkernel, no context) as the v2 entry points take them.
CUDA_KERNEL_NODE_PARAMS kernel_params_v2(const CUDA_KERNEL_NODE_PARAMS_v1& p) {
  CUDA_KERNEL_NODE_PARAMS v2{};
  v2.func = p.func;
  v2.gridDimX = p.gridDimX; v2.gridDimY = p.gridDimY; v2.gridDimZ = p.gridDimZ;
  v2.blockDimX = p.blockDimX; v2.blockDimY = p.blockDimY; v2.blockDimZ = p.blockDimZ;
  v2.sharedMemBytes = p.sharedMemBytes;
  v2.kernelParams = p.kernelParams;
  v2.extra = p.extra;
  return v2;
}
}  // namespace
VGPU_EXPORT CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  VGPU_CALL_SCOPE();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_KERNEL_NODE_PARAMS v2 = kernel_params_v2(*p);
  return cuGraphAddKernelNode_v2(out, g, deps, n, &v2);
}

VGPU_EXPORT CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData*, size_t n) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().add_dependencies(g, from, to, n);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddDependencies(CUgraph g, const CUgraphNode* from, const CUgraphNode* to, size_t n) {
  VGPU_CALL_SCOPE();
  return cuGraphAddDependencies_v2(g, from, to, nullptr, n);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().get_nodes(g, nodes, n, false);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphGetRootNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().get_nodes(g, nodes, n, true);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph g, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* ed, size_t* n) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().get_edges(g, from, to, ed, n);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphGetEdges(CUgraph g, CUgraphNode* from, CUgraphNode* to, size_t* n) {
  VGPU_CALL_SCOPE();
  return cuGraphGetEdges_v2(g, from, to, nullptr, n);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto n = d->graphs().find_node(node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *type = n->type;
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode node) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().destroy_node(node);
}

VGPU_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph g, unsigned long long) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().instantiate(g, out);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* out, CUgraph g, CUgraphNode* err, char* log, size_t size) {
  VGPU_CALL_SCOPE();
  if (err) *err = nullptr;
  if (log && size > 0) log[0] = '\0';
  return cuGraphInstantiateWithFlags(out, g, 0);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* out, CUgraph g, CUgraphNode* err, char* log, size_t size) {
  VGPU_CALL_SCOPE();
  return cuGraphInstantiate_v2(out, g, err, log, size);
}
namespace {
CUresult instantiate_params(CUgraphExec* out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p, bool pt) {
  VGPU_STATE(d);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = nullptr;
  CUresult r = d->graphs().instantiate(g, out);
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
    (void)upload(*out, p->hUploadStream, pt);
  return r;
}
}  // namespace
VGPU_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec* out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  VGPU_CALL_SCOPE();
  return instantiate_params(out, g, p, false);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec* out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  VGPU_CALL_SCOPE();
  return instantiate_params(out, g, p, true);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().destroy_exec(e);
}
// The mark before the call's scope: work the thread's previous calls left for this one (a replay
// held for its other ranks', nccl_graph_meet.h) knows it is a graph launch, and onto which stream.
VGPU_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) {
  vgpu::NcclGraphMeetings::GraphLaunchMark mark(s);
  VGPU_CALL_SCOPE();
  return launch(e, s, false);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) {
  vgpu::NcclGraphMeetings::GraphLaunchMark mark(s);
  VGPU_CALL_SCOPE();
  return launch(e, s, true);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphUpload(CUgraphExec e, CUstream s) { VGPU_CALL_SCOPE(); return upload(e, s, false); }
VGPU_EXPORT CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec e, CUstream s) { VGPU_CALL_SCOPE(); return upload(e, s, true); }

// ---- user objects (user_objects.h) ------------------------------------------------------------
VGPU_EXPORT CUresult CUDAAPI cuUserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned int count,
                                                unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().user_objects().create(out, ptr, destroy, count, flags);
}
VGPU_EXPORT CUresult CUDAAPI cuUserObjectRetain(CUuserObject object, unsigned int count) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().user_objects().retain(object, count);
}
VGPU_EXPORT CUresult CUDAAPI cuUserObjectRelease(CUuserObject object, unsigned int count) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().user_objects().release(object, count);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphRetainUserObject(CUgraph g, CUuserObject object, unsigned int count,
                                                     unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().retain_user_object(g, object, count, flags);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph g, CUuserObject object, unsigned int count) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().release_user_object(g, object, count);
}

// ---- cloning, updating an instantiated graph, memory nodes ----------------------------------

VGPU_EXPORT CUresult CUDAAPI cuGraphClone(CUgraph* clone, CUgraph original) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().clone(original, clone);
}

// The nodes of `graph` replace those `exec` was instantiated from, where both have the same
// topology (graph.h, update_exec).
VGPU_EXPORT CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (info == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *info = CUgraphExecUpdateResultInfo{};
  return d->graphs().update_exec(exec, graph, &info->result, &info->errorNode);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode* error_node,
                                               CUgraphExecUpdateResult* result) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (error_node == nullptr || result == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return d->graphs().update_exec(exec, graph, result, error_node);
}

// A kernel node's launch: its function, shape and arguments (the driver's copy), as recorded when
// the node was made (stream capture, cuGraphAddKernelNode); CUkernel and context left null.
VGPU_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().kernel_params(node, p);
}
VGPU_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1* p) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS v2{};
  if (CUresult r = d->graphs().kernel_params(node, &v2); r != CUDA_SUCCESS) return r;
  *p = CUDA_KERNEL_NODE_PARAMS_v1{};
  p->func = v2.func;
  p->gridDimX = v2.gridDimX; p->gridDimY = v2.gridDimY; p->gridDimZ = v2.gridDimZ;
  p->blockDimX = v2.blockDimX; p->blockDimY = v2.blockDimY; p->blockDimZ = v2.blockDimZ;
  p->sharedMemBytes = v2.sharedMemBytes;
  p->kernelParams = v2.kernelParams;
  p->extra = v2.extra;
  return CUDA_SUCCESS;
}

// The new parameters are turned into a kernel node's Work the way cuGraphAddKernelNode does (a
// launch captured into a scratch graph, validated like any launch), then replace what the
// instantiated graph runs for `node`; the graph it was instantiated from is left as it was.
VGPU_EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                              const CUDA_KERNEL_NODE_PARAMS* p) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (p == nullptr || !d->graphs().find_exec(exec)) return CUDA_ERROR_INVALID_VALUE;
  CUgraph scratch = nullptr;
  if (CUresult r = d->graphs().create(&scratch); r != CUDA_SUCCESS) return r;
  CUgraphNode made = nullptr;
  CUresult r = cuGraphAddKernelNode_v2(&made, scratch, nullptr, 0, p);
  if (r == CUDA_SUCCESS) {
    auto n = d->graphs().find_node(made);
    r = n ? d->graphs().set_exec_work(exec, node, n->work) : CUDA_ERROR_INVALID_VALUE;
  }
  d->graphs().destroy(scratch);
  return r;
}
VGPU_EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                           const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  VGPU_CALL_SCOPE();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_KERNEL_NODE_PARAMS v2 = kernel_params_v2(*p);
  return cuGraphExecKernelNodeSetParams_v2(exec, node, &v2);
}

// A graph's memory allocation node: the memory is reserved when the node is made (so its
// address, returned in dptr, is fixed for every launch, as the real driver's virtual address
// is) and charged to the device's capacity until the graph is destroyed. A free node only
// orders the graph's work: the memory stays the graph's for its next launch.
VGPU_EXPORT CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                                                    CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (p == nullptr || out == nullptr || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->device(p->poolProps.location.id) == nullptr) {
    vgpu::log::warn("cuGraphAddMemAllocNode: only pinned device memory of a valid device can be allocated");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!d->graphs().find(g)) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr ptr = 0;
  if (CUresult r = d->memory().allocate_device(p->poolProps.location.id, p->bytesize, &ptr); r != CUDA_SUCCESS)
    return r;
  Work w;
  w.kind = Work::Kind::other;
  w.label = "graph mem alloc";
  if (CUresult r = add(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEM_ALLOC, std::move(w), nullptr); r != CUDA_SUCCESS) {
    d->memory().free_device(ptr);
    return r;
  }
  d->graphs().own_allocation(g, ptr);
  p->dptr = ptr;
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                                                   CUdeviceptr dptr) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (dptr == 0) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.kind = Work::Kind::other;
  w.label = "graph mem free";
  return add(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEM_FREE, std::move(w), nullptr);
}

// ---- conditional nodes and the generic cuGraphAddNode ----------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph g, CUcontext,
                                                            unsigned int defaultLaunchValue, unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  return d->graphs().conditional_handle(g, defaultLaunchValue, flags, out);
}

// Every node type the sim backend has, through the per-type entry points; the others (child
// graphs, external semaphores, batched memory operations) are CUDA_ERROR_NOT_SUPPORTED.
VGPU_EXPORT CUresult CUDAAPI cuGraphAddNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                                            CUgraphNodeParams* p) {
  VGPU_CALL_SCOPE();
  VGPU_STATE(d);
  if (p == nullptr || out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      CUDA_KERNEL_NODE_PARAMS k{};
      k.func = p->kernel.func;
      k.gridDimX = p->kernel.gridDimX; k.gridDimY = p->kernel.gridDimY; k.gridDimZ = p->kernel.gridDimZ;
      k.blockDimX = p->kernel.blockDimX; k.blockDimY = p->kernel.blockDimY; k.blockDimZ = p->kernel.blockDimZ;
      k.sharedMemBytes = p->kernel.sharedMemBytes;
      k.kernelParams = p->kernel.kernelParams;
      k.extra = p->kernel.extra;
      k.kern = p->kernel.kern;
      k.ctx = p->kernel.ctx;
      return cuGraphAddKernelNode_v2(out, g, deps, n, &k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return cuGraphAddMemcpyNode(out, g, deps, n, &p->memcpy.copyParams, p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS m{};
      m.dst = p->memset.dst;
      m.pitch = p->memset.pitch;
      m.value = p->memset.value;
      m.elementSize = p->memset.elementSize;
      m.width = p->memset.width;
      m.height = p->memset.height;
      return cuGraphAddMemsetNode(out, g, deps, n, &m, p->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
      CUDA_HOST_NODE_PARAMS h{};
      h.fn = p->host.fn;
      h.userData = p->host.userData;
      return cuGraphAddHostNode(out, g, deps, n, &h);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY: return cuGraphAddEmptyNode(out, g, deps, n);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return cuGraphAddEventRecordNode(out, g, deps, n, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return cuGraphAddEventWaitNode(out, g, deps, n, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      CUDA_MEM_ALLOC_NODE_PARAMS a{};
      a.poolProps = p->alloc.poolProps;
      a.accessDescs = p->alloc.accessDescs;
      a.accessDescCount = p->alloc.accessDescCount;
      a.bytesize = p->alloc.bytesize;
      CUresult r = cuGraphAddMemAllocNode(out, g, deps, n, &a);
      p->alloc.dptr = a.dptr;
      return r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return cuGraphAddMemFreeNode(out, g, deps, n, p->free.dptr);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      if (n > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
      return d->graphs().add_conditional(g, deps, n, p->conditional, out);
    default:
      vgpu::log::warn("cuGraphAddNode: node type {} is not supported by vgpu", static_cast<int>(p->type));
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}
VGPU_EXPORT CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                               const CUgraphEdgeData*, size_t n, CUgraphNodeParams* p) {
  VGPU_CALL_SCOPE();
  return cuGraphAddNode(out, g, deps, n, p);
}
