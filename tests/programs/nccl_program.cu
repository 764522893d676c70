// NCCL, unmodified, on the sim backend: one process drives several virtual GPUs, runs all-reduces
// of several sizes in groups, times each with CUDA events on its first GPU's stream (virtual
// time), and destroys the communicators. It must run to the end: NCCL's proxy threads must not
// wait for kernels that the sim backend never executes.
//
// Usage: nccl_program [ranks] [MiB ...]   (default: every device; 1 and 256 MiB)
// One process (ncclCommInitAll over devices 0..ranks-1), or, with NCCL_ID_FILE set, process RANK
// of WORLD_SIZE (as torchrun or launch_ranks.py set them), each driving `ranks` GPUs: process p
// takes devices p*ranks .. p*ranks+ranks-1 as global ranks of the same numbers, all of one
// communicator (ncclCommInitRank in a group; the ncclUniqueId passes through the file).
// Prints one line per size: "allreduce <bytes> B <ms> ms busbw <GB/s>" (prefixed "proc <p> " in
// the second form), and exits non-zero on any failed call.
// Then the values: an all-reduce, all-gather, broadcast, reduce-scatter and a ring of
// send/recv of small buffers
// (filled per global rank), each followed by a check of every rank's result:
// "ok   values after <Collective>" or "FAIL values after <Collective>: ..." (issue 23: the sim
// backend moves the data of small collectives). Last, an all-reduce of 2 MiB captured into a
// CUDA graph on every rank and replayed three times ("ok   a graph of AllReduce ... replayed");
// with four ranks or more, two-rank communicators split off the world exchange 3 MiB both ways
// twice ("ok   pairs exchanged ..."); then a ring of 20,000 bytes over the world, twice
// ("ok   a ring of 20000 B sent twice").
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "check_calls.h"
#include "nccl_id_file.h"

// Runs one collective over this process's ranks (`call(i, send, recv)` issues rank i's part in
// a group) on buffers filled by `fill(global rank, index)`, then compares each rank's recv buffer
// with `want(global rank, index)`. Returns non-zero on a failed call (a wrong value is printed
// as FAIL, and counted by the caller's reader).
template <class Call, class Fill, class Want>
int check_collective(const char* name, const std::vector<cudaStream_t>& streams, int first, size_t send_count,
                     size_t recv_count, const std::string& tag, Call call, Fill fill, Want want) {
  const int n = static_cast<int>(streams.size());
  std::vector<float*> send(n), recv(n);
  std::vector<float> host(std::max(send_count, recv_count));
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaMalloc(&send[i], send_count * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&recv[i], recv_count * sizeof(float)));
    for (size_t j = 0; j < send_count; ++j) host[j] = fill(first + i, j);
    CHECK_CUDA(cudaMemcpy(send[i], host.data(), send_count * sizeof(float), cudaMemcpyHostToDevice));
    for (size_t j = 0; j < recv_count; ++j) host[j] = -1;
    CHECK_CUDA(cudaMemcpy(recv[i], host.data(), recv_count * sizeof(float), cudaMemcpyHostToDevice));
  }
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < n; ++i) CHECK_NCCL(call(i, send[i], recv[i]));
  CHECK_NCCL(ncclGroupEnd());
  int wrong = 0;
  std::string first_wrong;
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaStreamSynchronize(streams[i]));
    CHECK_CUDA(cudaMemcpy(host.data(), recv[i], recv_count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t j = 0; j < recv_count; ++j)
      if (host[j] != want(first + i, j)) {
        if (wrong++ == 0)
          first_wrong = "rank " + std::to_string(first + i) + " [" + std::to_string(j) + "] = " +
                        std::to_string(host[j]) + ", want " + std::to_string(want(first + i, j));
      }
    CHECK_CUDA(cudaFree(send[i]));
    CHECK_CUDA(cudaFree(recv[i]));
  }
  if (wrong == 0)
    std::printf("%sok   values after %s\n", tag.c_str(), name);
  else
    std::printf("%sFAIL values after %s: %d wrong, first %s\n", tag.c_str(), name, wrong, first_wrong.c_str());
  return 0;
}

// The values each collective leaves, on small buffers (count floats per rank) of every rank.
int check_values(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams, int first,
                 int world, const std::string& tag) {
  const size_t count = 1000;
  const float w = static_cast<float>(world);
  auto comm = [&](int i) { return comms[i]; };
  if (check_collective(
          "AllReduce", streams, first, count, count, tag,
          [&](int i, float* s, float* r) { return ncclAllReduce(s, r, count, ncclFloat, ncclSum, comm(i), streams[i]); },
          [](int g, size_t j) { return static_cast<float>((g + 1) * (j % 7 + 1)); },
          [&](int, size_t j) { return static_cast<float>(j % 7 + 1) * w * (w + 1) / 2; }) != 0)
    return 1;
  if (check_collective(
          "AllGather", streams, first, count, count * world, tag,
          [&](int i, float* s, float* r) { return ncclAllGather(s, r, count, ncclFloat, comm(i), streams[i]); },
          [](int g, size_t j) { return static_cast<float>(g * 1000 + j % 100); },
          [&](int, size_t j) { return static_cast<float>((j / count) * 1000 + (j % count) % 100); }) != 0)
    return 1;
  const int root = world - 1;
  if (check_collective(
          "Broadcast", streams, first, count, count, tag,
          [&](int i, float* s, float* r) { return ncclBroadcast(s, r, count, ncclFloat, root, comm(i), streams[i]); },
          [&](int g, size_t j) { return g == root ? static_cast<float>(42 + j % 5) : 0.f; },
          [](int, size_t j) { return static_cast<float>(42 + j % 5); }) != 0)
    return 1;
  if (check_collective(
          "ReduceScatter", streams, first, count * world, count, tag,
          [&](int i, float* s, float* r) {
            return ncclReduceScatter(s, r, count, ncclFloat, ncclSum, comm(i), streams[i]);
          },
          [](int g, size_t k) { return static_cast<float>(g + k % 3); },
          [&](int g, size_t j) { return w * (w - 1) / 2 + w * static_cast<float>((g * count + j) % 3); }) != 0)
    return 1;
  // A ring of sends and receives: each rank sends to the next and receives from the previous.
  if (check_collective(
          "SendRecv", streams, first, count, count, tag,
          [&](int i, float* s, float* r) {
            const int g = first + i;
            ncclResult_t e = ncclSend(s, count, ncclFloat, (g + 1) % world, comm(i), streams[i]);
            return e != ncclSuccess ? e : ncclRecv(r, count, ncclFloat, (g + world - 1) % world, comm(i), streams[i]);
          },
          [](int g, size_t j) { return static_cast<float>(g * 10 + j % 3); },
          [&](int g, size_t j) { return static_cast<float>(((g + world - 1) % world) * 10 + j % 3); }) != 0)
    return 1;
  return 0;
}

// An all-reduce of 2 MiB captured into a CUDA graph on every rank's stream (as CUDA-graph
// training steps and tensor-parallel layers under graphs do), replayed three times.
int replay_graph(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams,
                 const std::vector<float*>& buf, int first, const std::string& tag) {
  const int n = static_cast<int>(streams.size());
  const size_t count = (2u << 20) / sizeof(float);
  std::vector<cudaGraph_t> graphs(n);
  std::vector<cudaGraphExec_t> execs(n);
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaStreamBeginCapture(streams[i], cudaStreamCaptureModeThreadLocal));
  }
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < n; ++i)
    CHECK_NCCL(ncclAllReduce(buf[i], buf[i], count, ncclFloat, ncclSum, comms[i], streams[i]));
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaStreamEndCapture(streams[i], &graphs[i]));
    CHECK_CUDA(cudaGraphInstantiate(&execs[i], graphs[i], 0));
  }
  for (int replay = 0; replay < 3; ++replay)
    for (int i = 0; i < n; ++i) {
      CHECK_CUDA(cudaSetDevice(first + i));
      CHECK_CUDA(cudaGraphLaunch(execs[i], streams[i]));
    }
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaStreamSynchronize(streams[i]));
    CHECK_CUDA(cudaGraphExecDestroy(execs[i]));
    CHECK_CUDA(cudaGraphDestroy(graphs[i]));
  }
  std::printf("%sok   a graph of AllReduce %zu B replayed 3 times\n", tag.c_str(), count * sizeof(float));
  return 0;
}

// Pipeline stages' pairs: the world split into two-rank communicators {g, g + world/2} (ranks
// of another node where nodes hold fewer GPUs than half the world), each pair exchanging 3 MiB
// both ways twice, in a group of a send and a receive per rank.
int exchange_pairs(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams, int first,
                   int world, const std::string& tag) {
  const int n = static_cast<int>(streams.size());
  const size_t count = (3u << 20) / sizeof(float);  // each way
  std::vector<float*> buf(n);
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaMalloc(&buf[i], 2 * count * sizeof(float)));
  }
  std::vector<ncclComm_t> pairs(n);
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    const int g = first + i;
    CHECK_NCCL(ncclCommSplit(comms[i], g % (world / 2), g, &pairs[i], nullptr));
  }
  CHECK_NCCL(ncclGroupEnd());
  for (int round = 0; round < 2; ++round) {
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < n; ++i) {
      const int peer = (first + i) < world / 2 ? 1 : 0;  // the other rank of the pair
      CHECK_NCCL(ncclSend(buf[i], count, ncclFloat, peer, pairs[i], streams[i]));
      CHECK_NCCL(ncclRecv(buf[i] + count, count, ncclFloat, peer, pairs[i], streams[i]));
    }
    CHECK_NCCL(ncclGroupEnd());
    for (int i = 0; i < n; ++i) {
      CHECK_CUDA(cudaSetDevice(first + i));
      CHECK_CUDA(cudaStreamSynchronize(streams[i]));
    }
  }
  for (int i = 0; i < n; ++i) {
    CHECK_NCCL(ncclCommDestroy(pairs[i]));
    CHECK_CUDA(cudaFree(buf[i]));
  }
  std::printf("%sok   pairs exchanged %zu B twice\n", tag.c_str(), count * sizeof(float));
  return 0;
}

// A ring of sends and receives over the whole communicator (each rank sends 20,000 bytes to the
// next and receives as much from the one before), twice.
int ring_twice(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams,
               const std::vector<float*>& buf, int first, int world, const std::string& tag) {
  const int n = static_cast<int>(streams.size());
  const size_t count = 5000;
  for (int round = 0; round < 2; ++round) {
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < n; ++i) {
      const int g = first + i;
      CHECK_NCCL(ncclSend(buf[i], count, ncclFloat, (g + 1) % world, comms[i], streams[i]));
      CHECK_NCCL(ncclRecv(buf[i] + count, count, ncclFloat, (g + world - 1) % world, comms[i], streams[i]));
    }
    CHECK_NCCL(ncclGroupEnd());
    for (int i = 0; i < n; ++i) {
      CHECK_CUDA(cudaSetDevice(first + i));
      CHECK_CUDA(cudaStreamSynchronize(streams[i]));
    }
  }
  std::printf("%sok   a ring of %zu B sent twice\n", tag.c_str(), count * sizeof(float));
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, between the driver's log lines on stderr
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  const int n = argc > 1 ? std::atoi(argv[1]) : devices;
  const char* id_file = std::getenv("NCCL_ID_FILE");
  const int proc = id_file ? std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0") : 0;
  const int procs = id_file ? std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1") : 1;
  const int first = proc * n;  // this process's first device and global rank
  if (n < 1 || procs < 1 || proc < 0 || proc >= procs || first + n > devices) {
    std::printf("FAIL %d ranks in process %d of %d asked, %d devices\n", n, proc, procs, devices);
    return 1;
  }
  const std::string tag = id_file ? "proc " + std::to_string(proc) + " " : "";
  std::vector<size_t> mib;
  for (int i = 2; i < argc; ++i) mib.push_back(std::strtoull(argv[i], nullptr, 10));
  if (mib.empty()) mib = {1, 256};

  std::vector<ncclComm_t> comms(n);
  if (id_file == nullptr) {
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = i;
    CHECK_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
    std::printf("ok   ncclCommInitAll over %d devices\n", n);
  } else {
    ncclUniqueId id;
    if (!share_nccl_id(id_file, proc, &id)) return 1;
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < n; ++i) {
      CHECK_CUDA(cudaSetDevice(first + i));
      CHECK_NCCL(ncclCommInitRank(&comms[i], procs * n, id, first + i));
    }
    CHECK_NCCL(ncclGroupEnd());
    std::printf("%sok   ncclCommInitRank of ranks %d-%d of %d\n", tag.c_str(), first, first + n - 1, procs * n);
  }

  const size_t max_bytes = static_cast<size_t>(*std::max_element(mib.begin(), mib.end())) << 20;
  std::vector<cudaStream_t> streams(n);
  std::vector<float*> buf(n);
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaStreamCreate(&streams[i]));
    CHECK_CUDA(cudaMalloc(&buf[i], max_bytes));
  }
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaSetDevice(first));
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  for (size_t m : mib) {
    const size_t bytes = m << 20;
    const size_t count = bytes / sizeof(float);
    CHECK_CUDA(cudaSetDevice(first));
    CHECK_CUDA(cudaEventRecord(start, streams[0]));
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < n; ++i)
      CHECK_NCCL(ncclAllReduce(buf[i], buf[i], count, ncclFloat, ncclSum, comms[i], streams[i]));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaSetDevice(first));
    CHECK_CUDA(cudaEventRecord(stop, streams[0]));
    for (int i = 0; i < n; ++i) {
      CHECK_CUDA(cudaSetDevice(first + i));
      CHECK_CUDA(cudaStreamSynchronize(streams[i]));
    }
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    const int world = procs * n;
    const double busbw = ms > 0 ? bytes * 2.0 * (world - 1) / world / (ms * 1e-3) / 1e9 : 0;
    std::printf("%sallreduce %zu B %.4f ms busbw %.1f GB/s\n", tag.c_str(), bytes, ms, busbw);
  }

  if (check_values(comms, streams, first, procs * n, tag) != 0) return 1;
  if (replay_graph(comms, streams, buf, first, tag) != 0) return 1;
  if (procs * n >= 4 && (procs * n) % 2 == 0 && exchange_pairs(comms, streams, first, procs * n, tag) != 0)
    return 1;
  if (ring_twice(comms, streams, buf, first, procs * n, tag) != 0) return 1;

  for (int i = 0; i < n; ++i) CHECK_NCCL(ncclCommDestroy(comms[i]));
  std::printf("%sok   ncclCommDestroy of %d communicators\n", tag.c_str(), n);
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(first + i));
    CHECK_CUDA(cudaFree(buf[i]));
    CHECK_CUDA(cudaStreamDestroy(streams[i]));
  }
  return 0;
}
