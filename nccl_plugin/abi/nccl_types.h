// Types shared by every NCCL net plugin ABI version (v8 .. v12): error codes, the logger and
// profiler callbacks, device-offload types and the constants NCCL and plugins agree on.
// Frozen: values are NCCL's ABI and must never change.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* phandle,
                                               int64_t pluginId, void* extData);

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
} ncclNetDeviceType;

#define NCCL_NET_DEVICE_INVALID_VERSION 0x0

// Identical layout in every version from v7 on; each version header names its own alias.
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
// Requests each comm must carry at once (times maxRecvs on the send side).
#define NCCL_NET_MAX_REQUESTS 32
// irecv's *request may hold this on entry (LL/LL128): the plugin still returns a real request.
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
// NCCL's own default for maxP2pBytes / maxCollBytes (v9 and newer).
#define NCCL_MAX_NET_SIZE_BYTES (1024LL * 1024 * 1024 * 1024)
// NCCL's cap on one transfer for plugins older than v9 (INT sizes).
#define NCCL_MAX_NET_SIZE_V8 (1024LL * 1024 * 1024)
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#define NCCL_NET_ID_UNDEF -1
