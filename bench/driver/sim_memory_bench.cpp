// Whether the sim backend's memory stays flat as a program launches kernels: a long training
// run launches 10^8 of them. Launches one small kernel over and over, synchronizing every 4096
// launches (as a training step does) or never until the end, and prints the process's resident
// memory after 10^6 and 10^7 launches; the ratio of the two is the figure (1.00 = flat), the
// reading at 10^6 being this run's baseline.
//   usage: sim_memory_bench <kernels.fatbin> [launches at the first reading, default 1000000]
// The second reading is taken at ten times the first.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "bench_check.h"

namespace {

// Resident set size, bytes.
long rss_bytes() {
  long pages_total = 0, pages_resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    std::fclose(f);
  }
  return pages_resident * sysconf(_SC_PAGESIZE);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sim_memory_bench <kernels.fatbin> [launches]\n");
    return 2;
  }
  const long first = argc > 2 ? std::atol(argv[2]) : 1000000;
  const CUfunction add = start_with_add_inplace(argv[1]);
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 4096));
  CHECK(cuMemAlloc(&b, 4096));
  unsigned long long count = 1024;
  void* args[] = {&a, &b, &count};

  std::printf("%-36s %14s %14s %10s %16s\n", "launches on one stream", "RSS @1x (MiB)", "RSS @10x (MiB)",
              "ratio", "bytes/launch");
  for (const long sync_every : {4096L, 0L}) {
    CUstream stream;
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    long launched = 0;
    auto run_to = [&](long n) {
      for (; launched < n; ++launched) {
        CHECK(cuLaunchKernel(add, 4, 1, 1, 256, 1, 1, 0, stream, args, nullptr));
        if (sync_every > 0 && (launched + 1) % sync_every == 0) CHECK(cuStreamSynchronize(stream));
      }
      CHECK(cuStreamSynchronize(stream));
    };
    run_to(first);
    const long at_first = rss_bytes();
    run_to(first * 10);
    const long at_tenth = rss_bytes();
    const std::string name = sync_every > 0 ? "synchronized every 4096" : "never synchronized";
    std::printf("%-36s %14.1f %14.1f %10.3f %16.2f\n", name.c_str(), at_first / 1048576.0,
                at_tenth / 1048576.0, static_cast<double>(at_tenth) / at_first,
                static_cast<double>(at_tenth - at_first) / static_cast<double>(first * 9));
    CHECK(cuStreamDestroy(stream));
  }
  std::printf("(RSS of the whole process after the stated number of launches and a final "
              "synchronization; ratio = RSS at 10x / RSS at 1x, the first reading being the baseline)\n");
  return 0;
}
