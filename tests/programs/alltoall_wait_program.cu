// An all-to-all made of sends and receives (as PyTorch's all_to_all_single makes it: a send and a
// receive to every rank, its own included, in one group) on the sim backend, where rank 0 first
// computes (a run of `busy` kernels) and the others call at once (issue 23): no rank's kernel may
// start before rank 0's arrives, as each needs rank 0's share.
//
// Usage: alltoall_wait_program MODE RANKS   (1 MiB to each rank)
//   threads: one process, a thread per rank (ncclCommInitAll by the main thread)
//   group:   one thread driving every rank in one ncclGroupStart/End
//   procs:   this process is rank RANK of WORLD_SIZE=RANKS on device RANK (launch_ranks.py; the
//            ncclUniqueId passes through NCCL_ID_FILE)
// Every rank first runs one all-to-all of 1 KiB each way, waited for (NCCL connects the ranks
// then). Prints "ok   alltoall" per process at the end; exits non-zero on a failed call. The timing
// is checked on the timeline by run_alltoall_wait.py.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl_id_file.h"

#define CHECK_CUDA(x)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("FAIL %s -> %s\n", #x, cudaGetErrorName(e_));                             \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)
#define CHECK_NCCL(x)                                                                       \
  do {                                                                                      \
    ncclResult_t r_ = (x);                                                                  \
    if (r_ != ncclSuccess) {                                                                \
      std::printf("FAIL %s -> %s\n", #x, ncclGetErrorString(r_));                           \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

namespace {

constexpr int kBusyLaunches = 1000;  // rank 0's computation: long next to the host's calls
constexpr size_t kWork = size_t{1} << 28;  // floats it computes on (1 GiB, never touched on the host)
constexpr size_t kCount = (1u << 20) / sizeof(float);  // floats to each rank

__global__ void busy(float* x, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    x[i] = x[i] * 1.0001f + 0.5f;
}

struct Rank {
  int rank = 0, nranks = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float *send = nullptr, *recv = nullptr, *work = nullptr;
};

int setup(Rank& r) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  CHECK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaMalloc(&r.send, kCount * r.nranks * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&r.recv, kCount * r.nranks * sizeof(float)));
  if (r.rank == 0) CHECK_CUDA(cudaMalloc(&r.work, kWork * sizeof(float)));
  return 0;
}

// One rank's part of an all-to-all of `count` floats each way (inside a group the caller opens
// when one thread drives several ranks).
int all_to_all(Rank& r, size_t count) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  CHECK_NCCL(ncclGroupStart());
  for (int p = 0; p < r.nranks; ++p) {
    CHECK_NCCL(ncclSend(r.send + p * kCount, count, ncclFloat, p, r.comm, r.stream));
    CHECK_NCCL(ncclRecv(r.recv + p * kCount, count, ncclFloat, p, r.comm, r.stream));
  }
  CHECK_NCCL(ncclGroupEnd());
  return 0;
}

int compute(Rank& r) {
  if (r.rank != 0) return 0;
  CHECK_CUDA(cudaSetDevice(r.rank));
  for (int i = 0; i < kBusyLaunches; ++i) busy<<<1024, 256, 0, r.stream>>>(r.work, kWork);
  CHECK_CUDA(cudaGetLastError());
  return 0;
}

int finish(Rank& r) {
  CHECK_CUDA(cudaSetDevice(r.rank));
  CHECK_CUDA(cudaStreamSynchronize(r.stream));
  return 0;
}

int run_rank(Rank& r) {
  if (setup(r) != 0 || all_to_all(r, 256) != 0 || finish(r) != 0) return 1;
  if (compute(r) != 0 || all_to_all(r, kCount) != 0) return 1;
  return finish(r);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int n = argc > 2 ? std::atoi(argv[2]) : 4;
  if (mode == "procs") {
    const char* id_file = std::getenv("NCCL_ID_FILE");
    const int rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "-1");
    if (id_file == nullptr || rank < 0 || rank >= n) {
      std::printf("FAIL procs mode needs NCCL_ID_FILE and RANK below %d\n", n);
      return 1;
    }
    ncclUniqueId id;
    if (!share_nccl_id(id_file, rank, &id)) return 1;
    Rank r;
    r.rank = rank;
    r.nranks = n;
    CHECK_CUDA(cudaSetDevice(rank));
    CHECK_NCCL(ncclCommInitRank(&r.comm, n, id, rank));
    if (run_rank(r) != 0) return 1;
    CHECK_NCCL(ncclCommDestroy(r.comm));
    std::printf("ok   alltoall\n");
    return 0;
  }
  std::vector<Rank> ranks(n);
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  CHECK_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  for (int i = 0; i < n; ++i) {
    ranks[i].rank = i;
    ranks[i].nranks = n;
    ranks[i].comm = comms[i];
  }
  if (mode == "threads") {
    std::vector<int> rc(n, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { rc[i] = run_rank(ranks[i]); });
    for (auto& t : threads) t.join();
    for (int v : rc)
      if (v != 0) return 1;
  } else if (mode == "group") {
    for (Rank& r : ranks)
      if (setup(r) != 0) return 1;
    for (size_t count : {size_t{256}, kCount}) {
      if (count == kCount && compute(ranks[0]) != 0) return 1;
      CHECK_NCCL(ncclGroupStart());
      for (Rank& r : ranks)
        if (all_to_all(r, count) != 0) return 1;
      CHECK_NCCL(ncclGroupEnd());
      for (Rank& r : ranks)
        if (finish(r) != 0) return 1;
    }
  } else {
    std::printf("FAIL unknown mode '%s' (threads, group or procs)\n", mode.c_str());
    return 1;
  }
  for (ncclComm_t c : comms) CHECK_NCCL(ncclCommDestroy(c));
  std::printf("ok   alltoall\n");
  return 0;
}
