// A long run on the passthrough keeps bounded memory: every op the program submits is placed on
// the virtual timeline (passthrough/virtual_timeline.h), and a process that submits hundreds of
// thousands of them must not keep them all. Through the driver ABI, over the stand-in driver
// (the sim's library, as every passthrough test): timed ops (event records, each one op on the
// virtual timeline) in a loop that synchronizes now and then, as a training loop does; the
// process's resident memory after many more must be about what it was after the first ones.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include "on_passthrough.h"

namespace {

// VmRSS of this process, bytes (0 when unreadable).
size_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  size_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtoul(line + 6, nullptr, 10);
  std::fclose(f);
  return kib * 1024;
}

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

TEST(PassthroughLongRun, MemoryStaysBoundedOverManyTimedOps) {
  ASSERT_TRUE(running_on_passthrough());
  OK(cuInit(0));
  CUcontext ctx = nullptr;
  OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  OK(cuCtxSetCurrent(ctx));
  CUstream streams[2];
  for (CUstream& s : streams) OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent event = nullptr;
  OK(cuEventCreate(&event, CU_EVENT_DEFAULT));
  const auto run = [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      ASSERT_EQ(cuEventRecord(event, streams[i % 2]), CUDA_SUCCESS);
      if (i % 1000 == 999) {
        ASSERT_EQ(cuEventSynchronize(event), CUDA_SUCCESS);
      }
    }
  };
  run(50000);  // everything that is made once is made
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // ASan keeps freed memory in quarantine (256 MB) and both add shadow memory as the run goes:
  // resident memory then measures the sanitizer. The ops above ran under it; the plain build
  // checks the memory.
  GTEST_SKIP() << "a sanitizer's own memory would be measured";
#endif
  const size_t before = resident_bytes();
  ASSERT_GT(before, 0u);
  // Kept whole, each op would cost about 300 bytes (its record and its place): 90 MB.
  run(300000);
  const size_t after = resident_bytes();
  std::printf("resident after 50000 ops: %zu KiB, after 300000 more: %zu KiB\n", before / 1024, after / 1024);
  EXPECT_LT(after, before + (16u << 20)) << "resident " << before / 1024 << " KiB -> " << after / 1024 << " KiB";
  cuEventDestroy(event);
  for (CUstream s : streams) cuStreamDestroy(s);
  cuDevicePrimaryCtxRelease(0);
}

}  // namespace
