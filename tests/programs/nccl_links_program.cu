// Collectives that share the fabric's links, on the sim backend (issue 23): NCCL from the
// toolkit, one process driving the four GPUs of two virtual nodes of two (one NIC per GPU).
//
// Four communicators: A and B both over GPUs 0 and 2 (one on each node, so their ring crosses
// both GPUs' NICs), C over GPUs 1 and 3 (the other two NICs), D over GPUs 0 and 1 (NVLink, inside
// node 0). Each rank of each communicator has its own stream, so that collectives of different
// communicators may run at the same time.
// After a small all-reduce on each (connection setup), in this order, each step's streams
// synchronized before the next:
//   alone     A all-reduces BYTES on its own
//   shared    A and B all-reduce BYTES at once (one group): they cross the same NICs
//   disjoint  A and C all-reduce BYTES at once: no link in common
//   copy      GPU 0 copies 4 x BYTES to GPU 1 alone (cudaMemcpyPeerAsync with peer access, on a
//             stream of its own), then again while D all-reduces BYTES (the copy issued just
//             before the group): the copy crosses D's NVLinks in D's direction 0 -> 1, and lasts
//             long enough that D's transfers run beside it from start to end, however much host
//             time lies between the copy's issue and D's start
//   p2p       A's rank 0 (GPU 0) sends BYTES to its rank 1 (GPU 2) alone (ncclSend / ncclRecv in one
//             group), then again while B all-reduces BYTES (one group): the message crosses the
//             NICs B's transfer 0 -> 2 crosses
// Prints "<step> <comm> <ms> ms" per collective (CUDA events on its rank 0's stream) and
// "copy alone <ms> ms", "copy beside D <ms> ms" for the copies; run_nccl_links.py reads the exact
// times, the copies' included, from the timeline. (A copy between GPUs of two nodes is staged
// through the host, off the fabric: no peer access across nodes.)
//
// Usage: nccl_links_program [MiB [cross]]   (default 256)
//
// cross (issue 23, sharing across rank processes; two virtual nodes of two GPUs, one NIC a node):
// communicators A over GPUs 0, 1, 2, 3 and B over GPUs 0, 2, 1, 3 in rank order, so that B's
// ranks on GPUs 0 and 1 both send across node 0's NIC, beside A's rank on GPU 1. After a small
// all-reduce on each, "alone" A, "alone" B, then "shared" (A and B at once, one group), then a
// message of BYTES on A from GPU 1 to GPU 3 alone and beside B's all-reduce (one group: the
// message, B's 1 -> 3 and B's 0 -> 2 of another process all cross node 0's NIC). As one
// process driving the four GPUs (NCCL_ID_FILE unset), or as torchrun's ranks (NCCL_ID_FILE set,
// RANK and WORLD_SIZE = 4: process r drives GPU r, rank r of A, rank 0, 2, 1, 3 -> 0, 1, 2, 3 of
// B): the two runs must read the same times (run_nccl_links_cross.py).
//
// As torchrun's ranks instead (NCCL_ID_FILE set; RANK and WORLD_SIZE = 2 from launch_ranks.py; two
// virtual nodes of one GPU): process r drives GPU r, and is rank r of A and of B (their
// ncclUniqueIds through NCCL_ID_FILE.A and .B). After a small all-reduce on each, "alone" (A) and
// "shared" (A and B at once, one group), then "p2p": process 0 sends BYTES to process 1 on A,
// alone and beside B's all-reduce (one group); each line prefixed "proc <r> ".
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check_calls.h"
#include "nccl_id_file.h"

namespace {

struct Comm {
  const char* name;
  int devices[2];
  ncclComm_t comm[2];
  cudaStream_t stream[2];
  float* buf[2];
  cudaEvent_t start, stop;  // on rank 0's stream
};

int setup(Comm& c, size_t bytes) {
  CHECK_NCCL(ncclCommInitAll(c.comm, 2, c.devices));
  for (int i = 0; i < 2; ++i) {
    CHECK_CUDA(cudaSetDevice(c.devices[i]));
    CHECK_CUDA(cudaStreamCreate(&c.stream[i]));
    CHECK_CUDA(cudaMalloc(&c.buf[i], bytes));
  }
  CHECK_CUDA(cudaSetDevice(c.devices[0]));
  CHECK_CUDA(cudaEventCreate(&c.start));
  CHECK_CUDA(cudaEventCreate(&c.stop));
  return 0;
}

// Every communicator of `comms` all-reduces `bytes` in one group, each timed on its rank 0's
// stream; `before` runs after the start events and before the group (the copy's issue).
template <class Before>
int all_reduce(std::vector<Comm*> comms, size_t bytes, const char* step, Before before) {
  for (Comm* c : comms) {
    CHECK_CUDA(cudaSetDevice(c->devices[0]));
    CHECK_CUDA(cudaEventRecord(c->start, c->stream[0]));
  }
  if (before() != 0) return 1;
  CHECK_NCCL(ncclGroupStart());
  for (Comm* c : comms)
    for (int i = 0; i < 2; ++i)
      CHECK_NCCL(ncclAllReduce(c->buf[i], c->buf[i], bytes / sizeof(float), ncclFloat, ncclSum, c->comm[i],
                               c->stream[i]));
  CHECK_NCCL(ncclGroupEnd());
  for (Comm* c : comms) {
    CHECK_CUDA(cudaSetDevice(c->devices[0]));
    CHECK_CUDA(cudaEventRecord(c->stop, c->stream[0]));
  }
  for (Comm* c : comms)
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaSetDevice(c->devices[i]));
      CHECK_CUDA(cudaStreamSynchronize(c->stream[i]));
    }
  if (step != nullptr)
    for (Comm* c : comms) {
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, c->start, c->stop));
      std::printf("%s %s %.4f ms\n", step, c->name, ms);
    }
  return 0;
}

}  // namespace

// One rank per process: communicators A and B over the job's two processes.
int one_rank_per_process(const char* id_file, size_t bytes) {
  int rank = 0;
  std::string tag;
  if (!rank_of_two_processes(&rank, &tag)) return 1;
  const int world = 2;
  CHECK_CUDA(cudaSetDevice(rank));
  ncclComm_t comm[2];
  cudaStream_t stream[2];
  float* buf[2];
  for (int c = 0; c < 2; ++c) {
    ncclUniqueId id;
    if (!share_nccl_id(std::string(id_file) + (c == 0 ? ".A" : ".B"), rank, &id)) return 1;
    CHECK_NCCL(ncclCommInitRank(&comm[c], world, id, rank));
    CHECK_CUDA(cudaStreamCreate(&stream[c]));
    CHECK_CUDA(cudaMalloc(&buf[c], bytes));
  }
  auto all_reduce = [&](std::vector<int> which, size_t n) {
    CHECK_NCCL(ncclGroupStart());
    for (int c : which)
      CHECK_NCCL(ncclAllReduce(buf[c], buf[c], n / sizeof(float), ncclFloat, ncclSum, comm[c], stream[c]));
    CHECK_NCCL(ncclGroupEnd());
    for (int c : which) CHECK_CUDA(cudaStreamSynchronize(stream[c]));
    return 0;
  };
  for (int c = 0; c < 2; ++c)  // connection setup, one communicator at a time
    if (all_reduce({c}, 1 << 20) != 0) return 1;
  if (all_reduce({0}, bytes) != 0 || all_reduce({0, 1}, bytes) != 0) return 1;
  for (bool beside : {false, true}) {
    CHECK_NCCL(ncclGroupStart());
    if (rank == 0)
      CHECK_NCCL(ncclSend(buf[0], bytes / sizeof(float), ncclFloat, 1, comm[0], stream[0]));
    else
      CHECK_NCCL(ncclRecv(buf[0], bytes / sizeof(float), ncclFloat, 0, comm[0], stream[0]));
    if (beside) CHECK_NCCL(ncclAllReduce(buf[1], buf[1], bytes / sizeof(float), ncclFloat, ncclSum, comm[1], stream[1]));
    CHECK_NCCL(ncclGroupEnd());
    for (int c = 0; c < 2; ++c) CHECK_CUDA(cudaStreamSynchronize(stream[c]));
  }
  for (int c = 0; c < 2; ++c) CHECK_NCCL(ncclCommDestroy(comm[c]));
  std::printf("%sok   ncclCommDestroy\n", tag.c_str());
  return 0;
}

// The cross layout (see the header): A over GPUs 0..3, B over GPUs 0, 2, 1, 3.
constexpr int kCrossA[4] = {0, 1, 2, 3};
constexpr int kCrossB[4] = {0, 2, 1, 3};

// The steps of the cross layout over `n` ranks of A and of B held here (streams and buffers per
// rank), each step's streams synchronized before the next.
int cross_steps(int n, ncclComm_t* a, ncclComm_t* b, cudaStream_t* sa, cudaStream_t* sb, float** ba, float** bb,
                const int* dev_a, const int* dev_b, const int* rank_a, size_t bytes) {
  // `message`: A's rank 1 (GPU 1) sends BYTES to its rank 3 (GPU 3), across node 0's NIC.
  auto step = [&](bool with_a, bool with_b, size_t count_bytes, bool message = false) {
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < n && message; ++i) {
      if (rank_a[i] == 1) CHECK_NCCL(ncclSend(ba[i], bytes / sizeof(float), ncclFloat, 3, a[i], sa[i]));
      if (rank_a[i] == 3) CHECK_NCCL(ncclRecv(ba[i], bytes / sizeof(float), ncclFloat, 1, a[i], sa[i]));
    }
    for (int i = 0; i < n && with_a; ++i)
      CHECK_NCCL(ncclAllReduce(ba[i], ba[i], count_bytes / sizeof(float), ncclFloat, ncclSum, a[i], sa[i]));
    for (int i = 0; i < n && with_b; ++i)
      CHECK_NCCL(ncclAllReduce(bb[i], bb[i], count_bytes / sizeof(float), ncclFloat, ncclSum, b[i], sb[i]));
    CHECK_NCCL(ncclGroupEnd());
    for (int i = 0; i < n; ++i) {
      CHECK_CUDA(cudaSetDevice(dev_a[i]));
      CHECK_CUDA(cudaStreamSynchronize(sa[i]));
      CHECK_CUDA(cudaSetDevice(dev_b[i]));
      CHECK_CUDA(cudaStreamSynchronize(sb[i]));
    }
    return 0;
  };
  // Connection setup, one communicator at a time; then alone, alone, shared; the message alone,
  // then beside B's all-reduce (one group).
  if (step(true, false, 1 << 20) != 0 || step(false, true, 1 << 20) != 0) return 1;
  if (step(true, false, bytes) != 0 || step(false, true, bytes) != 0 || step(true, true, bytes) != 0) return 1;
  if (step(false, false, bytes, true) != 0 || step(false, true, bytes, true) != 0) return 1;
  for (int i = 0; i < n; ++i) {
    CHECK_NCCL(ncclCommDestroy(a[i]));
    CHECK_NCCL(ncclCommDestroy(b[i]));
  }
  return 0;
}

int cross(size_t bytes) {
  const char* id_file = std::getenv("NCCL_ID_FILE");
  if (id_file == nullptr) {  // one process, four GPUs
    ncclComm_t a[4], b[4];
    cudaStream_t sa[4], sb[4];
    float *ba[4], *bb[4];
    CHECK_NCCL(ncclCommInitAll(a, 4, kCrossA));
    CHECK_NCCL(ncclCommInitAll(b, 4, kCrossB));
    for (int i = 0; i < 4; ++i) {
      CHECK_CUDA(cudaSetDevice(kCrossA[i]));
      CHECK_CUDA(cudaStreamCreate(&sa[i]));
      CHECK_CUDA(cudaMalloc(&ba[i], bytes));
      CHECK_CUDA(cudaSetDevice(kCrossB[i]));
      CHECK_CUDA(cudaStreamCreate(&sb[i]));
      CHECK_CUDA(cudaMalloc(&bb[i], bytes));
    }
    if (cross_steps(4, a, b, sa, sb, ba, bb, kCrossA, kCrossB, kCrossA, bytes) != 0) return 1;
    std::printf("ok   ncclCommDestroy\n");
    return 0;
  }
  const int rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  const int world = std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1");
  const std::string tag = "proc " + std::to_string(rank) + " ";
  if (world != 4 || rank < 0 || rank > 3) {
    std::printf("%sFAIL four processes needed, rank %d of %d\n", tag.c_str(), rank, world);
    return 1;
  }
  int rank_b = 0;
  while (kCrossB[rank_b] != rank) ++rank_b;
  CHECK_CUDA(cudaSetDevice(rank));
  ncclComm_t a, b;
  ncclUniqueId id;
  if (!share_nccl_id(std::string(id_file) + ".A", rank, &id)) return 1;
  CHECK_NCCL(ncclCommInitRank(&a, 4, id, rank));
  if (!share_nccl_id(std::string(id_file) + ".B", rank, &id)) return 1;
  CHECK_NCCL(ncclCommInitRank(&b, 4, id, rank_b));
  cudaStream_t sa, sb;
  float *ba, *bb;
  CHECK_CUDA(cudaStreamCreate(&sa));
  CHECK_CUDA(cudaStreamCreate(&sb));
  CHECK_CUDA(cudaMalloc(&ba, bytes));
  CHECK_CUDA(cudaMalloc(&bb, bytes));
  if (cross_steps(1, &a, &b, &sa, &sb, &ba, &bb, &rank, &rank, &rank, bytes) != 0) return 1;
  std::printf("%sok   ncclCommDestroy\n", tag.c_str());
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const size_t bytes = static_cast<size_t>(argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  if (argc > 2 && std::string(argv[2]) == "cross") return cross(bytes);
  if (const char* id_file = std::getenv("NCCL_ID_FILE")) return one_rank_per_process(id_file, bytes);
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  if (devices < 4) {
    std::printf("FAIL 4 devices needed, %d seen\n", devices);
    return 1;
  }
  Comm a{"A", {0, 2}}, b{"B", {0, 2}}, c{"C", {1, 3}}, d{"D", {0, 1}};
  for (Comm* x : {&a, &b, &c, &d})
    if (setup(*x, bytes) != 0) return 1;
  auto nothing = [] { return 0; };
  for (Comm* x : {&a, &b, &c, &d})  // connection setup, one communicator at a time
    if (all_reduce({x}, 1 << 20, nullptr, nothing) != 0) return 1;

  if (all_reduce({&a}, bytes, "alone", nothing) != 0) return 1;
  if (all_reduce({&a, &b}, bytes, "shared", nothing) != 0) return 1;
  if (all_reduce({&a, &c}, bytes, "disjoint", nothing) != 0) return 1;

  // The copy: GPU 0 to GPU 1 over their NVLinks, on a stream of GPU 0 of its own, timed by its
  // own events.
  float* from = nullptr;
  float* to = nullptr;
  cudaStream_t copy_stream;
  cudaEvent_t copy_start, copy_stop;
  CHECK_CUDA(cudaSetDevice(1));
  const size_t copy_bytes = 4 * bytes;
  CHECK_CUDA(cudaMalloc(&to, copy_bytes));
  CHECK_CUDA(cudaSetDevice(0));
  if (cudaError_t e = cudaDeviceEnablePeerAccess(1, 0); e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
    std::printf("FAIL cudaDeviceEnablePeerAccess(1) -> %s\n", cudaGetErrorName(e));
    return 1;
  }
  (void)cudaGetLastError();
  CHECK_CUDA(cudaMalloc(&from, copy_bytes));
  CHECK_CUDA(cudaStreamCreate(&copy_stream));
  CHECK_CUDA(cudaEventCreate(&copy_start));
  CHECK_CUDA(cudaEventCreate(&copy_stop));
  auto copy = [&] {
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaEventRecord(copy_start, copy_stream));
    CHECK_CUDA(cudaMemcpyPeerAsync(to, 1, from, 0, copy_bytes, copy_stream));
    CHECK_CUDA(cudaEventRecord(copy_stop, copy_stream));
    return 0;
  };
  auto copy_time = [&](const char* step) {
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaStreamSynchronize(copy_stream));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, copy_start, copy_stop));
    std::printf("%s %.4f ms\n", step, ms);
    return 0;
  };
  if (copy() != 0 || copy_time("copy alone") != 0) return 1;
  if (all_reduce({&d}, bytes, "copy", copy) != 0 || copy_time("copy beside D") != 0) return 1;

  // A message on A from GPU 0 to GPU 2, alone and beside B's all-reduce.
  for (bool beside : {false, true}) {
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(a.buf[0], bytes / sizeof(float), ncclFloat, 1, a.comm[0], a.stream[0]));
    CHECK_NCCL(ncclRecv(a.buf[1], bytes / sizeof(float), ncclFloat, 0, a.comm[1], a.stream[1]));
    if (beside)
      for (int i = 0; i < 2; ++i)
        CHECK_NCCL(ncclAllReduce(b.buf[i], b.buf[i], bytes / sizeof(float), ncclFloat, ncclSum, b.comm[i], b.stream[i]));
    CHECK_NCCL(ncclGroupEnd());
    for (Comm* x : {&a, &b})
      for (int i = 0; i < 2; ++i) {
        CHECK_CUDA(cudaSetDevice(x->devices[i]));
        CHECK_CUDA(cudaStreamSynchronize(x->stream[i]));
      }
    std::printf("ok   p2p %s\n", beside ? "beside B" : "alone");
  }

  for (Comm* x : {&a, &b, &c, &d})
    for (int i = 0; i < 2; ++i) CHECK_NCCL(ncclCommDestroy(x->comm[i]));
  std::printf("ok   ncclCommDestroy\n");
  return 0;
}
