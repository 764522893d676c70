// A data-parallel training step as torchrun runs it: one process per rank, NCCL unmodified, on
// the sim backend (issue 23). Each process reads RANK, WORLD_SIZE and LOCAL_RANK as torchrun
// sets them, takes GPU LOCAL_RANK, gets the ncclUniqueId through a file written by rank 0,
// and runs steps of: a few GEMM-shaped kernels (forward and backward of a stack of linear
// layers), then an all-reduce of the gradient in 25 MiB buckets (by default a GPT-2 124M
// gradient in BF16: 124,439,808 x 2 bytes), all on one stream and timed with CUDA events.
//
// Usage: ddp_ranks_program ID_FILE [steps] [grad_bytes] [bucket_bytes] [skew]
// skew: rank r runs r x skew more layers' GEMMs, so that the ranks reach the all-reduce at
// different virtual times (tests: the early ranks must wait for the last).
// Prints per rank (first line of each rank tagged "rank R/W gpu G"):
//   "bucket <i> <bytes> B <us> us"           each all-reduce of the last step (CUDA events)
//   "step <i> virtual <ms> ms compute <ms> ms allreduce <ms> ms cpu <ms> ms wall <ms> ms after <ms> ms"
//   after: from the previous step's last all-reduce's end (an instant every rank shares) to this
//   step's start (each rank's host takes its own time to come back from its synchronization);
//   0 in the first step
//   "memory VmHWM <kB> kB VmRSS <kB> kB RssAnon <kB> kB RssFile <kB> kB RssShmem <kB> kB threads <n>"
// and "ok   done" at the end; a failed call prints "FAIL ..." and exits 1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "nccl_id_file.h"

#define CHECK_CUDA(x)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::printf("FAIL rank %d: %s -> %s\n", g_rank, #x, cudaGetErrorName(e_));             \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)
#define CHECK_NCCL(x)                                                                        \
  do {                                                                                       \
    ncclResult_t r_ = (x);                                                                   \
    if (r_ != ncclSuccess) {                                                                 \
      std::printf("FAIL rank %d: %s -> %s\n", g_rank, #x, ncclGetErrorString(r_));           \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

static int g_rank = -1;

// Named like a GEMM with M, N, K as integer parameters: the sim backend's fallback model times
// it as 2*M*N*K at the tensor-core rate (nothing executes on the sim backend).
__global__ void linear_hmma_gemm(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                                 int m, int n, int k) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m && i < n && k > 0) c[i] = a[i] * b[i];
}

static int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// Real time: a raw system call, which vgpu-run's clock shim (it virtualizes clock_gettime on
// threads that submitted GPU work) does not see.
static double real_now_s() {
  timespec ts{};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  return -1;
}

static ncclUniqueId share_id(const std::string& path, int rank) {
  ncclUniqueId id;
  if (!share_nccl_id(path, rank, &id)) std::exit(1);
  return id;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::printf("usage: %s ID_FILE [steps] [grad_bytes] [bucket_bytes]\n", argv[0]);
    return 2;
  }
  const std::string id_file = argv[1];
  const int steps = argc > 2 ? std::atoi(argv[2]) : 3;
  const size_t grad_bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 124439808ull * 2;
  const size_t bucket_bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 25ull << 20;
  const int skew = argc > 5 ? std::atoi(argv[5]) : 0;
  g_rank = env_int("RANK", 0);
  const int world = env_int("WORLD_SIZE", 1);
  const int local_rank = env_int("LOCAL_RANK", 0);
  if (steps < 1 || grad_bytes < 2 || bucket_bytes < 2 || skew < 0 || g_rank < 0 || g_rank >= world) {
    std::printf("FAIL bad arguments or environment\n");
    return 2;
  }

  CHECK_CUDA(cudaSetDevice(local_rank));
  CHECK_CUDA(cudaFree(nullptr));  // the context
  {  // What the process sees (CUDA_VISIBLE_DEVICES renumbers a node's GPUs from 0).
    int count = 0;
    char bus[32] = {};
    CHECK_CUDA(cudaGetDeviceCount(&count));
    CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, local_rank));
    std::printf("rank %d devices %d pci %s\n", g_rank, count, bus);
  }
  const long hwm_context = status_kb("VmHWM");
  const ncclUniqueId id = share_id(id_file, g_rank);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, world, id, g_rank));
  int device = -1;
  CHECK_CUDA(cudaGetDevice(&device));
  std::printf("rank %d/%d gpu %d: ncclCommInitRank ok (VmHWM %ld kB after the context, %ld kB after NCCL's init)\n",
              g_rank, world, device, hwm_context, status_kb("VmHWM"));

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The gradient and a stack of 12 linear layers' activations (GPT-2 small: 768 wide, 1024
  // tokens x 8 sequences).
  const int layers = 12, tokens = 8 * 1024, width = 768;
  char* grad = nullptr;
  __nv_bfloat16 *act = nullptr, *weight = nullptr;
  CHECK_CUDA(cudaMalloc(&grad, grad_bytes));
  CHECK_CUDA(cudaMalloc(&act, size_t(tokens) * 4 * width * sizeof(__nv_bfloat16)));
  CHECK_CUDA(cudaMalloc(&weight, size_t(width) * 4 * width * sizeof(__nv_bfloat16)));

  std::vector<size_t> buckets;
  for (size_t off = 0; off < grad_bytes; off += bucket_bytes) buckets.push_back(std::min(bucket_bytes, grad_bytes - off));
  std::vector<cudaEvent_t> marks(buckets.size() + 3);
  for (auto& e : marks) CHECK_CUDA(cudaEventCreate(&e));
  cudaEvent_t step_end[2];  // each step's last all-reduce's end, kept for the next step
  for (auto& e : step_end) CHECK_CUDA(cudaEventCreate(&e));

  for (int step = 0; step < steps; ++step) {
    const double cpu0 = process_cpu_s(), wall0 = real_now_s();
    CHECK_CUDA(cudaEventRecord(marks[0], stream));
    // Forward (1 GEMM a layer) and backward (2 a layer) of the MLP's first projection.
    for (int pass = 0; pass < 3; ++pass)
      for (int l = 0; l < layers + (pass == 2 ? g_rank * skew : 0); ++l)
        linear_hmma_gemm<<<(tokens + 255) / 256, 256, 0, stream>>>(act, weight, act, tokens, 4 * width, width);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(marks[1], stream));
    size_t off = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      CHECK_NCCL(ncclAllReduce(grad + off, grad + off, buckets[b] / 2, ncclBfloat16, ncclSum, comm, stream));
      CHECK_CUDA(cudaEventRecord(marks[2 + b], stream));
      off += buckets[b];
    }
    CHECK_CUDA(cudaEventRecord(step_end[step % 2], stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const double cpu = process_cpu_s() - cpu0, wall = real_now_s() - wall0;
    float total = 0, compute = 0, reduce = 0;
    CHECK_CUDA(cudaEventElapsedTime(&total, marks[0], marks[1 + buckets.size()]));
    CHECK_CUDA(cudaEventElapsedTime(&compute, marks[0], marks[1]));
    CHECK_CUDA(cudaEventElapsedTime(&reduce, marks[1], marks[1 + buckets.size()]));
    float after = 0;
    if (step > 0) CHECK_CUDA(cudaEventElapsedTime(&after, step_end[(step - 1) % 2], marks[0]));
    if (step == steps - 1)
      for (size_t b = 0; b < buckets.size(); ++b) {
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, marks[1 + b], marks[2 + b]));
        std::printf("rank %d bucket %zu %zu B %.3f us\n", g_rank, b, buckets[b], ms * 1e3);
      }
    std::printf("rank %d step %d virtual %.4f ms compute %.4f ms allreduce %.4f ms cpu %.1f ms wall %.1f ms after %.4f ms\n",
                g_rank, step, total, compute, reduce, cpu * 1e3, wall * 1e3, after);
  }
  CHECK_NCCL(ncclCommDestroy(comm));
  // RssFile is mostly libnccl.so's fat binary (218 MB, read once by the driver's module
  // parser): page cache shared by every rank on the host, not memory of this one.
  std::printf("rank %d memory VmHWM %ld kB VmRSS %ld kB RssAnon %ld kB RssFile %ld kB RssShmem %ld kB threads %ld\n", g_rank,
              status_kb("VmHWM"), status_kb("VmRSS"), status_kb("RssAnon"), status_kb("RssFile"), status_kb("RssShmem"), status_kb("Threads"));
  std::printf("rank %d ok   done\n", g_rank);
  return 0;
}
