// Two pipeline stages on the sim backend (issue 23): stage 0 computes (a run of `busy` kernels),
// then sends its activations to stage 1, which posts its receive at once. The receive must end
// no earlier than the send's data could arrive: after stage 0's computation plus the transfer.
//
// Both stages first exchange 1 KiB (NCCL connects the pair then), and wait for it.
//
// Usage: p2p_pipeline_program MODE [MiB]   (default 4 MiB)
//   threads: one process, two threads, each driving one rank (ncclCommInitAll by the main thread)
//   group:   one thread driving both ranks: the send and the receive in one ncclGroupStart/End
//   procs:   this process is rank RANK of WORLD_SIZE=2 on device RANK (launch_ranks.py; the
//            ncclUniqueId passes through NCCL_ID_FILE)
//   serial:  one thread driving both ranks without a group: the receive is launched first, then
//            the send (NCCL connected the pair in the warm-up's group)
//   crossed: two threads, each sending 1 MiB to the other and then receiving as much, each call
//            alone: both send first, which real NCCL completes below its buffer size (no
//            computation; prints "rank <r> crossed <ms> ms")
//   chain-threads, chain-procs: four stages on ONE communicator of four ranks (as four threads
//            of this process, or as four processes like procs with WORLD_SIZE=4): stage 0
//            computes, then sends to stage 1; stage r receives from r-1, then sends to r+1, each
//            call alone (the warm-up likewise, along the chain)
//   chain-group: the four stages driven by one thread, every stage's calls in one
//            ncclGroupStart/End (a stage's receive and send then run together, in one kernel)
// Prints "rank <r> busy <ms> ms" (the computing stage's computation by CUDA events), "rank <r> p2p
// <ms> ms" (from an event recorded right before the send/receive to one right after it), then
// "ok   pipeline" once every rank synchronized; exits non-zero on a failed call. The timing is
// checked on the timeline by run_p2p_pipeline.py.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "check_calls.h"
#include "nccl_id_file.h"

namespace {

constexpr int kBusyLaunches = 1000;  // stage 0's computation: long next to the transfer and the host's calls

__global__ void busy(float* x, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    x[i] = x[i] * 1.0001f + 0.5f;
}

struct Rank {
  int rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buf = nullptr;
  float* work = nullptr;
  cudaEvent_t before = nullptr, after = nullptr, busy_done = nullptr;
};

size_t g_count = 0;  // floats sent (set once in main, before any thread starts)
int g_busy = 0;      // the rank that computes before its part of the exchange (likewise)
int g_stages = 2;    // ranks of the communicator (likewise): 4 in the chain modes
constexpr size_t kWork = size_t{1} << 28;  // floats stage 0 computes on (1 GiB, never touched on the host)

int setup(Rank& r) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  CHECK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaMalloc(&r.buf, g_count * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&r.work, kWork * sizeof(float)));
  CHECK_CUDA(cudaEventCreate(&r.before));
  CHECK_CUDA(cudaEventCreate(&r.after));
  CHECK_CUDA(cudaEventCreate(&r.busy_done));
  return 0;
}

// The computing stage's work, on its own (before its NCCL call of the exchange).
int compute(Rank& r) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  CHECK_CUDA(cudaEventRecord(r.before, r.stream));
  for (int i = 0; i < kBusyLaunches; ++i) busy<<<1024, 256, 0, r.stream>>>(r.work, kWork);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(r.busy_done, r.stream));
  return 0;
}

int mark(Rank& r, cudaEvent_t e) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  CHECK_CUDA(cudaEventRecord(e, r.stream));
  return 0;
}

int transfer(Rank& r, size_t count = g_count) {  // one rank's send (0) or receive (1)
  CHECK_CUDA(cudaSetDevice(r.rank));
  if (r.rank == 0) CHECK_NCCL(ncclSend(r.buf, count, ncclFloat, 1, r.comm, r.stream));
  else CHECK_NCCL(ncclRecv(r.buf, count, ncclFloat, 0, r.comm, r.stream));
  return 0;
}

// A first, small exchange, waited for: NCCL connects the pair on the host at its first send/recv,
// which would otherwise stand in the timed exchange's way.
int warm_up(Rank& r) {
  if (transfer(r, 256) != 0) return 1;
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
  return 0;
}

int report(Rank& r) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
  float ms = 0;
  if (r.rank == g_busy) {
    CHECK_CUDA(cudaEventElapsedTime(&ms, r.before, r.busy_done));
    std::printf("rank %d busy %.6f ms\n", r.rank, ms);
    CHECK_CUDA(cudaEventElapsedTime(&ms, r.busy_done, r.after));
  } else {
    CHECK_CUDA(cudaEventElapsedTime(&ms, r.before, r.after));
  }
  std::printf("rank %d p2p %.6f ms\n", r.rank, ms);
  return 0;
}

// Both ranks send first, then receive (threads).
int crossed(Rank& r) {
  constexpr size_t kCount = (1u << 20) / sizeof(float);
  if (setup(r) != 0 || warm_up(r) != 0 || mark(r, r.before) != 0) return 1;
  CHECK_NCCL(ncclSend(r.buf, kCount, ncclFloat, 1 - r.rank, r.comm, r.stream));
  CHECK_NCCL(ncclRecv(r.buf + kCount, kCount, ncclFloat, 1 - r.rank, r.comm, r.stream));
  if (mark(r, r.after) != 0) return 1;
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, r.before, r.after));
  std::printf("rank %d crossed %.6f ms\n", r.rank, ms);
  return 0;
}

// Stage r of the chain: receives from r-1 (but stage 0), then sends to r+1 (but the last stage),
// each call alone.
int pass_on(Rank& r, size_t count) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  if (r.rank > 0) CHECK_NCCL(ncclRecv(r.buf, count, ncclFloat, r.rank - 1, r.comm, r.stream));
  if (r.rank + 1 < g_stages) CHECK_NCCL(ncclSend(r.buf, count, ncclFloat, r.rank + 1, r.comm, r.stream));
  return 0;
}

int run_chain(Rank& r) {
  if (setup(r) != 0 || pass_on(r, 256) != 0) return 1;
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
  if (r.rank == g_busy && compute(r) != 0) return 1;
  if (r.rank != g_busy && mark(r, r.before) != 0) return 1;
  if (pass_on(r, g_count) != 0 || mark(r, r.after) != 0) return 1;
  return report(r);
}

int run_rank(Rank& r) {
  if (setup(r) != 0 || warm_up(r) != 0) return 1;
  if (r.rank == g_busy && compute(r) != 0) return 1;
  if (r.rank != g_busy && mark(r, r.before) != 0) return 1;
  if (transfer(r) != 0 || mark(r, r.after) != 0) return 1;
  return report(r);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  g_count = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4) * (1u << 20) / sizeof(float);
  g_busy = argc > 3 && std::strcmp(argv[3], "late-receiver") == 0 ? 1 : 0;
  const bool chain = mode == "chain-threads" || mode == "chain-procs" || mode == "chain-group";
  if (chain) g_stages = 4;
  if (mode == "procs" || mode == "chain-procs") {
    const char* id_file = std::getenv("NCCL_ID_FILE");
    const int rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "-1");
    if (id_file == nullptr || rank < 0 || rank >= g_stages) {
      std::printf("FAIL procs modes need NCCL_ID_FILE and RANK 0 to %d\n", g_stages - 1);
      return 1;
    }
    ncclUniqueId id;
    if (!share_nccl_id(id_file, rank, &id)) return 1;
    Rank r;
    r.rank = rank;
    CHECK_CUDA(cudaSetDevice(rank));
    CHECK_NCCL(ncclCommInitRank(&r.comm, g_stages, id, rank));
    if ((chain ? run_chain(r) : run_rank(r)) != 0) return 1;
    CHECK_NCCL(ncclCommDestroy(r.comm));
    std::printf("ok   pipeline\n");
    return 0;
  }
  if (mode == "chain-threads" || mode == "chain-group") {
    Rank stages[4];
    ncclComm_t comms[4];
    const int devs[4] = {0, 1, 2, 3};
    CHECK_NCCL(ncclCommInitAll(comms, 4, devs));
    for (int i = 0; i < 4; ++i) {
      stages[i].rank = i;
      stages[i].comm = comms[i];
    }
    if (mode == "chain-group") {
      for (Rank& r : stages)
        if (setup(r) != 0) return 1;
      for (size_t count : {size_t{256}, g_count}) {
        if (count == g_count) {
          if (compute(stages[0]) != 0) return 1;
          for (int i = 1; i < 4; ++i)
            if (mark(stages[i], stages[i].before) != 0) return 1;
        }
        CHECK_NCCL(ncclGroupStart());
        for (Rank& r : stages)
          if (pass_on(r, count) != 0) return 1;
        CHECK_NCCL(ncclGroupEnd());
        if (count == 256)
          for (Rank& r : stages) CHECK_CUDA(cudaStreamSynchronize(r.stream));
      }
      for (Rank& r : stages)
        if (mark(r, r.after) != 0) return 1;
      for (Rank& r : stages)
        if (report(r) != 0) return 1;
    } else {
      int rc[4] = {0, 0, 0, 0};
      std::thread threads[4];
      for (int i = 0; i < 4; ++i) threads[i] = std::thread([&, i] { rc[i] = run_chain(stages[i]); });
      for (std::thread& t : threads) t.join();
      for (int i = 0; i < 4; ++i)
        if (rc[i] != 0) return 1;
    }
    for (ncclComm_t c : comms) CHECK_NCCL(ncclCommDestroy(c));
    std::printf("ok   pipeline\n");
    return 0;
  }
  Rank ranks[2];
  ncclComm_t comms[2];
  const int devs[2] = {0, 1};
  CHECK_NCCL(ncclCommInitAll(comms, 2, devs));
  for (int i = 0; i < 2; ++i) {
    ranks[i].rank = i;
    ranks[i].comm = comms[i];
  }
  if (mode == "threads" || mode == "crossed") {
    if (mode == "crossed") g_count = std::max<size_t>(g_count, 2 * (1u << 20) / sizeof(float));
    int (*run)(Rank&) = mode == "crossed" ? &crossed : &run_rank;
    int rc[2] = {0, 0};
    std::thread t0([&] { rc[0] = run(ranks[0]); });
    std::thread t1([&] { rc[1] = run(ranks[1]); });
    t0.join();
    t1.join();
    if (rc[0] != 0 || rc[1] != 0) return 1;
  } else if (mode == "group" || mode == "serial") {
    for (Rank& r : ranks)
      if (setup(r) != 0) return 1;
    CHECK_NCCL(ncclGroupStart());
    for (Rank& r : ranks)
      if (transfer(r, 256) != 0) return 1;
    CHECK_NCCL(ncclGroupEnd());
    for (Rank& r : ranks) CHECK_CUDA(cudaStreamSynchronize(r.stream));
    if (compute(ranks[g_busy]) != 0 || mark(ranks[1 - g_busy], ranks[1 - g_busy].before) != 0) return 1;
    if (mode == "serial") {
      if (transfer(ranks[1]) != 0 || transfer(ranks[0]) != 0) return 1;  // the receive first, each alone
    } else {
      CHECK_NCCL(ncclGroupStart());
      for (Rank& r : ranks)
        if (transfer(r) != 0) return 1;
      CHECK_NCCL(ncclGroupEnd());
    }
    for (Rank& r : ranks)
      if (mark(r, r.after) != 0) return 1;
    for (Rank& r : ranks)
      if (report(r) != 0) return 1;
  } else {
    std::printf("FAIL unknown mode '%s' (threads, group, procs, serial, crossed, chain-threads or chain-procs)\n", mode.c_str());
    return 1;
  }
  for (ncclComm_t c : comms) CHECK_NCCL(ncclCommDestroy(c));
  std::printf("ok   pipeline\n");
  return 0;
}
