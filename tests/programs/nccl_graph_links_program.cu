// Graph-captured collectives that share the fabric's links, on the sim backend (issue 23): NCCL
// from the toolkit, one process driving the four GPUs of two virtual nodes of two (one NIC per
// GPU), as nccl_links_program does.
//
// Two communicators A and B, both over GPUs 0 and 2 (one on each node: their ring crosses both
// GPUs' NICs), each rank with a stream of its own. After a small all-reduce on each (connection
// setup), every step all-reduces BYTES, its streams synchronized before the next step:
//   direct alone    A, launched directly
//   direct shared   A and B at once (one group): their transfers cross the same NICs
//   graph alone     A's all-reduce captured into a graph on each of its streams, replayed
//   graph shared    A's graphs and B's (captured the same way) replayed at once
//   direct p2p      A's rank 0 (GPU 0) sends BYTES to its rank 1 (GPU 2) while B all-reduces (one
//                   group): the message crosses the NICs B's transfer 0 -> 2 crosses
//   graph p2p       the same send and receive captured into a graph on each of A's streams,
//                   replayed with B's graphs
// Every step starts at one gate: each stream waits for an event recorded after a memset on a
// stream of its own on GPU 1 (long enough that every launch of the step is issued before it
// ends), so the ranks of every collective start together, launched directly or replayed, and a
// step's times do not depend on the host time between its launches.
// run_nccl_graph_links.py reads the times from the timeline.
//
// Usage: nccl_graph_links_program [MiB [wide|update]]   (default 256)
//
// update: every graph is cloned, the clone instantiated, and its kernel nodes' parameters read
// back (cuGraphKernelNodeGetParams) and set again on the instantiated graph
// (cuGraphExecKernelNodeSetParams) after the instantiated graph was updated from the captured one
// (cuGraphExecUpdate), before it is replayed.
//
// wide: the two p2p steps' send and receive are ranks 0 and 1 (GPUs 0 and 2) of communicator W of
// four ranks over GPUs 0, 2, 1 and 3 instead of A's (a larger communicator's send/recv names its
// peers only in its tasks, which NCCL starts after the launch), then W's graphs replayed alone
// ("graph p2p alone").
//
// As torchrun's ranks instead (NCCL_ID_FILE set; RANK and WORLD_SIZE = 2 from launch_ranks.py; two
// virtual nodes of one GPU): process r drives GPU r and is rank r of A and of B (their
// ncclUniqueIds through NCCL_ID_FILE.A and .B), its gate a memset on a second stream of its GPU;
// the four all-reduce steps above (no p2p), each line prefixed "proc <r> ".
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check_calls.h"
#include "nccl_id_file.h"

namespace {

constexpr int kGpus[2] = {0, 2};

struct Comm {
  ncclComm_t comm[2];
  cudaStream_t stream[2];
  float* buf[2];
  cudaGraphExec_t exec[2] = {nullptr, nullptr};  // its all-reduce's graphs, or A's send/recv's
};

struct Gate {
  cudaStream_t stream;
  cudaEvent_t done;
  void* scratch;
  size_t bytes;
};

// The gate's memset, then every stream of `comms` waits for it.
// A gate is this many sets of 1 GiB (~2.6 ms on the H100 model): one (0.32 ms) was shorter than
// the host's time for a step's launches on a loaded 2-core machine (a p2p step read 1.5 us apart
// directly and replayed, 2026-11-28).
constexpr int kGateSets = 8;

int open_gate(Gate& g, const std::vector<Comm*>& comms) {
  CHECK_CUDA(cudaSetDevice(1));
  for (int k = 0; k < kGateSets; ++k) CHECK_CUDA(cudaMemsetAsync(g.scratch, 0, g.bytes, g.stream));
  CHECK_CUDA(cudaEventRecord(g.done, g.stream));
  for (Comm* c : comms)
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaSetDevice(kGpus[i]));
      CHECK_CUDA(cudaStreamWaitEvent(c->stream[i], g.done, 0));
    }
  return 0;
}

int synchronize(const std::vector<Comm*>& comms) {
  for (Comm* c : comms)
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaSetDevice(kGpus[i]));
      CHECK_CUDA(cudaStreamSynchronize(c->stream[i]));
    }
  return 0;
}

int all_reduce(const std::vector<Comm*>& comms, size_t bytes) {
  CHECK_NCCL(ncclGroupStart());
  for (Comm* c : comms)
    for (int i = 0; i < 2; ++i)
      CHECK_NCCL(ncclAllReduce(c->buf[i], c->buf[i], bytes / sizeof(float), ncclFloat, ncclSum, c->comm[i],
                               c->stream[i]));
  CHECK_NCCL(ncclGroupEnd());
  return 0;
}

// Rank 0 of `c` sends `bytes` to rank 1 in one group, with `beside`'s all-reduce of as much.
int send_beside(Comm& c, Comm* beside, size_t bytes) {
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(c.buf[0], bytes / sizeof(float), ncclFloat, 1, c.comm[0], c.stream[0]));
  CHECK_NCCL(ncclRecv(c.buf[1], bytes / sizeof(float), ncclFloat, 0, c.comm[1], c.stream[1]));
  if (beside != nullptr)
    for (int i = 0; i < 2; ++i)
      CHECK_NCCL(ncclAllReduce(beside->buf[i], beside->buf[i], bytes / sizeof(float), ncclFloat, ncclSum,
                               beside->comm[i], beside->stream[i]));
  CHECK_NCCL(ncclGroupEnd());
  return 0;
}

// The driver's entry points for a kernel node's parameters (the runtime's own would map the
// function to a host stub of this program's, which NCCL's kernels have none of).
using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
using ExecSetParams = CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*);

// Instantiates `graph` into *exec; with `update`, a clone of it instead, whose kernel node's
// parameters, read back, are then set again on the instantiated graph (an update that changes
// nothing the collective is, as a framework refreshing its nodes' arguments does).
int instantiate(cudaGraph_t graph, cudaGraphExec_t* exec, bool update) {
  if (!update) {
    CHECK_CUDA(cudaGraphInstantiate(exec, graph, 0));
    return 0;
  }
  static GetParams get = nullptr;
  static ExecSetParams set = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (get == nullptr)
    CHECK_CUDA(cudaGetDriverEntryPoint("cuGraphKernelNodeGetParams", reinterpret_cast<void**>(&get),
                                       cudaEnableDefault, &found));
  if (set == nullptr)
    CHECK_CUDA(cudaGetDriverEntryPoint("cuGraphExecKernelNodeSetParams", reinterpret_cast<void**>(&set),
                                       cudaEnableDefault, &found));
  if (get == nullptr || set == nullptr) {
    std::printf("FAIL the driver's kernel node entry points are not there\n");
    return 1;
  }
  cudaGraph_t clone;
  CHECK_CUDA(cudaGraphClone(&clone, graph));
  CHECK_CUDA(cudaGraphInstantiate(exec, clone, 0));
  // The captured graph's own nodes (cuGraphExecUpdate: a graph of the same topology), then the
  // clone's kernel nodes' parameters.
  cudaGraphExecUpdateResultInfo info{};
  CHECK_CUDA(cudaGraphExecUpdate(*exec, graph, &info));
  size_t count = 0;
  CHECK_CUDA(cudaGraphGetNodes(clone, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CHECK_CUDA(cudaGraphGetNodes(clone, nodes.data(), &count));
  int kernels = 0;
  for (cudaGraphNode_t n : nodes) {
    cudaGraphNodeType type;
    CHECK_CUDA(cudaGraphNodeGetType(n, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    CUDA_KERNEL_NODE_PARAMS params{};
    if (CUresult r = get(n, &params); r != CUDA_SUCCESS) {
      std::printf("FAIL cuGraphKernelNodeGetParams: %d\n", static_cast<int>(r));
      return 1;
    }
    if (CUresult r = set(*exec, n, &params); r != CUDA_SUCCESS) {
      std::printf("FAIL cuGraphExecKernelNodeSetParams: %d\n", static_cast<int>(r));
      return 1;
    }
    ++kernels;
  }
  CHECK_CUDA(cudaGraphDestroy(clone));
  if (kernels == 0) {
    std::printf("FAIL no kernel node in the captured graph\n");
    return 1;
  }
  return 0;
}

// One graph a rank of `c` (replacing its graphs): what `launch` launches on its stream, captured.
template <class Launch>
int capture(Comm& c, Launch launch, bool update = false) {
  for (int i = 0; i < 2; ++i) {
    CHECK_CUDA(cudaSetDevice(kGpus[i]));
    if (c.exec[i] != nullptr) CHECK_CUDA(cudaGraphExecDestroy(c.exec[i]));
    CHECK_CUDA(cudaStreamBeginCapture(c.stream[i], cudaStreamCaptureModeThreadLocal));
  }
  if (launch() != 0) return 1;
  for (int i = 0; i < 2; ++i) {
    cudaGraph_t graph;
    CHECK_CUDA(cudaSetDevice(kGpus[i]));
    CHECK_CUDA(cudaStreamEndCapture(c.stream[i], &graph));
    if (instantiate(graph, &c.exec[i], update) != 0) return 1;
    CHECK_CUDA(cudaGraphDestroy(graph));
  }
  return 0;
}

int replay(const std::vector<Comm*>& comms) {
  for (Comm* c : comms)
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaSetDevice(kGpus[i]));
      CHECK_CUDA(cudaGraphLaunch(c->exec[i], c->stream[i]));
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
  cudaGraphExec_t exec[2] = {nullptr, nullptr};
  for (int c = 0; c < 2; ++c) {
    ncclUniqueId id;
    if (!share_nccl_id(std::string(id_file) + (c == 0 ? ".A" : ".B"), rank, &id)) return 1;
    CHECK_NCCL(ncclCommInitRank(&comm[c], world, id, rank));
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream[c], cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&buf[c], bytes));
  }
  cudaStream_t gate;
  cudaEvent_t open;
  void* scratch = nullptr;
  const size_t gate_bytes = size_t{1} << 30;
  CHECK_CUDA(cudaStreamCreateWithFlags(&gate, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreateWithFlags(&open, cudaEventDisableTiming));
  CHECK_CUDA(cudaMalloc(&scratch, gate_bytes));
  auto open_gate = [&](std::vector<int> which) {
    for (int k = 0; k < kGateSets; ++k) CHECK_CUDA(cudaMemsetAsync(scratch, 0, gate_bytes, gate));
    CHECK_CUDA(cudaEventRecord(open, gate));
    for (int c : which) CHECK_CUDA(cudaStreamWaitEvent(stream[c], open, 0));
    return 0;
  };
  auto launch = [&](std::vector<int> which, size_t n) {
    CHECK_NCCL(ncclGroupStart());
    for (int c : which)
      CHECK_NCCL(ncclAllReduce(buf[c], buf[c], n / sizeof(float), ncclFloat, ncclSum, comm[c], stream[c]));
    CHECK_NCCL(ncclGroupEnd());
    return 0;
  };
  auto sync = [&](std::vector<int> which) {
    for (int c : which) CHECK_CUDA(cudaStreamSynchronize(stream[c]));
    return 0;
  };
  for (int c = 0; c < 2; ++c)  // connection setup, one communicator at a time
    if (launch({c}, 1 << 20) != 0 || sync({c}) != 0) return 1;
  if (open_gate({0}) != 0 || launch({0}, bytes) != 0 || sync({0}) != 0) return 1;
  std::printf("%sok   direct alone\n", tag.c_str());
  if (open_gate({0, 1}) != 0 || launch({0, 1}, bytes) != 0 || sync({0, 1}) != 0) return 1;
  std::printf("%sok   direct shared\n", tag.c_str());
  for (int c = 0; c < 2; ++c) {
    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamBeginCapture(stream[c], cudaStreamCaptureModeThreadLocal));
    if (launch({c}, bytes) != 0) return 1;
    CHECK_CUDA(cudaStreamEndCapture(stream[c], &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec[c], graph, 0));
    CHECK_CUDA(cudaGraphDestroy(graph));
  }
  auto replay = [&](std::vector<int> which) {
    for (int c : which) CHECK_CUDA(cudaGraphLaunch(exec[c], stream[c]));
    return 0;
  };
  if (open_gate({0}) != 0 || replay({0}) != 0 || sync({0}) != 0) return 1;
  std::printf("%sok   graph alone\n", tag.c_str());
  if (open_gate({0, 1}) != 0 || replay({0, 1}) != 0 || sync({0, 1}) != 0) return 1;
  std::printf("%sok   graph shared\n", tag.c_str());
  for (int c = 0; c < 2; ++c) {
    CHECK_CUDA(cudaGraphExecDestroy(exec[c]));
    CHECK_NCCL(ncclCommDestroy(comm[c]));
  }
  std::printf("%sok   ncclCommDestroy\n", tag.c_str());
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const size_t bytes = static_cast<size_t>(argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool wide = mode == "wide";
  if (const char* id_file = std::getenv("NCCL_ID_FILE")) return one_rank_per_process(id_file, bytes);
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  if (devices < 4) {
    std::printf("FAIL 4 devices needed, %d seen\n", devices);
    return 1;
  }
  Comm a, b;
  for (Comm* c : {&a, &b}) {
    CHECK_NCCL(ncclCommInitAll(c->comm, 2, kGpus));
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaSetDevice(kGpus[i]));
      CHECK_CUDA(cudaStreamCreateWithFlags(&c->stream[i], cudaStreamNonBlocking));
      CHECK_CUDA(cudaMalloc(&c->buf[i], bytes));
    }
  }
  Gate gate{};
  gate.bytes = size_t{1} << 30;
  CHECK_CUDA(cudaSetDevice(1));
  CHECK_CUDA(cudaStreamCreateWithFlags(&gate.stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreateWithFlags(&gate.done, cudaEventDisableTiming));
  CHECK_CUDA(cudaMalloc(&gate.scratch, gate.bytes));

  for (Comm* c : {&a, &b})  // connection setup, one communicator at a time
    if (all_reduce({c}, 1 << 20) != 0 || synchronize({c}) != 0) return 1;

  if (open_gate(gate, {&a}) != 0 || all_reduce({&a}, bytes) != 0 || synchronize({&a}) != 0) return 1;
  std::printf("ok   direct alone\n");
  if (open_gate(gate, {&a, &b}) != 0 || all_reduce({&a, &b}, bytes) != 0 || synchronize({&a, &b}) != 0) return 1;
  std::printf("ok   direct shared\n");

  const bool update = mode == "update";
  if (capture(a, [&] { return all_reduce({&a}, bytes); }, update) != 0 ||
      capture(b, [&] { return all_reduce({&b}, bytes); }, update) != 0)
    return 1;
  if (open_gate(gate, {&a}) != 0 || replay({&a}) != 0 || synchronize({&a}) != 0) return 1;
  std::printf("ok   graph alone\n");
  if (open_gate(gate, {&a, &b}) != 0 || replay({&a, &b}) != 0 || synchronize({&a, &b}) != 0) return 1;
  std::printf("ok   graph shared\n");

  // The p2p steps' sender and receiver: A's two ranks, or with "wide" ranks 0 and 1 (GPUs 0 and 2)
  // of communicator W of four ranks over GPUs 0, 2, 1 and 3 (its ranks 2 and 3 only join its
  // first all-reduce, which connects it and tells every rank's GPU).
  Comm w;
  ncclComm_t w_rest[2];
  cudaStream_t w_rest_stream[2];
  float* w_rest_buf[2];
  if (wide) {
    const int order[4] = {0, 2, 1, 3};
    ncclComm_t all[4];
    CHECK_NCCL(ncclCommInitAll(all, 4, order));
    for (int i = 0; i < 4; ++i) {
      CHECK_CUDA(cudaSetDevice(order[i]));
      cudaStream_t s;
      float* buf;
      CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      CHECK_CUDA(cudaMalloc(&buf, bytes));
      if (i < 2) {
        w.comm[i] = all[i];
        w.stream[i] = s;
        w.buf[i] = buf;
      } else {
        w_rest[i - 2] = all[i];
        w_rest_stream[i - 2] = s;
        w_rest_buf[i - 2] = buf;
      }
    }
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < 4; ++i)
      CHECK_NCCL(ncclAllReduce(i < 2 ? w.buf[i] : w_rest_buf[i - 2], i < 2 ? w.buf[i] : w_rest_buf[i - 2],
                               (1 << 20) / sizeof(float), ncclFloat, ncclSum, i < 2 ? w.comm[i] : w_rest[i - 2],
                               i < 2 ? w.stream[i] : w_rest_stream[i - 2]));
    CHECK_NCCL(ncclGroupEnd());
    for (int i = 0; i < 2; ++i) CHECK_CUDA(cudaStreamSynchronize(w_rest_stream[i]));
    if (synchronize({&w}) != 0) return 1;
  }
  Comm& p = wide ? w : a;
  // A first message alone (NCCL connects the pair's send/recv channels at its first exchange).
  if (send_beside(p, nullptr, 1 << 20) != 0 || synchronize({&p}) != 0) return 1;
  if (open_gate(gate, {&p, &b}) != 0 || send_beside(p, &b, bytes) != 0 || synchronize({&p, &b}) != 0) return 1;
  std::printf("ok   direct p2p\n");
  if (capture(p, [&] { return send_beside(p, nullptr, bytes); }, update) != 0) return 1;
  if (open_gate(gate, {&p, &b}) != 0 || replay({&p, &b}) != 0 || synchronize({&p, &b}) != 0) return 1;
  std::printf("ok   graph p2p\n");
  if (wide) {
    // Replayed alone: the model's send/recv time.
    if (open_gate(gate, {&p}) != 0 || replay({&p}) != 0 || synchronize({&p}) != 0) return 1;
    std::printf("ok   graph p2p alone\n");
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaSetDevice(kGpus[i]));
      CHECK_CUDA(cudaGraphExecDestroy(w.exec[i]));
      CHECK_NCCL(ncclCommDestroy(w.comm[i]));
      CHECK_NCCL(ncclCommDestroy(w_rest[i]));
    }
  }

  for (Comm* c : {&a, &b})
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaSetDevice(kGpus[i]));
      if (c->exec[i] != nullptr) CHECK_CUDA(cudaGraphExecDestroy(c->exec[i]));
      CHECK_NCCL(ncclCommDestroy(c->comm[i]));
    }
  std::printf("ok   ncclCommDestroy\n");
  return 0;
}
