// Stream entry points: each ABI version and _ptsz/_ptds variant is a thin call into one
// implementation in StreamManager (per_thread = true for the _ptsz/_ptds ones).
#include <cstring>

#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/exec/stream.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/memory.h"

using vgpu::DriverState;
using vgpu::StreamManager;

namespace {

StreamManager* streams() {
  DriverState* d = DriverState::get();
  return d ? &d->streams() : nullptr;
}

#define VGPU_STREAMS(sm)                               \
  StreamManager* sm = streams();                        \
  if (sm == nullptr) return CUDA_ERROR_NOT_INITIALIZED

CUresult host_func(CUstream s, CUhostFn fn, void* data, bool pt) {
  VGPU_STREAMS(sm);
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Work w;
  w.kind = vgpu::Work::Kind::host_function;
  w.label = "host function";
  w.execute = [fn, data] { fn(data); };
  return sm->submit(s, std::move(w), pt);
}

CUresult add_callback(CUstream s, CUstreamCallback cb, void* data, unsigned flags, bool pt) {
  VGPU_STREAMS(sm);
  if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Work w;
  w.kind = vgpu::Work::Kind::host_function;
  w.label = "stream callback";
  w.execute = [cb, s, data] { cb(s, CUDA_SUCCESS, data); };
  return sm->submit(s, std::move(w), pt);
}

CUresult get_priority(CUstream s, int* p, bool pt) {
  VGPU_STREAMS(sm);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamManager::Info i;
  if (CUresult r = sm->info(s, pt, &i); r != CUDA_SUCCESS) return r;
  *p = i.priority;
  return CUDA_SUCCESS;
}

CUresult get_flags(CUstream s, unsigned* f, bool pt) {
  VGPU_STREAMS(sm);
  if (f == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamManager::Info i;
  if (CUresult r = sm->info(s, pt, &i); r != CUDA_SUCCESS) return r;
  *f = i.flags;
  return CUDA_SUCCESS;
}

CUresult get_ctx(CUstream s, CUcontext* c, CUgreenCtx* g, bool pt) {
  VGPU_STREAMS(sm);
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamManager::Info i;
  if (CUresult r = sm->info(s, pt, &i); r != CUDA_SUCCESS) return r;
  *c = i.ctx;
  if (g) *g = nullptr;  // no green contexts in the sim backend
  return CUDA_SUCCESS;
}

CUresult get_id(CUstream s, unsigned long long* id, bool pt) {
  VGPU_STREAMS(sm);
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamManager::Info i;
  if (CUresult r = sm->info(s, pt, &i); r != CUDA_SUCCESS) return r;
  *id = i.id;
  return CUDA_SUCCESS;
}

CUresult get_device(CUstream s, CUdevice* dev, bool pt) {
  VGPU_STREAMS(sm);
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int d = 0;
  if (CUresult r = sm->device_of(s, pt, &d); r != CUDA_SUCCESS) return r;
  *dev = d;
  return CUDA_SUCCESS;
}

CUresult get_attr(CUstream s, CUstreamAttrID a, CUstreamAttrValue* v, bool pt) {
  VGPU_STREAMS(sm);
  return sm->get_attribute(s, pt, static_cast<int>(a), v);
}

CUresult set_attr(CUstream s, CUstreamAttrID a, const CUstreamAttrValue* v, bool pt) {
  VGPU_STREAMS(sm);
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return sm->set_attribute(s, pt, static_cast<int>(a), *v);
}

// ---- stream memory operations: wait on / write a 32- or 64-bit word of device memory ----

// The host address behind [addr, addr + bytes), or null (the call then fails cleanly).
void* word_at(CUdeviceptr addr, size_t bytes) {
  DriverState* d = DriverState::get();
  if (d == nullptr || addr == 0 || addr % bytes != 0) return nullptr;
  auto r = d->memory().resolve(addr, bytes);
  return r ? r->host : nullptr;
}

template <class T> bool compare(T cur, T value, unsigned flags) {
  switch (flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH)) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return static_cast<std::make_signed_t<T>>(cur - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == value;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & value) != 0;
    case CU_STREAM_WAIT_VALUE_NOR: return static_cast<T>(~(cur | value)) != 0;
  }
  return true;
}

template <class T> CUresult wait_value(CUstream s, CUdeviceptr addr, T value, unsigned flags, bool pt) {
  VGPU_STREAMS(sm);
  if ((flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH)) > CU_STREAM_WAIT_VALUE_NOR)
    return CUDA_ERROR_INVALID_VALUE;
  auto* p = static_cast<T*>(word_at(addr, sizeof(T)));
  if (p == nullptr) {
    vgpu::log::warn("cuStreamWaitValue: {:#x} is not mapped device memory", addr);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return sm->submit_wait(
      s, [p, value, flags] { return compare<T>(__atomic_load_n(p, __ATOMIC_ACQUIRE), value, flags); },
      pt);
}

template <class T> CUresult write_value(CUstream s, CUdeviceptr addr, T value, unsigned flags, bool pt) {
  VGPU_STREAMS(sm);
  if (flags & ~static_cast<unsigned>(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER))
    return CUDA_ERROR_INVALID_VALUE;
  auto* p = static_cast<T*>(word_at(addr, sizeof(T)));
  if (p == nullptr) {
    vgpu::log::warn("cuStreamWriteValue: {:#x} is not mapped device memory", addr);
    return CUDA_ERROR_INVALID_VALUE;
  }
  vgpu::Work w;
  w.kind = vgpu::Work::Kind::memset;
  w.label = "write value";
  w.execute = [p, value] { __atomic_store_n(p, value, __ATOMIC_RELEASE); };
  return sm->submit(s, std::move(w), pt);
}

CUresult batch_mem_op(CUstream s, unsigned count, CUstreamBatchMemOpParams* ops, unsigned flags,
                      bool pt) {
  VGPU_STREAMS(sm);
  if (flags != 0 || (count > 0 && ops == nullptr) || count > 256) return CUDA_ERROR_INVALID_VALUE;
  // Validate every op first so that nothing is queued for a batch that fails.
  for (unsigned i = 0; i < count; ++i) {
    const auto& op = ops[i];
    switch (op.operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        if (!word_at(op.waitValue.address, 4)) return CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        if (!word_at(op.waitValue.address, 8)) return CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
      case CU_STREAM_MEM_OP_BARRIER:
        break;
      default:
        vgpu::log::warn("cuStreamBatchMemOp: unknown operation {}", static_cast<int>(op.operation));
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (unsigned i = 0; i < count; ++i) {
    const auto& op = ops[i];
    CUresult r = CUDA_SUCCESS;
    switch (op.operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        r = wait_value<cuuint32_t>(s, op.waitValue.address, op.waitValue.value, op.waitValue.flags, pt);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        r = wait_value<cuuint64_t>(s, op.waitValue.address, op.waitValue.value64, op.waitValue.flags, pt);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        r = write_value<cuuint32_t>(s, op.writeValue.address, op.writeValue.value, op.writeValue.flags, pt);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        r = write_value<cuuint64_t>(s, op.writeValue.address, op.writeValue.value64, op.writeValue.flags, pt);
        break;
      default:
        break;  // flushes and barriers: host-backed memory is always coherent
    }
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream* ph, unsigned int flags) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->create(ph, flags, 0);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->create(ph, flags, priority);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream s) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  return sm->destroy(s);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s) { VGPU_CALL_SCOPE(); return cuStreamDestroy_v2(s); }

#define VGPU_BOTH(ret_call, name, params, args)                                         \
  VGPU_EXPORT CUresult CUDAAPI name params { VGPU_CALL_SCOPE(); return ret_call(args, false); } \
  VGPU_EXPORT CUresult CUDAAPI name##_ptsz params { VGPU_CALL_SCOPE(); return ret_call(args, true); }

namespace {
CUresult query(CUstream s, bool pt) { VGPU_STREAMS(sm); return sm->query(s, pt); }
CUresult sync(CUstream s, bool pt) { VGPU_STREAMS(sm); return sm->synchronize(s, pt); }
CUresult wait_event(CUstream s, CUevent e, unsigned f, bool pt) {
  VGPU_STREAMS(sm);
  return sm->wait_event(s, e, f, pt);
}
CUresult copy_attrs(CUstream d, CUstream s, bool pt) { VGPU_STREAMS(sm); return sm->copy_attributes(d, s, pt); }
}  // namespace

// cuCtxSynchronize: every stream of a context (`ctx` null: the current one).
VGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  VGPU_CALL_SCOPE();
  VGPU_STREAMS(sm);
  std::shared_ptr<vgpu::Context> c;
  if (CUresult r = DriverState::get()->contexts().resolve(ctx, &c); r != CUDA_SUCCESS) return r;
  return sm->synchronize_context(c->handle());
}
VGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize(void) { VGPU_CALL_SCOPE(); return cuCtxSynchronize_v2(nullptr); }

#define A(...) __VA_ARGS__
// A question about work: its own bracket (the polling rule, timing/thread_clock.h).
VGPU_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream s) { VGPU_QUERY_CALL_SCOPE(); return query(s, false); }
VGPU_EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream s) { VGPU_QUERY_CALL_SCOPE(); return query(s, true); }
VGPU_BOTH(sync, cuStreamSynchronize, (CUstream s), A(s))
VGPU_BOTH(wait_event, cuStreamWaitEvent, (CUstream s, CUevent e, unsigned int f), A(s, e, f))
VGPU_BOTH(host_func, cuLaunchHostFunc, (CUstream s, CUhostFn fn, void* d), A(s, fn, d))
VGPU_BOTH(add_callback, cuStreamAddCallback, (CUstream s, CUstreamCallback cb, void* d, unsigned int f), A(s, cb, d, f))
VGPU_BOTH(get_priority, cuStreamGetPriority, (CUstream s, int* p), A(s, p))
VGPU_BOTH(get_flags, cuStreamGetFlags, (CUstream s, unsigned int* f), A(s, f))
VGPU_BOTH(get_id, cuStreamGetId, (CUstream s, unsigned long long* id), A(s, id))
VGPU_BOTH(get_device, cuStreamGetDevice, (CUstream s, CUdevice* d), A(s, d))
VGPU_BOTH(get_attr, cuStreamGetAttribute, (CUstream s, CUstreamAttrID a, CUstreamAttrValue_v1* v), A(s, a, v))
VGPU_BOTH(set_attr, cuStreamSetAttribute, (CUstream s, CUstreamAttrID a, const CUstreamAttrValue_v1* v), A(s, a, v))
VGPU_BOTH(copy_attrs, cuStreamCopyAttributes, (CUstream d, CUstream s), A(d, s))
VGPU_BOTH(batch_mem_op, cuStreamBatchMemOp, (CUstream s, unsigned int n, CUstreamBatchMemOpParams* p, unsigned int f), A(s, n, p, f))
VGPU_BOTH(batch_mem_op, cuStreamBatchMemOp_v2, (CUstream s, unsigned int n, CUstreamBatchMemOpParams* p, unsigned int f), A(s, n, p, f))

VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream s, CUcontext* c) { VGPU_CALL_SCOPE(); return get_ctx(s, c, nullptr, false); }
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream s, CUcontext* c) { VGPU_CALL_SCOPE(); return get_ctx(s, c, nullptr, true); }
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx_v2(CUstream s, CUcontext* c, CUgreenCtx* g) { VGPU_CALL_SCOPE(); return get_ctx(s, c, g, false); }
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream s, CUcontext* c, CUgreenCtx* g) { VGPU_CALL_SCOPE(); return get_ctx(s, c, g, true); }

// cuStreamWaitValue32 (v1) and _v2 share one ABI and one behaviour.
#define VGPU_MEMOP(name, fn, T)                                                                  \
  VGPU_EXPORT CUresult CUDAAPI name(CUstream s, CUdeviceptr a, T v, unsigned int f) { VGPU_CALL_SCOPE(); return fn<T>(s, a, v, f, false); } \
  VGPU_EXPORT CUresult CUDAAPI name##_ptsz(CUstream s, CUdeviceptr a, T v, unsigned int f) { VGPU_CALL_SCOPE(); return fn<T>(s, a, v, f, true); }
VGPU_MEMOP(cuStreamWaitValue32, wait_value, cuuint32_t)
VGPU_MEMOP(cuStreamWaitValue32_v2, wait_value, cuuint32_t)
VGPU_MEMOP(cuStreamWaitValue64, wait_value, cuuint64_t)
VGPU_MEMOP(cuStreamWaitValue64_v2, wait_value, cuuint64_t)
VGPU_MEMOP(cuStreamWriteValue32, write_value, cuuint32_t)
VGPU_MEMOP(cuStreamWriteValue32_v2, write_value, cuuint32_t)
VGPU_MEMOP(cuStreamWriteValue64, write_value, cuuint64_t)
VGPU_MEMOP(cuStreamWriteValue64_v2, write_value, cuuint64_t)
