// Drives libnccl-net-vgpu.so the way NCCL 2.28's proxy thread does, for the benchmark and the
// tests (tests/nccl_plugin/nccl_pattern_test.cpp): the plugin is dlopened and its v11 or v12
// table initialized; each rank connects one send comm to its peer and accepts one receive comm
// from it per channel (a 2-rank ring); a message is split over the channels and each part cut
// into chunks (NCCL's Simple protocol: 8 steps of 512 KiB in a 4 MiB buffer); the proxy keeps up
// to 8 receives and 8 sends outstanding per channel, posts receives first, tags sends with its
// rank as NCCL does, and tests the oldest request of each direction once per progress pass.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "abi/nccl_types.h"

namespace nccl_bench {

// The calls the proxy makes; v11 and v12 share these signatures.
struct NetOps {
  const char* abi = "";
  void* ctx = nullptr;
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listen_comm) = nullptr;
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** send_comm,
                          ncclNetDeviceHandle_v7_t** dev_comm) = nullptr;
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm,
                         ncclNetDeviceHandle_v7_t** dev_comm) = nullptr;
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle) = nullptr;
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle) = nullptr;
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request) = nullptr;
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request) = nullptr;
  ncclResult_t (*test)(void* request, int* done, int* sizes) = nullptr;
  ncclResult_t (*close_send)(void* send_comm) = nullptr;
  ncclResult_t (*close_recv)(void* recv_comm) = nullptr;
  ncclResult_t (*close_listen)(void* listen_comm) = nullptr;
  void (*set_thread_gpu)(int gpu) = nullptr;
  void (*set_clock)(double (*clock)(int gpu)) = nullptr;
  int (*latest_completion)(int gpu, double* finish) = nullptr;
};

// Loads the plugin at `path` (dlopen; a second load in one process reuses the first) and
// initializes table `abi` (11 or 12). Empty string on success, else what failed.
std::string load_plugin(const char* path, int abi, NetOps* out);

inline constexpr int kMaxSizes = 16;
inline constexpr int kMaxChannels = 8;
inline constexpr int kMaxDepth = 32;  // NCCL_NET_MAX_REQUESTS

// What the two ranks share: MAP_SHARED memory made before they are forked (or started as
// threads), so the same code serves both.
struct Shared {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> failed;
  char handle[2][kMaxChannels][NCCL_NET_HANDLE_MAXSIZE];
  uint32_t iters;                      // agreed per size (rank 0 decides after the warm-up)
  double seconds[2];                   // each rank's time for `iters` exchanges
  double per_exchange[kMaxSizes];      // result: best batch, max over ranks, s per exchange
  uint64_t verified_bytes[2];          // bytes each rank checked on arrival
  uint64_t messages[2];                // receives each rank completed
  char error[256];
};

Shared* map_shared();  // zeroed; never unmapped (short-lived programs)

struct RunConfig {
  size_t sizes[kMaxSizes] = {};
  int nsizes = 0;
  size_t chunk = 512 * 1024;  // NCCL Simple protocol step
  int depth = 8;              // NCCL_STEPS: outstanding requests per direction and channel
  int channels = 1;           // connections per direction, each with its own pipeline
  // > 0: time each size (warm-up, then the best of a few batches of about this long);
  // 0: run each size once, untimed (tests).
  double target_seconds = 0.3;
  int max_iters = 2000;
  // Fill and check every byte (tests); otherwise only a stamp at both ends of each chunk.
  bool verify_all = false;
  int first_gpu = 0;  // rank r is global GPU first_gpu + r (the plugin contract's set_thread_gpu)
  // Install a clock hook as the passthrough backend does: each exchange is one NCCL kernel whose
  // virtual start (the latest completion its GPU saw before it) is the earliest start of all of
  // its transfers. Off: no hook (the plugin's own fallback clock).
  bool kernel_clock = false;
};

// One rank of the ring: connects, runs every size, closes. Timings (rank 0) and any failure
// (either rank) land in `shared`. Returns false on failure.
bool run_rank(const NetOps& ops, Shared* shared, int rank, const RunConfig& cfg);

}  // namespace nccl_bench
