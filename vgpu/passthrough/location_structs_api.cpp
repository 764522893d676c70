// Entry points whose parameter structures carry a CUmemLocation: graph memory-allocation nodes
// (their pool's location and peer access) and batched copies (location hints); and the graph
// nodes whose parameters name a context (a stub becomes its real context). The program's
// structures name virtual devices; the real driver gets a translated copy, and what it writes
// back (the node's address, or its parameters when asked) is copied out with virtual devices.
#include <vector>

#include "front/driver/cuda_api.h"
#include "passthrough/memory_location.h"
#include "passthrough/passthrough_state.h"

using vgpu::pt::call_real;
using vgpu::pt::to_physical;

namespace {

// A translated copy of a memory-allocation node's parameters, with its own access array.
class AllocNodeParams {
 public:
  explicit AllocNodeParams(const CUDA_MEM_ALLOC_NODE_PARAMS& in) : params_(in) {
    params_.poolProps.location = to_physical(in.poolProps.location);
    if (in.accessDescs != nullptr) {
      access_.assign(in.accessDescs, in.accessDescs + in.accessDescCount);
      for (CUmemAccessDesc& d : access_) d.location = to_physical(d.location);
      params_.accessDescs = access_.data();
    }
  }
  CUDA_MEM_ALLOC_NODE_PARAMS* get() { return &params_; }

 private:
  CUDA_MEM_ALLOC_NODE_PARAMS params_;
  std::vector<CUmemAccessDesc> access_;
};

// A physical device location the real driver reported, made virtual.
void location_to_virtual(CUmemLocation* loc) {
  if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) return;
  if (const vgpu::pt::PassState* s = vgpu::pt::PassState::get())
    if (const int v = s->virtual_of_physical(loc->id); v >= 0) loc->id = v;
}

// The context a node's parameters name, where its type names one (null: none).
CUcontext* node_context(CUgraphNodeParams* p) {
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return &p->kernel.ctx;
    case CU_GRAPH_NODE_TYPE_MEMCPY: return &p->memcpy.copyCtx;
    case CU_GRAPH_NODE_TYPE_MEMSET: return &p->memset.ctx;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return &p->conditional.ctx;
    default: return nullptr;
  }
}

// CUgraphNodeParams of any type through `call`; a memory-allocation node's are translated and its
// address copied back, and a node naming a stub context (VGPU_LAZY_CONTEXTS) names its real one.
template <class Call>
CUresult with_node_params(CUgraphNodeParams* params, Call call) {
  if (params != nullptr)
    if (CUcontext* ctx = node_context(params); ctx != nullptr && vgpu::pt::context_stubs::is_stub(*ctx)) {
      CUgraphNodeParams copy = *params;
      if (CUresult r = vgpu::pt::real_context_arg(node_context(&copy)); r != CUDA_SUCCESS) return r;
      return call(&copy);
    }
  if (params == nullptr || params->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return call(params);
  static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == sizeof(params->alloc), "v1 and v2 share one layout");
  CUDA_MEM_ALLOC_NODE_PARAMS in;
  __builtin_memcpy(&in, &params->alloc, sizeof in);
  AllocNodeParams phys(in);
  CUgraphNodeParams copy = *params;
  __builtin_memcpy(&copy.alloc, phys.get(), sizeof in);
  const CUresult r = call(&copy);
  params->alloc.dptr = copy.alloc.dptr;  // out
  return r;
}

std::vector<CUmemcpyAttributes> attrs_to_physical(const CUmemcpyAttributes* attrs, size_t n) {
  std::vector<CUmemcpyAttributes> out;
  if (attrs == nullptr) return out;
  out.assign(attrs, attrs + n);
  for (CUmemcpyAttributes& a : out) {
    a.srcLocHint = to_physical(a.srcLocHint);
    a.dstLocHint = to_physical(a.dstLocHint);
  }
  return out;
}

std::vector<CUDA_MEMCPY3D_BATCH_OP> ops_to_physical(const CUDA_MEMCPY3D_BATCH_OP* ops, size_t n) {
  std::vector<CUDA_MEMCPY3D_BATCH_OP> out;
  if (ops == nullptr) return out;
  out.assign(ops, ops + n);
  for (CUDA_MEMCPY3D_BATCH_OP& op : out)
    for (CUmemcpy3DOperand* o : {&op.src, &op.dst})
      if (o->type == CU_MEMCPY_OPERAND_TYPE_POINTER) o->op.ptr.locHint = to_physical(o->op.ptr.locHint);
  return out;
}

template <class T>
T* data_or_null(std::vector<T>& v, const void* original) {
  return original != nullptr ? v.data() : nullptr;
}

}  // namespace

// ---- graph memory-allocation nodes ----

VGPU_EXPORT CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                                    size_t n, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  using Fn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUDA_MEM_ALLOC_NODE_PARAMS*);
  const Fn real = VGPU_REAL("cuGraphAddMemAllocNode", Fn);
  if (params == nullptr) return call_real(real, node, graph, deps, n, params);
  AllocNodeParams phys(*params);
  const CUresult r = call_real(real, node, graph, deps, n, phys.get());
  params->dptr = phys.get()->dptr;  // out
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  const CUresult r = call_real(VGPU_REAL("cuGraphMemAllocNodeGetParams",
                                         CUresult (*)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS*)), node, out);
  // The access array belongs to the driver and is left as it reports it.
  if (r == CUDA_SUCCESS && out != nullptr) location_to_virtual(&out->poolProps.location);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n,
                                            CUgraphNodeParams* params) {
  using Fn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUgraphNodeParams*);
  const Fn real = VGPU_REAL("cuGraphAddNode", Fn);
  return with_node_params(params, [&](CUgraphNodeParams* p) { return call_real(real, node, graph, deps, n, p); });
}

VGPU_EXPORT CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                               const CUgraphEdgeData* edges, size_t n, CUgraphNodeParams* params) {
  using Fn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                          CUgraphNodeParams*);
  const Fn real = VGPU_REAL("cuGraphAddNode_v2", Fn);
  return with_node_params(params,
                          [&](CUgraphNodeParams* p) { return call_real(real, node, graph, deps, edges, n, p); });
}

VGPU_EXPORT CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams* params) {
  const auto real = VGPU_REAL("cuGraphNodeSetParams", CUresult (*)(CUgraphNode, CUgraphNodeParams*));
  return with_node_params(params, [&](CUgraphNodeParams* p) { return call_real(real, node, p); });
}

VGPU_EXPORT CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams* params) {
  const auto real = VGPU_REAL("cuGraphExecNodeSetParams", CUresult (*)(CUgraphExec, CUgraphNode, CUgraphNodeParams*));
  return with_node_params(params, [&](CUgraphNodeParams* p) { return call_real(real, exec, node, p); });
}

// ---- kernel nodes: their parameters name the context the kernel runs in ----

namespace {
// `params` with a stub context replaced by its real one (a copy; `params` itself otherwise).
const CUDA_KERNEL_NODE_PARAMS_v2* kernel_params(const CUDA_KERNEL_NODE_PARAMS_v2* params,
                                                CUDA_KERNEL_NODE_PARAMS_v2* copy, CUresult* r) {
  *r = CUDA_SUCCESS;
  if (params == nullptr || !vgpu::pt::context_stubs::is_stub(params->ctx)) return params;
  *copy = *params;
  *r = vgpu::pt::real_context_arg(&copy->ctx);
  return copy;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                                     size_t n, const CUDA_KERNEL_NODE_PARAMS_v2* params) {
  using Fn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS_v2*);
  CUDA_KERNEL_NODE_PARAMS_v2 copy;
  CUresult r;
  params = kernel_params(params, &copy, &r);
  return r != CUDA_SUCCESS ? r : call_real(VGPU_REAL("cuGraphAddKernelNode_v2", Fn), node, graph, deps, n, params);
}

VGPU_EXPORT CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* params) {
  using Fn = CUresult (*)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*);
  CUDA_KERNEL_NODE_PARAMS_v2 copy;
  CUresult r;
  params = kernel_params(params, &copy, &r);
  return r != CUDA_SUCCESS ? r : call_real(VGPU_REAL("cuGraphKernelNodeSetParams_v2", Fn), node, params);
}

VGPU_EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                               const CUDA_KERNEL_NODE_PARAMS_v2* params) {
  using Fn = CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*);
  CUDA_KERNEL_NODE_PARAMS_v2 copy;
  CUresult r;
  params = kernel_params(params, &copy, &r);
  return r != CUDA_SUCCESS ? r : call_real(VGPU_REAL("cuGraphExecKernelNodeSetParams_v2", Fn), exec, node, params);
}

VGPU_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v2* out) {
  using Fn = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2*);
  const CUresult r = call_real(VGPU_REAL("cuGraphKernelNodeGetParams_v2", Fn), node, out);
  return out != nullptr ? vgpu::pt::program_context_out(r, &out->ctx) : r;
}

// ---- batched copies ----

namespace {
using BatchFail = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*, size_t*, size_t,
                               size_t*, CUstream);
using Batch = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*, size_t*, size_t,
                           CUstream);
using Batch3DFail = CUresult (*)(size_t, CUDA_MEMCPY3D_BATCH_OP*, size_t*, unsigned long long, CUstream);
using Batch3D = CUresult (*)(size_t, CUDA_MEMCPY3D_BATCH_OP*, unsigned long long, CUstream);
}  // namespace

#define VGPU_BATCH_FAIL(name)                                                                                    \
  VGPU_EXPORT CUresult CUDAAPI name(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,         \
                                    CUmemcpyAttributes* attrs, size_t* idx, size_t n_attrs, size_t* fail,      \
                                    CUstream stream) {                                                         \
    std::vector<CUmemcpyAttributes> phys = attrs_to_physical(attrs, n_attrs);                                  \
    return call_real(VGPU_REAL(#name, BatchFail), dsts, srcs, sizes, count, data_or_null(phys, attrs), idx,    \
                     n_attrs, fail, stream);                                                                   \
  }
#define VGPU_BATCH(name)                                                                                         \
  VGPU_EXPORT CUresult CUDAAPI name(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,         \
                                    CUmemcpyAttributes* attrs, size_t* idx, size_t n_attrs, CUstream stream) { \
    std::vector<CUmemcpyAttributes> phys = attrs_to_physical(attrs, n_attrs);                                  \
    return call_real(VGPU_REAL(#name, Batch), dsts, srcs, sizes, count, data_or_null(phys, attrs), idx,        \
                     n_attrs, stream);                                                                         \
  }
#define VGPU_BATCH3D_FAIL(name)                                                                                  \
  VGPU_EXPORT CUresult CUDAAPI name(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail, unsigned long long flags, \
                                    CUstream stream) {                                                         \
    std::vector<CUDA_MEMCPY3D_BATCH_OP> phys = ops_to_physical(ops, n);                                        \
    return call_real(VGPU_REAL(#name, Batch3DFail), n, data_or_null(phys, ops), fail, flags, stream);          \
  }
#define VGPU_BATCH3D(name)                                                                                       \
  VGPU_EXPORT CUresult CUDAAPI name(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,            \
                                    CUstream stream) {                                                         \
    std::vector<CUDA_MEMCPY3D_BATCH_OP> phys = ops_to_physical(ops, n);                                        \
    return call_real(VGPU_REAL(#name, Batch3D), n, data_or_null(phys, ops), flags, stream);                    \
  }

VGPU_BATCH_FAIL(cuMemcpyBatchAsync)
VGPU_BATCH_FAIL(cuMemcpyBatchAsync_ptsz)
VGPU_BATCH(cuMemcpyBatchAsync_v2)
VGPU_BATCH(cuMemcpyBatchAsync_v2_ptsz)
VGPU_BATCH3D_FAIL(cuMemcpy3DBatchAsync)
VGPU_BATCH3D_FAIL(cuMemcpy3DBatchAsync_ptsz)
VGPU_BATCH3D(cuMemcpy3DBatchAsync_v2)
VGPU_BATCH3D(cuMemcpy3DBatchAsync_v2_ptsz)
