// The README's main job: one data-parallel training step on every virtual GPU of the cluster,
// written against the driver API as any CUDA program would be, with no knowledge of vgpu.
//   compute:    `layers` x 3 GEMMs (forward, backward-data, backward-weight) per device
//   all-reduce: a ring over all devices (reduce-scatter, then all-gather) of the gradients,
//               built from peer copies and a reduction kernel, ordered by events
// It prints each device's virtual time (measured with CUDA events, so the numbers are the
// simulated cluster's), the all-reduce's bus bandwidth, and the analytic ring expectation from
// the configured NVLink bandwidth beside it.
//   usage: dp_step <kernels.fatbin> [--grad-mib N] [--gemm N] [--layers N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "simcore/cluster_config.h"

#define CHECK(call)                                                                   \
  do {                                                                                \
    CUresult r_ = (call);                                                             \
    if (r_ != CUDA_SUCCESS) {                                                         \
      const char* name_ = nullptr;                                                    \
      cuGetErrorName(r_, &name_);                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,        \
                   name_ ? name_ : "?");                                              \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

struct Options {
  std::string fatbin;
  size_t grad_bytes = 256ull << 20;
  int gemm = 4096;
  int layers = 4;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--grad-mib") o.grad_bytes = std::strtoull(next(), nullptr, 10) << 20;
    else if (a == "--gemm") o.gemm = std::atoi(next());
    else if (a == "--layers") o.layers = std::atoi(next());
    else if (o.fatbin.empty()) o.fatbin = a;
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); std::exit(2); }
  }
  if (o.fatbin.empty()) {
    std::fprintf(stderr, "usage: dp_step <kernels.fatbin> [--grad-mib N] [--gemm N] [--layers N]\n");
    std::exit(2);
  }
  return o;
}

struct Device {
  CUcontext ctx;
  CUmodule module;
  CUfunction gemm, add;
  CUstream stream;
  CUdeviceptr a, b, c, grad, recv;
  CUevent start, computed, reduced, done, step;  // `step`: reused for cross-device ordering
};

float elapsed_ms(CUevent from, CUevent to) {
  float ms = 0;
  CHECK(cuEventElapsedTime(&ms, from, to));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  CHECK(cuInit(0));
  int n = 0;
  CHECK(cuDeviceGetCount(&n));
  char name[128];
  CHECK(cuDeviceGetName(name, sizeof name, 0));
  const size_t chunk = opt.grad_bytes / n / 4 * 4;  // bytes per ring chunk, whole floats
  const size_t grad_bytes = chunk * n;
  const size_t gemm_bytes = sizeof(float) * opt.gemm * opt.gemm;

  std::vector<Device> dev(n);
  for (int d = 0; d < n; ++d) {
    Device& v = dev[d];
    CHECK(cuDevicePrimaryCtxRetain(&v.ctx, d));
    CHECK(cuCtxSetCurrent(v.ctx));
    CHECK(cuModuleLoad(&v.module, opt.fatbin.c_str()));
    CHECK(cuModuleGetFunction(&v.gemm, v.module, "sgemm_tiled"));
    CHECK(cuModuleGetFunction(&v.add, v.module, "add_inplace"));
    CHECK(cuStreamCreate(&v.stream, CU_STREAM_NON_BLOCKING));
    for (CUdeviceptr* p : {&v.a, &v.b, &v.c}) CHECK(cuMemAlloc(p, gemm_bytes));
    CHECK(cuMemAlloc(&v.grad, grad_bytes));
    CHECK(cuMemAlloc(&v.recv, chunk));
    float value = static_cast<float>(d + 1);
    unsigned bits;
    std::memcpy(&bits, &value, sizeof bits);
    CHECK(cuMemsetD32(v.grad, bits, grad_bytes / 4));
    for (CUevent* e : {&v.start, &v.computed, &v.reduced, &v.done, &v.step})
      CHECK(cuEventCreate(e, CU_EVENT_DEFAULT));
  }
  for (int d = 0; d < n; ++d)
    for (int p = 0; p < n; ++p) {
      int ok = 0;
      CHECK(cuDeviceCanAccessPeer(&ok, d, p));
      if (ok) {
        CHECK(cuCtxSetCurrent(dev[d].ctx));
        CHECK(cuCtxEnablePeerAccess(dev[p].ctx, 0));
      }
    }

  auto launch_add = [&](int d, CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    unsigned long long count = bytes / 4;
    void* args[] = {&dst, &src, &count};
    CHECK(cuLaunchKernel(dev[d].add, 1024, 1, 1, 256, 1, 1, 0, dev[d].stream, args, nullptr));
  };
  auto chunk_at = [&](int d, int i) { return dev[d].grad + static_cast<CUdeviceptr>(((i % n) + n) % n) * chunk; };
  // dst's stream waits until src's stream has reached this point.
  auto order = [&](int src, int dst) {
    CHECK(cuEventRecord(dev[src].step, dev[src].stream));
    CHECK(cuStreamWaitEvent(dev[dst].stream, dev[src].step, 0));
  };

  // Compute: the same GEMMs on every device.
  const unsigned grid = (opt.gemm + 15) / 16;
  for (int d = 0; d < n; ++d) {
    Device& v = dev[d];
    CHECK(cuEventRecord(v.start, v.stream));
    int m = opt.gemm;
    for (int l = 0; l < opt.layers * 3; ++l) {
      void* args[] = {&m, &m, &m, &v.a, &v.b, &v.c};
      CHECK(cuLaunchKernel(v.gemm, grid, grid, 1, 16, 16, 1, 0, v.stream, args, nullptr));
    }
    CHECK(cuEventRecord(v.computed, v.stream));
  }
  // Ring all-reduce. Reduce-scatter: at step s device d sends chunk d-s to d+1, which adds it.
  // Each step's waits are set up before any of its work is queued, so that the n transfers of a
  // step run side by side (a real ring does), not one after another.
  for (int s = 0; s < n - 1; ++s) {
    for (int d = 0; d < n; ++d) order((d + 1) % n, d);  // receiver has consumed its last chunk
    for (int d = 0; d < n; ++d) {
      const int to = (d + 1) % n;
      CHECK(cuMemcpyPeerAsync(dev[to].recv, dev[to].ctx, chunk_at(d, d - s), dev[d].ctx, chunk,
                              dev[d].stream));
    }
    for (int d = 0; d < n; ++d) {
      const int to = (d + 1) % n;
      order(d, to);
      launch_add(to, chunk_at(to, d - s), dev[to].recv, chunk);
    }
  }
  for (int d = 0; d < n; ++d) CHECK(cuEventRecord(dev[d].reduced, dev[d].stream));
  // All-gather: at step s device d forwards the finished chunk d+1-s to d+1.
  for (int s = 0; s < n - 1; ++s) {
    for (int d = 0; d < n; ++d) {
      const int to = (d + 1) % n;
      CHECK(cuMemcpyPeerAsync(chunk_at(to, d + 1 - s), dev[to].ctx, chunk_at(d, d + 1 - s),
                              dev[d].ctx, chunk, dev[d].stream));
    }
    for (int d = 0; d < n; ++d) order(d, (d + 1) % n);
  }
  for (int d = 0; d < n; ++d) CHECK(cuEventRecord(dev[d].done, dev[d].stream));
  for (int d = 0; d < n; ++d) CHECK(cuEventSynchronize(dev[d].done));

  // One reduction kernel alone, for the analytic expectation.
  CHECK(cuCtxSetCurrent(dev[0].ctx));
  CHECK(cuEventRecord(dev[0].reduced, dev[0].stream));  // `reduced` is free again by now
  launch_add(0, dev[0].grad, dev[0].recv, chunk);
  CHECK(cuEventRecord(dev[0].step, dev[0].stream));
  CHECK(cuEventSynchronize(dev[0].step));
  const double t_add = elapsed_ms(dev[0].reduced, dev[0].step) / 1e3;

  std::printf("data-parallel step on %d x %s: %d layers x 3 GEMMs of %d^3, all-reduce of %.0f MiB\n\n",
              n, name, opt.layers, opt.gemm, grad_bytes / 1048576.0);
  std::printf("%-7s %14s %16s %12s\n", "device", "compute (ms)", "all-reduce (ms)", "total (ms)");
  double allreduce_max = 0;
  for (int d = 0; d < n; ++d) {
    // Times from the device's own start; the all-reduce ends when the last device's does.
    const double compute = elapsed_ms(dev[d].start, dev[d].computed);
    const double allreduce = elapsed_ms(dev[d].computed, dev[d].done);
    allreduce_max = std::max(allreduce_max, allreduce / 1e3);
    std::printf("%-7d %14.3f %16.3f %12.3f\n", d, compute, allreduce, elapsed_ms(dev[d].start, dev[d].done));
  }

  simcore::ConfigResult config = simcore::load_cluster_config();
  // What a transfer's payload gets of the link (the cluster's nvlink.efficiency).
  const double link = config.ok() ? config.cluster->nvlink.bw_per_gpu * config.cluster->nvlink.efficiency : 0;
  const double algbw = grad_bytes / allreduce_max;
  const double busbw = algbw * 2.0 * (n - 1) / n;
  // A ring moves 2(n-1) chunks over every link in sequence, each at the link's bandwidth, and
  // applies n-1 reductions: t = 2(n-1) * chunk / B + (n-1) * t_add.
  const double expected = link > 0 ? 2.0 * (n - 1) * chunk / link + (n - 1) * t_add : 0;
  std::printf("\nall-reduce: %.3f ms, algbw %.1f GB/s, busbw %.1f GB/s\n", allreduce_max * 1e3,
              algbw / 1e9, busbw / 1e9);
  if (expected > 0)
    std::printf("analytic ring: %.3f ms (link payload %.1f GB/s per direction, reduction %.3f ms per step)"
                ", busbw %.1f GB/s; simulated/analytic time = %.3f\n",
                expected * 1e3, link / 1e9, t_add * 1e3,
                grad_bytes * 2.0 * (n - 1) / n / expected / 1e9, allreduce_max / expected);
  return 0;
}
