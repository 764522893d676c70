// The plugin's small C interface for the vgpu driver (resolved with dlsym on
// libnccl-net-vgpu.so, which NCCL loaded): how the plugin learns each rank's virtual clock and
// GPU, and how the driver reads back the virtual completion of the transfers NCCL waited for,
// so that each NCCL kernel can be given the virtual duration of its transfers.
// Every function is thread-safe and never fails hard: a missing answer is a -1 return.
//
// Launch tags: with vgpu's NCCL profiler loaded (profiler/launch_tags.h), every transfer knows
// the NCCL kernel launch it belongs to, and the driver learns each NCCL launch's tag from inside
// its cuLaunchKernel(Ex) (vgpu_nccl_current_launch). Tag 0 means unknown.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
#define VGPU_NCCL_API extern "C" __attribute__((visibility("default")))
#else
#define VGPU_NCCL_API __attribute__((visibility("default")))
#endif

typedef struct {
  uint64_t seq;        // 1, 2, ... in the order requests completed in this process
  uint64_t flow_id;    // simcore event of the (first) transfer; 0 when virtual time is off
  int gpu;             // global GPU of the rank that completed the request
  int peer_gpu;
  int is_send;
  int pad;
  uint64_t bytes;
  double start;        // virtual seconds (NaN when unknown)
  double finish;
  uint64_t launch;     // the NCCL kernel launch it belongs to (0: unknown)
  double ready;        // a receive: when the kernels at both ends had begun (NaN: unknown)
} vgpu_nccl_completion;

// One collective API call of an NCCL kernel launch, as NCCL's profiler described it when the
// call was made (its CollApi event): what the sim backend times the kernel by.
typedef struct {
  uint64_t comm_id;   // NCCL's id of the communicator (the same on every rank)
  int nranks;         // the communicator's size
  int rank;           // the calling rank in it
  char func[24];      // NCCL's name: "AllReduce", "AllGather", "ReduceScatter", "Broadcast", ...
  uint64_t count;     // NCCL's count (elements)
  int type_bytes;     // the datatype's size (0: unknown)
  int pad;
} vgpu_nccl_collective;

// This header's version; the driver uses nothing else of a plugin that answers another.
#define VGPU_NCCL_INTERFACE_VERSION 3
VGPU_NCCL_API int vgpu_nccl_interface_version(void);

// The virtual "now" of a global GPU, used as the earliest start of every transfer it issues or
// accepts (the later of sender's and receiver's). Unset: 0. nullptr resets.
typedef double (*vgpu_nccl_clock_fn)(int global_gpu);
VGPU_NCCL_API void vgpu_nccl_set_clock(vgpu_nccl_clock_fn fn);

// The virtual start of the NCCL kernel launch `launch` of `global_gpu`, preferred over the GPU's
// clock for the transfers of that launch; a negative answer means "not known": the GPU's clock
// is used. nullptr resets.
typedef double (*vgpu_nccl_launch_clock_fn)(int global_gpu, uint64_t launch);
VGPU_NCCL_API void vgpu_nccl_set_launch_clock(vgpu_nccl_launch_clock_fn fn);

// The tag of the NCCL kernel launch under way on the calling thread: NCCL's profiler brackets
// each cuLaunchKernel(Ex) of its kernels, so the driver asks from inside that call. 0: none.
VGPU_NCCL_API uint64_t vgpu_nccl_current_launch(void);

// The latest virtual finish among the completed transfers of launch `launch` (simcore is asked
// again for the latest few, which later arrivals may have moved), and how many completed.
// 0 on success, -1 when none completed (yet).
VGPU_NCCL_API int vgpu_nccl_launch_transfers(uint64_t launch, double* finish, uint64_t* count);

// When the ranks launch `launch` exchanged bytes with had all begun their kernels (the latest
// `ready` among its completed receives: for two ranks exactly when the collective could start;
// for more, as far as its neighbours tell), the latest virtual finish among its completed
// transfers, and how many completed. 0 on success, -1 when no receive of it completed.
VGPU_NCCL_API int vgpu_nccl_launch_window(uint64_t launch, double* ready, double* last_finish,
                                          uint64_t* count);

// What launch `launch` does, from NCCL's profiler events: its operations (NCCL's names, bytes
// as count times datatype size, one entry per kind of operation; Sends that include one to
// the rank itself are an all-to-all) and its communicator's shape.
typedef struct {
  char func[16];
  uint64_t bytes;  // to other ranks
  int peers;       // Send/Recv: distinct other ranks
  int self;        // Send/Recv: also to the rank itself (an all-to-all's own share)
} vgpu_nccl_work_item;
typedef struct {
  int nranks;
  int nnodes;
  int items;
  int pad;
  vgpu_nccl_work_item item[8];
} vgpu_nccl_launch_work;
// 0 on success, -1 when the launch is unknown (no vgpu profiler, or its record aged out).
VGPU_NCCL_API int vgpu_nccl_launch_collective(uint64_t launch, vgpu_nccl_launch_work* out);

// The collective calls of NCCL kernel launch `launch` (a tag from vgpu_nccl_current_launch), up
// to `max` of them into `out`: the calls its group made on the launch's communicator, given to
// the first launch of that communicator in the group (NCCL splits a group into several kernels
// only past one kernel's work budget; later ones get none). Returns how many were written, 0
// for a launch with none (send/recv only) and -1 for one the profiler does not know (no
// profiler loaded, an old launch, bad arguments). Answerable from inside the launch.
VGPU_NCCL_API int vgpu_nccl_launch_collectives(uint64_t launch, vgpu_nccl_collective* out, int max);

// The driver is done with `launch`: its record may go (records are also bounded in number).
VGPU_NCCL_API void vgpu_nccl_forget_launch(uint64_t launch);

// The global GPU of the calling thread's rank, for comms it creates from now on (tests running
// ranks as threads; -1 clears). Precedence: this, VGPU_GLOBAL_RANK_GPU, then
// VGPU_NODE_INDEX * gpus_per_node + cuCtxGetDevice().
VGPU_NCCL_API void vgpu_nccl_set_thread_gpu(int global_gpu);

// Latest virtual finish of any completed request of `global_gpu`. 0 on success, -1 when none.
VGPU_NCCL_API int vgpu_nccl_latest_completion(int global_gpu, double* finish);

// The request whose test() most recently reported done on the calling thread. 0 / -1.
VGPU_NCCL_API int vgpu_nccl_last_completion(vgpu_nccl_completion* out);

// Up to `max` completions with seq > after_seq (oldest first; the log keeps the last 4096).
// Returns how many were written, -1 on bad arguments.
VGPU_NCCL_API int vgpu_nccl_completions(uint64_t after_seq, vgpu_nccl_completion* out, int max);

// Where simcore now places a transfer (it may still move until final). 0 / -1.
VGPU_NCCL_API int vgpu_nccl_flow_interval(uint64_t flow_id, double* start, double* finish);
