// The entry points of the recording driver (recording_driver.cpp) that do not go to the sim: they
// record the device locations they were given, read by the test through recorded_locations(),
// and answer themselves (the sim does not implement them).
#include <mutex>
#include <utility>
#include <vector>

#include "front/driver/cuda_api.h"

namespace {

std::mutex g_mu;
std::vector<int> g_locations;  // device ids of the CUmemLocations seen, in order; host: -100 - type

void record(const CUmemLocation& loc) {
  std::lock_guard l(g_mu);
  g_locations.push_back(loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : -100 - static_cast<int>(loc.type));
}

}  // namespace

// The test reads and clears what was recorded.
VGPU_EXPORT std::vector<int> recorded_locations() {
  std::lock_guard l(g_mu);
  return std::exchange(g_locations, {});
}

VGPU_EXPORT CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph, const CUgraphNode*, size_t,
                                                    CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  record(p->poolProps.location);
  for (size_t i = 0; i < p->accessDescCount; ++i) record(p->accessDescs[i].location);
  p->dptr = 0x1000;
  *node = reinterpret_cast<CUgraphNode>(0x2000);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  *out = {};
  out->poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};  // the real device
  out->bytesize = 4096;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode* node, CUgraph, const CUgraphNode*, const CUgraphEdgeData*,
                                               size_t, CUgraphNodeParams* p) {
  if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    record(p->alloc.poolProps.location);
    p->alloc.dptr = 0x3000;
  }
  *node = reinterpret_cast<CUgraphNode>(0x4000);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr*, CUdeviceptr*, size_t*, size_t,
                                                   CUmemcpyAttributes* attrs, size_t*, size_t n, CUstream) {
  for (size_t i = 0; i < n; ++i) {
    record(attrs[i].srcLocHint);
    record(attrs[i].dstLocHint);
  }
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long,
                                                     CUstream) {
  for (size_t i = 0; i < n; ++i)
    if (ops[i].src.type == CU_MEMCPY_OPERAND_TYPE_POINTER) record(ops[i].src.op.ptr.locHint);
  return CUDA_SUCCESS;
}
