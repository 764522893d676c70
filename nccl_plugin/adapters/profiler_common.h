// What the profiler ABI adapters share: every entry point but startEvent has one signature in
// v5 and v6, and startEvent reads the same members of either descriptor.
#pragma once

#include "abi/profiler_v5.h"
#include "adapters/common.h"
#include "profiler/launch_tags.h"

namespace vgpu::nccl::adapt {

inline constexpr const char* kProfilerName = "vgpu";

ncclResult_t profiler_init(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name,
                           int nodes, int nranks, int rank, ncclDebugLogger_t log);
ncclResult_t profiler_stop(void* handle);
ncclResult_t profiler_record(void* handle, int state, ncclProfilerEventStateArgs_v5_t* args);
ncclResult_t profiler_finalize(void* context);

// startEvent for a descriptor of any version (their common prefix is identical).
template <class Descr> ncclResult_t start_event(void* context, void** handle, const Descr* d) {
  if (handle == nullptr) return ncclInvalidArgument;
  *handle = nullptr;
  if (d == nullptr) return ncclSuccess;
  prof::Event e;
  e.type = d->type;
  e.parent = d->parentObj;
  if (d->type == ncclProfileColl) {
    e.plan = d->coll.parentGroup;
    e.func = d->coll.func;
    e.bytes = d->coll.count * static_cast<uint64_t>(prof::nccl_type_bytes(d->coll.datatype));
    e.count = d->coll.count;
    e.datatype = d->coll.datatype;
    e.send = d->coll.sendBuff;
    e.recv = d->coll.recvBuff;
    e.root = d->coll.root;
  }
  if (d->type == ncclProfileP2p) {
    e.plan = d->p2p.parentGroup;
    e.func = d->p2p.func;
    e.bytes = d->p2p.count * static_cast<uint64_t>(prof::nccl_type_bytes(d->p2p.datatype));
    e.peer = d->p2p.peer;
    e.count = d->p2p.count;
    e.datatype = d->p2p.datatype;
    e.send = d->p2p.buff;
    e.recv = d->p2p.buff;
  }
  if (d->type == ncclProfileCollApi) {
    e.func = d->collApi.func;
    e.count = d->collApi.count;
    e.datatype = d->collApi.datatype;
  }
  if (d->type == ncclProfileP2pApi) {  // no peer: NCCL names it only in the later P2p task
    e.func = d->p2pApi.func;
    e.count = d->p2pApi.count;
    e.datatype = d->p2pApi.datatype;
  }
  *handle = prof::LaunchTags::get().start(context, e);
  return ncclSuccess;
}

}  // namespace vgpu::nccl::adapt
