// Graph replays of a captured all-reduce meet the other ranks' replays, on the sim backend (issue
// 23; vgpu/sim/exec/nccl_graph_meet.h): NCCL from the toolkit, one process driving two GPUs
// (ncclCommInitAll, one thread launching both ranks), rank L late by a memset on its stream.
//
// Each step starts at one gate (every stream waits for an event after a 1 GiB memset on GPU 0's
// gate stream, so that every launch of the step is issued before anything starts, and the host
// time between launches counts for nothing); then rank L's stream runs a DELAY memset, then the
// all-reduce of BYTES on both ranks, then each rank records its stop event. Each rank's time is the
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
// Usage: nccl_graph_meet_program [MiB]   (default 64)
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "check_calls.h"

namespace {

constexpr int kRanks = 2;
constexpr int kGpus[kRanks] = {0, 1};
constexpr size_t kGateBytes = size_t{1} << 30;
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
  CHECK_CUDA(cudaMemsetAsync(j.gate_scratch, 0, kGateBytes, j.gate_stream));
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

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
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
