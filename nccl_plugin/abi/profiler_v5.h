// NCCL profiler plugin ABI v5 (NCCL 2.28 and 2.29 look for `ncclProfiler_v5` first), as far as
// vgpu uses it: the event type bits, the event descriptor and the function table. Frozen: the
// layouts are NCCL's ABI and must never change. vgpu exports it from libnccl-net-vgpu.so, where
// NCCL finds it on its own when NCCL_PROFILER_PLUGIN names no other library (NCCL then falls
// back to the net plugin's library for the profiler).
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "nccl_types.h"

// Event type bits: a descriptor's `type`, and the activation mask `init` returns.
enum {
  ncclProfileGroup = (1 << 0),         // one kernel plan of a group (started by the host)
  ncclProfileColl = (1 << 1),          // one collective task of a plan
  ncclProfileP2p = (1 << 2),           // one send/recv task of a plan
  ncclProfileProxyOp = (1 << 3),       // a task's proxy operation on one channel/peer
  ncclProfileProxyStep = (1 << 4),     // one network transfer of a proxy operation
  ncclProfileProxyCtrl = (1 << 5),
  ncclProfileKernelCh = (1 << 6),      // changes what NCCL launches: vgpu never enables it
  ncclProfileNetPlugin = (1 << 7),
  ncclProfileGroupApi = (1 << 8),      // an outermost ncclGroupStart/End (implicit for one call)
  ncclProfileCollApi = (1 << 9),       // one collective API call
  ncclProfileP2pApi = (1 << 10),       // one send/recv API call
  ncclProfileKernelLaunch = (1 << 11), // brackets the host's cuLaunchKernel(Ex) of one plan
};

// States passed to recordEventState (an int-sized enum in NCCL's headers).
typedef int ncclProfilerEventState_v5_t;

typedef struct {
  uint64_t type;    // one of the bits above
  void* parentObj;  // the handle the plugin returned for the parent event, or NULL
  int rank;
  union {
    struct {
      int graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;  // the handle of the plan's ncclProfileGroup event
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;  // as coll.parentGroup
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

// What NCCL's net transport hands isend/irecv as `phandle` (v9 and newer net ABIs) while a
// profiler is loaded: the address of this pair inside its proxy sub-operation, whose first member
// is the handle the profiler returned for the transfer's ncclProfileProxyStep event (NULL when
// that event type is not active). Same layout in NCCL 2.28 and 2.30.
typedef struct {
  void* stepEventHandle;
  void* subArgPtr;
} ncclProxyEventHandle_v5_t;
