/* The contract between the vgpu driver (libcuda.so.1, either backend) and vgpu's NCCL plugin
 * (libnccl-net-vgpu.so: NCCL's net plugin and profiler). Plain C, plain data: two versioned
 * tables of function pointers, one offered by each side, handed over ONCE by one call.
 *
 * Who calls whom: NCCL loads the plugin itself (dlopen, RTLD_LOCAL), so neither library links
 * the other. The plugin exports one symbol, vgpu_nccl_plugin_contract (the handshake below).
 * It is reached either way round, whichever comes first:
 *   - the driver, meeting its first NCCL kernel, finds the library NCCL loaded
 *     (dlopen("libnccl-net-vgpu.so", RTLD_NOLOAD)) and calls it;
 *   - the plugin, needing its rank's device before any kernel (connection setup), knocks on the
 *     loaded driver through the private export table below (cuGetExportTable with the UUID
 *     VGPU_NCCL_CONTRACT_TABLE_UUID, as the clock shim does for its table; the driver exports
 *     nothing new): the table's one slot hands the handshake function to the driver, which
 *     calls it at once.
 * A driver and a plugin of different contract versions (or table sizes) refuse each other with
 * one log line; NCCL kernels are then timed without the plugin and the rank's device is taken
 * as 0. Nothing crashes.
 *
 * Every function is thread-safe and never fails hard: a missing answer is a -1 return. */
#ifndef VGPU_CONTRACTS_NCCL_PLUGIN_H
#define VGPU_CONTRACTS_NCCL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This header's version; a new slot, a changed struct or a changed meaning bumps it. */
#define VGPU_NCCL_CONTRACT_VERSION 8u

/* ---- What both sides describe ---------------------------------------------------------- */

/* One completed transfer request, as the plugin logged it. */
typedef struct vgpu_nccl_completion {
  uint64_t seq;     /* 1, 2, ... in the order requests completed in this process */
  uint64_t flow_id; /* simcore event of the (first) transfer; 0 when virtual time is off */
  int gpu;          /* global GPU of the rank that completed the request */
  int peer_gpu;
  int is_send;
  int pad;
  uint64_t bytes;
  double start;     /* virtual seconds (NaN when unknown) */
  double finish;
  uint64_t launch;  /* the NCCL kernel launch it belongs to (0: unknown) */
  double ready;     /* a receive: when the kernels at both ends had begun (NaN: unknown) */
} vgpu_nccl_completion;

/* One operation of an NCCL kernel launch. A collective is one entry per call (NCCL's
 * "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", ...); point-to-point work is
 * one entry per kind ("Send", "Recv") over all of the launch's calls of that kind. */
typedef struct vgpu_nccl_operation {
  char func[16];
  uint64_t bytes; /* count times the datatype's size; Send/Recv: to other ranks */
  int peers;      /* Send/Recv: distinct other ranks */
  int self;       /* Send/Recv: also to the rank itself (an all-to-all's own share) */
} vgpu_nccl_operation;

#define VGPU_NCCL_MAX_OPERATIONS 64

/* One task of an NCCL kernel launch as NCCL's profiler described it (its Coll or P2p event):
 * the buffers the kernel reads and writes, so that the sim backend, which runs no NCCL kernel,
 * can move the data itself (sim/exec/nccl_data.h). */
typedef struct vgpu_nccl_task {
  char func[16];      /* "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv" */
  char datatype[16];  /* NCCL's name: "ncclFloat32", ... */
  const void* send;   /* collectives: sendBuff; Send: buff */
  void* recv;         /* collectives: recvBuff; Recv: buff */
  uint64_t count;     /* NCCL's count (per rank: an all-gather's send count, a reduce-scatter's recv count) */
  int root;           /* Broadcast, Reduce */
  int peer;           /* Send, Recv */
} vgpu_nccl_task;

#define VGPU_NCCL_MAX_TASKS 64

/* What one NCCL kernel launch does, from NCCL's profiler events: the ONE description both
 * backends time an NCCL kernel by (the sim backend from inside the launch, the passthrough once
 * the kernel completed). Collectives come from the calls of the launch's group on its
 * communicator (NCCL's CollApi events, known from the launch on; all of them go to the first
 * kernel of that communicator in the group, as NCCL splits a group only past one kernel's work
 * budget), else from the kernel's own tasks; Send/Recv from the kernel's tasks. */
typedef struct vgpu_nccl_launch {
  uint64_t comm_id; /* NCCL's id of the communicator (the same on every rank) */
  int nranks;       /* the communicator's size */
  int nnodes;       /* as NCCL counts hosts (under vgpu: not the virtual cluster's nodes) */
  int rank;         /* the calling rank in it */
  int count;        /* operations below (at most VGPU_NCCL_MAX_OPERATIONS) */
  vgpu_nccl_operation op[VGPU_NCCL_MAX_OPERATIONS];
} vgpu_nccl_launch;

/* ---- What the driver offers the plugin ------------------------------------------------- */

typedef struct vgpu_nccl_driver_side {
  uint32_t size;    /* sizeof(vgpu_nccl_driver_side) of the driver's build */
  uint32_t version; /* VGPU_NCCL_CONTRACT_VERSION of the driver's build */
  /* The virtual "now" of a global GPU: the earliest start of a transfer it takes part in. NULL:
   * the plugin uses its own rule (the latest completion). */
  double (*gpu_clock)(int global_gpu);
  /* The virtual start of NCCL kernel launch `launch` of `global_gpu`, preferred for the
   * transfers of that launch; negative: not known (gpu_clock is used). NULL: none. */
  double (*launch_clock)(int global_gpu, uint64_t launch);
  /* The calling thread's current device ordinal (as cuCtxGetDevice): 0 and *device set, or -1
   * when the thread has no current context. NULL: device 0. */
  int (*current_device)(int* device);
  /* The cluster's GPU of the calling thread's current device: 0 and *gpu set, or -1 when the
   * thread has no current context. For a driver whose ordinals are not the node's (the sim
   * backend under CUDA_VISIBLE_DEVICES numbers a process's GPUs from 0 whatever their node).
   * NULL: the plugin derives it (VGPU_NODE_INDEX x GPUs per node + current_device). */
  int (*current_global_gpu)(int* gpu);
  /* Bracket the plugin's own work on the calling thread (its NCCL profiler callbacks, which the
   * real job does not run: NCCL calls them on the host between the program's driver calls):
   * the thread's virtual clock is not charged the CPU time in between, as it is not charged
   * vgpu's own time inside a driver call. Nest; always called in pairs. NULL: none. */
  void (*own_work_begin)(void);
  void (*own_work_end)(void);
  /* NCCL's host cost on the calling thread (the driver's model of it, [collectives.host]): the
   * plugin's profiler reports each group of NCCL calls (GroupApi: ncclGroupStart to ncclGroupEnd,
   * or the implicit group of a single call), each call in it (CollApi, P2pApi: an id of the
   * calling rank's communicator, ncclComm_t, and whether it is an all-reduce) and each kernel
   * launch of it (KernelLaunch, just before the cuLaunchKernel), and the driver charges the
   * thread the group's modeled cost in place of the CPU time NCCL spends in it. Groups nest;
   * begin and end always in pairs. NULL: none (the plugin calls all four or none). */
  void (*nccl_group_begin)(void);
  void (*nccl_group_operation)(uint64_t rank_comm, int all_reduce);
  void (*nccl_group_launch)(void);
  void (*nccl_group_end)(void);
  /* Every task of NCCL kernel launch `launch` was started (NCCL ended the event of the launch's
   * plan: launch_tasks returns 1 from now on). NCCL starts a plan's tasks right after its kernel
   * launch returned, on the launching thread, before that thread's next CUDA call (or from its
   * host stream, for graph-captured and persistent plans). The sim backend holds a send/recv
   * kernel of a communicator of more than two ranks from its launch until this call, as only
   * the tasks name its peers (vgpu/sim/exec/nccl_p2p.h). Called outside the plugin's locks,
   * inside own_work_begin/end; may block while the driver waits for a peer. NULL: none. */
  void (*launch_tasks_done)(uint64_t launch);
  /* The driver's promise for `global_gpu` of this process (the plugin's floor in the job's vgpud,
   * nccl_plugin/core/virtual_time.h): no value that gpu_clock or launch_clock answers for that GPU
   * from this call on, for a launch made later or one whose transfers are not all done, lies
   * below the returned time. Negative: no promise now. NULL: none (the plugin then moves no floor
   * while the driver's clocks are installed). */
  double (*gpu_floor)(int global_gpu);
} vgpu_nccl_driver_side;

/* ---- What the plugin offers the driver ------------------------------------------------- */

typedef struct vgpu_nccl_plugin_side {
  uint32_t size;    /* sizeof(vgpu_nccl_plugin_side) of the plugin's build */
  uint32_t version; /* VGPU_NCCL_CONTRACT_VERSION of the plugin's build */
  /* The tag of the NCCL kernel launch under way on the calling thread (NCCL's profiler brackets
   * each cuLaunchKernel(Ex) of its kernels, so the driver asks from inside that call); 0: none
   * (another profiler, NCCL older than 2.28). */
  uint64_t (*current_launch)(void);
  /* What launch `launch` does. 0 on success, -1 for a launch the profiler does not know. */
  int (*describe_launch)(uint64_t launch, vgpu_nccl_launch* out);
  /* When the ranks launch `launch` exchanged bytes with had all begun their kernels (the latest
   * `ready` of its completed receives), the latest virtual finish of its completed transfers
   * and how many completed (count may be NULL). 0 on success, -1 when no receive completed. */
  int (*launch_window)(uint64_t launch, double* ready, double* last_finish, uint64_t* count);
  /* The latest virtual finish of the completed transfers of `launch` (simcore asked again for
   * the latest few, which later arrivals may have moved) and how many (count may be NULL).
   * 0 on success, -1 when none completed (yet). */
  int (*launch_transfers)(uint64_t launch, double* finish, uint64_t* count);
  /* The driver is done with `launch`: its transfer record may go (records are bounded too). */
  void (*forget_launch)(uint64_t launch);
  /* Up to `max` completions with seq > after_seq, oldest first (the log keeps the last 4096).
   * Returns how many were written, -1 on bad arguments. */
  int (*completions)(uint64_t after_seq, vgpu_nccl_completion* out, int max);
  /* Where simcore now places a transfer (it may still move until final). 0 / -1. */
  int (*flow_interval)(uint64_t flow_id, double* start, double* finish);
  /* The latest virtual finish of any completed request of `global_gpu`. 0 / -1. */
  int (*latest_completion)(int global_gpu, double* finish);
  /* The request whose test() most recently reported done on the calling thread. 0 / -1. */
  int (*last_completion)(vgpu_nccl_completion* out);
  /* The global GPU of the calling thread's rank for comms it creates from now on (ranks as
   * threads; -1 clears). Precedence: this, VGPU_GLOBAL_RANK_GPU, the driver's
   * current_global_gpu, then VGPU_NODE_INDEX * gpus_per_node + the driver's current device. */
  void (*set_thread_gpu)(int global_gpu);
  /* How many ranks of communicator `comm_id` this process holds (NCCL opened a profiler context
   * for each and has not closed it): the ranks a process driving several GPUs launches itself,
   * the others being in other processes. 0: none known. */
  int (*local_ranks)(uint64_t comm_id);
  /* The tasks of launch `launch` (at most `max`, in the order NCCL started them) into out[],
   * their number into *count. NCCL starts a plan's task events right after the kernel launch
   * returns (or from its host stream): returns 1 once every task of the launch was started
   * (NCCL ended the plan's event), 0 while more may come, -1 for a launch not known. */
  int (*launch_tasks)(uint64_t launch, vgpu_nccl_task* out, int max, int* count);
} vgpu_nccl_plugin_side;

/* ---- The handshake -------------------------------------------------------------------- */

/* Exported by the plugin. The driver passes its version and its table (NULL: a reader such as a
 * test that installs nothing and only wants the plugin's table) and a table to fill whose size
 * and version fields it set to its own. Versions and sizes must match exactly: otherwise the
 * plugin logs one line, installs nothing, writes nothing and returns -1. On success the
 * plugin keeps the driver's table (its functions must stay callable for the process's life),
 * fills *out and returns 0. The plugin keeps the table of the first driver that handed one over,
 * known by the table's address: the same driver handing it over again replaces it; another
 * driver in the process (vgpu's passthrough over vgpu's sim backend) only reads. */
typedef int (*vgpu_nccl_plugin_contract_fn)(uint32_t driver_version,
                                            const vgpu_nccl_driver_side* driver,
                                            vgpu_nccl_plugin_side* out);
#define VGPU_NCCL_PLUGIN_CONTRACT_SYMBOL "vgpu_nccl_plugin_contract"
#define VGPU_NCCL_PLUGIN_LIBRARY "libnccl-net-vgpu.so"

/* The driver's private export table for the plugin's knock: cuGetExportTable(&table, &uuid)
 * with uuid = d4b5a0e1-6a43-4c6e-9a55-3f0c27e18b5d (the bytes below; never to change).
 *   slot 0  size_t  the table's size in bytes (8 x 2)
 *   slot 1  int (*offer_plugin)(vgpu_nccl_plugin_contract_fn handshake)
 *             the driver calls `handshake` with its side before returning: 0 when the two
 *             sides agreed, -1 otherwise (refused, or the driver is not initialised yet: the
 *             plugin may knock again later). */
#define VGPU_NCCL_CONTRACT_TABLE_UUID                                                          \
  {0xd4, 0xb5, 0xa0, 0xe1, 0x6a, 0x43, 0x4c, 0x6e,                                            \
   0x9a, 0x55, 0x3f, 0x0c, 0x27, 0xe1, 0x8b, 0x5d}
typedef struct vgpu_nccl_contract_table {
  size_t size;
  int (*offer_plugin)(vgpu_nccl_plugin_contract_fn handshake);
} vgpu_nccl_contract_table;

#ifdef __cplusplus
}
#endif

#endif /* VGPU_CONTRACTS_NCCL_PLUGIN_H */
