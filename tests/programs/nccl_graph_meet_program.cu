// Graph replays of a captured all-reduce meet the other ranks' replays, on the sim backend (issue
// 23; vgpu/sim/exec/nccl_graph_meet.h): NCCL from the toolkit, one process driving two GPUs
// (ncclCommInitAll, one thread launching both ranks), rank L late by a memset on its stream.
//
// Each step starts at one gate (every stream waits for an event after eight 1 GiB memsets on GPU
// 0's gate stream, 2.6 ms, so that every launch of the step is issued before anything starts, and
// the host time between launches counts for nothing: one 1 GiB memset was once too short for a
// loaded CI machine, where the first replay's launches took longer); then rank L's stream runs a
// DELAY memset, then the all-reduce of BYTES on both ranks, then each rank records its stop event. Each rank's time is the
// gate's event to its stop event (cudaEventElapsedTime):
//   direct   the all-reduce launched directly (ncclGroupStart/End over both ranks): both ranks
//            end together, the delay plus the collective's time after the gate, as real ranks'
//            kernels wait for one another
//   graph    each rank's all-reduce captured into a graph of its stream, replayed (rank 0's graph,
//            then rank 1's), twice a step: each replay must read as the direct launch, on both
//            ranks (before: the rank that is not late ended the collective's time after the gate,
//            as if its peer had arrived with it)
// for L = 1 (the rank launched second is late) and L = 0 (the one launched first is).
// Prints each time and "ok   <step>"; "FAIL ..." when a replay differs from the direct launch.
//
// With --procs, the ranks are processes as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK;
// the ncclUniqueId through ID_FILE), each on its GPU: there is no gate to share, so each step
// starts at the end of an all-reduce launched directly (every rank's ends at the same virtual
// time), its start event recorded right behind it; then as above, rank L's delay memset and the
// all-reduce, launched directly or replayed. Each rank's time is its start event to its stop
// event; the direct launch's must also be the same on both ranks (the step's premise).
//
// With --procs and PER above 1, each process holds PER ranks (its GPUs LOCAL_RANK * PER onward,
// one thread driving them through NCCL groups, as ncclCommInitAll's job does): a replay must
// meet the process's own ranks and the other processes' at once. Every rank is late in turn.
//
// Usage: nccl_graph_meet_program [MiB]   (default 64)
//        nccl_graph_meet_program --procs ID_FILE [MiB [PER]]   (PER: ranks a process, default 1)
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_calls.h"
#include "nccl_id_file.h"

namespace {

constexpr int kRanks = 2;
constexpr int kGpus[kRanks] = {0, 1};
constexpr size_t kGateBytes = size_t{1} << 30;
constexpr int kGateMemsets = 8;
constexpr size_t kDelayBytes = size_t{1} << 30;

struct Job {
  ncclComm_t comm[kRanks];
  cudaStream_t stream[kRanks];
  float* buf[kRanks];
  void* delay[kRanks];
  cudaEvent_t stop[kRanks];
  cudaGraphExec_t exec[kRanks];
  cudaStream_t gate_stream;
  cudaEvent_t gate;
  void* gate_scratch;
  size_t bytes;
};

// The gate, then rank `late`'s delay: every stream waits for the gate.
int open_gate(Job& j, int late) {
  CHECK_CUDA(cudaSetDevice(0));
  for (int i = 0; i < kGateMemsets; ++i) CHECK_CUDA(cudaMemsetAsync(j.gate_scratch, 0, kGateBytes, j.gate_stream));
  CHECK_CUDA(cudaEventRecord(j.gate, j.gate_stream));
  for (int r = 0; r < kRanks; ++r) {
    CHECK_CUDA(cudaSetDevice(kGpus[r]));
    CHECK_CUDA(cudaStreamWaitEvent(j.stream[r], j.gate, 0));
    if (r == late) CHECK_CUDA(cudaMemsetAsync(j.delay[r], 0, kDelayBytes, j.stream[r]));
  }
  return 0;
}

int all_reduce(Job& j) {
  CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r)
    CHECK_NCCL(ncclAllReduce(j.buf[r], j.buf[r], j.bytes / sizeof(float), ncclFloat, ncclSum, j.comm[r],
                             j.stream[r]));
  CHECK_NCCL(ncclGroupEnd());
  return 0;
}

// Each rank's stop event, then every stream synchronized; ms[r]: the gate to rank r's stop.
int finish(Job& j, float* ms) {
  for (int r = 0; r < kRanks; ++r) {
    CHECK_CUDA(cudaSetDevice(kGpus[r]));
    CHECK_CUDA(cudaEventRecord(j.stop[r], j.stream[r]));
  }
  for (int r = 0; r < kRanks; ++r) {
    CHECK_CUDA(cudaSetDevice(kGpus[r]));
    CHECK_CUDA(cudaStreamSynchronize(j.stream[r]));
    CHECK_CUDA(cudaEventElapsedTime(&ms[r], j.gate, j.stop[r]));
  }
  return 0;
}

bool same(float a, float b) { return std::fabs(a - b) <= 1e-5f * std::fabs(b) + 1e-6f; }

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : -1;
}

// One process of the job (--procs): see the top of the file. It holds `per` ranks, its local
// ranks' GPUs LOCAL_RANK * per onward; rank = RANK * per + local index.
struct Rank {
  int rank = 0;
  int gpu = 0;
  ncclComm_t comm;
  cudaStream_t stream;
  float* buf;
  float* align;
  void* delay;
  cudaEvent_t start, stop;
  cudaGraphExec_t exec;
  size_t bytes;
};

constexpr size_t kAlignBytes = size_t{256} << 20;  // its collective outlasts the host's record behind it

// One collective on every rank of the process, as one NCCL group.
template <typename Fn>
int grouped(std::vector<Rank>& ks, Fn fn) {
  CHECK_NCCL(ncclGroupStart());
  for (Rank& k : ks) {
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_NCCL(fn(k));
  }
  CHECK_NCCL(ncclGroupEnd());
  return 0;
}

int reduce_buf(std::vector<Rank>& ks) {
  return grouped(ks, [](Rank& k) {
    return ncclAllReduce(k.buf, k.buf, k.bytes / sizeof(float), ncclFloat, ncclSum, k.comm, k.stream);
  });
}

// The step: the aligning all-reduce, the start events, rank `late`'s delay, then the all-reduce
// (replayed when `graph`), the stop events; ms[i]: local rank i's start to stop.
int process_step(std::vector<Rank>& ks, int late, bool graph, std::vector<float>& ms) {
  if (grouped(ks, [](Rank& k) {
        return ncclAllReduce(k.align, k.align, kAlignBytes / sizeof(float), ncclFloat, ncclSum, k.comm, k.stream);
      }) != 0)
    return 1;
  for (Rank& k : ks) {
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_CUDA(cudaEventRecord(k.start, k.stream));
    if (k.rank == late) CHECK_CUDA(cudaMemsetAsync(k.delay, 0, kDelayBytes, k.stream));
  }
  if (graph) {
    for (Rank& k : ks) {
      CHECK_CUDA(cudaSetDevice(k.gpu));
      CHECK_CUDA(cudaGraphLaunch(k.exec, k.stream));
    }
  } else if (reduce_buf(ks) != 0) {
    return 1;
  }
  for (Rank& k : ks) {
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_CUDA(cudaEventRecord(k.stop, k.stream));
  }
  ms.assign(ks.size(), 0.f);
  for (size_t i = 0; i < ks.size(); ++i) {
    CHECK_CUDA(cudaSetDevice(ks[i].gpu));
    CHECK_CUDA(cudaStreamSynchronize(ks[i].stream));
    CHECK_CUDA(cudaEventElapsedTime(&ms[i], ks[i].start, ks[i].stop));
  }
  return 0;
}

int run_as_process(const std::string& id_file, size_t mib, int per) {
  const int proc = env_int("RANK"), procs = env_int("WORLD_SIZE"), local = env_int("LOCAL_RANK");
  if (procs * per < 2 || proc < 0 || proc >= procs || local < 0 || per < 1) {
    std::printf("FAIL RANK, WORLD_SIZE and LOCAL_RANK must be set, and the job have two ranks or more\n");
    return 1;
  }
  const int world = procs * per;
  std::vector<Rank> ks(per);
  for (int i = 0; i < per; ++i) {
    ks[i].rank = proc * per + i;
    ks[i].gpu = local * per + i;
    ks[i].bytes = mib << 20;
    CHECK_CUDA(cudaSetDevice(ks[i].gpu));
    CHECK_CUDA(cudaFree(nullptr));
  }
  ncclUniqueId id;
  if (!share_nccl_id(id_file, proc, &id)) return 1;
  CHECK_NCCL(ncclGroupStart());
  for (Rank& k : ks) {
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_NCCL(ncclCommInitRank(&k.comm, world, id, k.rank));
  }
  CHECK_NCCL(ncclGroupEnd());
  for (Rank& k : ks) {
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_CUDA(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&k.buf, k.bytes));
    CHECK_CUDA(cudaMalloc(&k.align, kAlignBytes));
    CHECK_CUDA(cudaMalloc(&k.delay, kDelayBytes));
    CHECK_CUDA(cudaEventCreate(&k.start));
    CHECK_CUDA(cudaEventCreate(&k.stop));
  }
  // Connection setup, then each rank's all-reduce captured into a graph of its stream.
  std::vector<float> ms;
  if (process_step(ks, -1, false, ms) != 0) return 1;
  for (Rank& k : ks) {
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_CUDA(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeThreadLocal));
  }
  if (reduce_buf(ks) != 0) return 1;
  for (Rank& k : ks) {
    cudaGraph_t g;
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_CUDA(cudaStreamEndCapture(k.stream, &g));
    CHECK_CUDA(cudaGraphInstantiate(&k.exec, g, 0));
    CHECK_CUDA(cudaGraphDestroy(g));
  }

  // Every rank late in turn, the last first (a rank of another process, launched last).
  int failures = 0;
  for (int late = world - 1; late >= 0; --late) {
    std::vector<float> direct;
    if (process_step(ks, late, false, direct) != 0) return 1;
    for (size_t i = 0; i < ks.size(); ++i)
      std::printf("rank %d late rank %d: direct %.6f ms\n", ks[i].rank, late, direct[i]);
    for (int replay = 0; replay < 2; ++replay) {
      std::vector<float> graph;
      if (process_step(ks, late, true, graph) != 0) return 1;
      for (size_t i = 0; i < ks.size(); ++i) {
        std::printf("rank %d late rank %d: graph replay %d %.6f ms\n", ks[i].rank, late, replay, graph[i]);
        if (!same(graph[i], direct[i])) {
          std::printf("FAIL rank %d, late rank %d, replay %d: the replay ends %.6f ms after the step's start, the "
                      "direct launch %.6f ms\n", ks[i].rank, late, replay, graph[i], direct[i]);
          ++failures;
        }
      }
    }
    if (failures == 0)
      for (const Rank& k : ks) std::printf("ok   rank %d late rank %d\n", k.rank, late);
  }
  for (Rank& k : ks) {
    CHECK_CUDA(cudaSetDevice(k.gpu));
    CHECK_CUDA(cudaGraphExecDestroy(k.exec));
    CHECK_NCCL(ncclCommDestroy(k.comm));
    std::printf("ok   rank %d ncclCommDestroy\n", k.rank);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 2 && std::strcmp(argv[1], "--procs") == 0)
    return run_as_process(argv[2], argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 64, argc > 4 ? std::atoi(argv[4]) : 1);
  Job j{};
  j.bytes = static_cast<size_t>(argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64) << 20;
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  if (devices < kRanks) {
    std::printf("FAIL %d devices needed, %d seen\n", kRanks, devices);
    return 1;
  }
  CHECK_NCCL(ncclCommInitAll(j.comm, kRanks, kGpus));
  for (int r = 0; r < kRanks; ++r) {
    CHECK_CUDA(cudaSetDevice(kGpus[r]));
    CHECK_CUDA(cudaStreamCreateWithFlags(&j.stream[r], cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&j.buf[r], j.bytes));
    CHECK_CUDA(cudaMalloc(&j.delay[r], kDelayBytes));
    CHECK_CUDA(cudaEventCreate(&j.stop[r]));
  }
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaStreamCreateWithFlags(&j.gate_stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreate(&j.gate));
  CHECK_CUDA(cudaMalloc(&j.gate_scratch, kGateBytes));

  // Connection setup, then each rank's all-reduce captured into a graph of its stream.
  float ms[kRanks];
  if (open_gate(j, -1) != 0 || all_reduce(j) != 0 || finish(j, ms) != 0) return 1;
  for (int r = 0; r < kRanks; ++r) {
    CHECK_CUDA(cudaSetDevice(kGpus[r]));
    CHECK_CUDA(cudaStreamBeginCapture(j.stream[r], cudaStreamCaptureModeThreadLocal));
  }
  if (all_reduce(j) != 0) return 1;
  for (int r = 0; r < kRanks; ++r) {
    cudaGraph_t graph;
    CHECK_CUDA(cudaSetDevice(kGpus[r]));
    CHECK_CUDA(cudaStreamEndCapture(j.stream[r], &graph));
    CHECK_CUDA(cudaGraphInstantiate(&j.exec[r], graph, 0));
    CHECK_CUDA(cudaGraphDestroy(graph));
  }

  int failures = 0;
  for (int late = 1; late >= 0; --late) {
    float direct[kRanks];
    if (open_gate(j, late) != 0 || all_reduce(j) != 0 || finish(j, direct) != 0) return 1;
    std::printf("late rank %d: direct: rank 0 %.6f ms, rank 1 %.6f ms\n", late, direct[0], direct[1]);
    for (int replay = 0; replay < 2; ++replay) {
      float graph[kRanks];
      if (open_gate(j, late) != 0) return 1;
      for (int r = 0; r < kRanks; ++r) {
        CHECK_CUDA(cudaSetDevice(kGpus[r]));
        CHECK_CUDA(cudaGraphLaunch(j.exec[r], j.stream[r]));
      }
      if (finish(j, graph) != 0) return 1;
      std::printf("late rank %d: graph replay %d: rank 0 %.6f ms, rank 1 %.6f ms\n", late, replay, graph[0],
                  graph[1]);
      for (int r = 0; r < kRanks; ++r)
        if (!same(graph[r], direct[r])) {
          std::printf("FAIL late rank %d, replay %d: rank %d's replay ends %.6f ms after the gate, its direct "
                      "launch %.6f ms\n", late, replay, r, graph[r], direct[r]);
          ++failures;
        }
    }
    if (failures == 0) std::printf("ok   late rank %d\n", late);
  }
  for (int r = 0; r < kRanks; ++r) {
    CHECK_CUDA(cudaSetDevice(kGpus[r]));
    CHECK_CUDA(cudaGraphExecDestroy(j.exec[r]));
    CHECK_NCCL(ncclCommDestroy(j.comm[r]));
  }
  std::printf("ok   ncclCommDestroy\n");
  return failures == 0 ? 0 : 1;
}
