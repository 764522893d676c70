// How fast the sim backend answers the calls a training loop makes most: kernel launches,
// small synchronous and asynchronous copies, event records. Each row is measured in this run
// against a baseline doing the same work without vgpu (a plain function call for launches, a
// plain memcpy for copies), and the table reports calls per second and the ratio.
//   usage: sim_calls_bench <kernels.fatbin> [--quick]
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_check.h"

namespace {

// Calls per second of `op`, over at least `min_s` seconds (after a warm-up).
double rate(const std::function<void()>& op, double min_s) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 100; ++i) op();
  long calls = 0;
  const auto start = clock::now();
  double elapsed = 0;
  while (elapsed < min_s) {
    for (int i = 0; i < 256; ++i) op();
    calls += 256;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  }
  return calls / elapsed;
}

__attribute__((noinline)) void baseline_call(void* p) { asm volatile("" : : "r"(p) : "memory"); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sim_calls_bench <kernels.fatbin> [--quick]\n");
    return 2;
  }
  const double min_s = (argc > 2 && std::strcmp(argv[2], "--quick") == 0) ? 0.05 : 0.5;
  const CUfunction add = start_with_add_inplace(argv[1]);
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent event;
  CHECK(cuEventCreate(&event, CU_EVENT_DEFAULT));
  const size_t small = 4096;
  CUdeviceptr dev_a, dev_b;
  CHECK(cuMemAlloc(&dev_a, small));
  CHECK(cuMemAlloc(&dev_b, small));
  std::vector<char> host(small, 1), host2(small, 2);
  unsigned long long count = small / 4;
  void* args[] = {&dev_a, &dev_b, &count};

  struct Row {
    const char* name;
    double vgpu, base;
  };
  std::vector<Row> rows;
  int sync_every = 0;
  rows.push_back({"cuLaunchKernel (async)",
                  rate([&] {
                    CHECK(cuLaunchKernel(add, 4, 1, 1, 256, 1, 1, 0, stream, args, nullptr));
                    if (++sync_every % 4096 == 0) CHECK(cuStreamSynchronize(stream));
                  }, min_s),
                  rate([&] { baseline_call(args); }, min_s)});
  CHECK(cuStreamSynchronize(stream));
  rows.push_back({"cuMemcpyHtoD 4 KiB (sync)",
                  rate([&] { CHECK(cuMemcpyHtoD(dev_a, host.data(), small)); }, min_s),
                  rate([&] { std::memcpy(host2.data(), host.data(), small); baseline_call(host2.data()); }, min_s)});
  rows.push_back({"cuMemcpyHtoDAsync 4 KiB",
                  rate([&] {
                    CHECK(cuMemcpyHtoDAsync(dev_a, host.data(), small, stream));
                    if (++sync_every % 4096 == 0) CHECK(cuStreamSynchronize(stream));
                  }, min_s),
                  rate([&] { std::memcpy(host2.data(), host.data(), small); baseline_call(host2.data()); }, min_s)});
  CHECK(cuStreamSynchronize(stream));
  rows.push_back({"cuEventRecord",
                  rate([&] { CHECK(cuEventRecord(event, stream)); }, min_s),
                  rate([&] { baseline_call(&event); }, min_s)});

  std::printf("%-28s %16s %16s %10s\n", "call (sim backend)", "vgpu calls/s", "baseline/s", "ratio");
  for (const Row& r : rows)
    std::printf("%-28s %16.0f %16.0f %10.3f\n", r.name, r.vgpu, r.base, r.vgpu / r.base);
  std::printf("(baseline: the same work without vgpu — a plain call for launches and records, a "
              "plain 4 KiB memcpy for copies; ratio = vgpu rate / baseline rate)\n");
  return 0;
}
