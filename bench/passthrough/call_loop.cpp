// One driver call in a loop, for profiling the passthrough's own work per call (issue 21):
//
//   passthrough_call_loop <libcuda> <empty_kernel.fatbin> <call> <n> [<touch KiB> [<stride>]]
//
// <touch KiB>: between two calls the loop writes one byte of every cache line of a buffer that
// large (its time is in the figure, the same for any library): a framework's own work between
// its driver calls evicts vgpu's data from the caches, which the bare loop never does (on the
// GPU the event record's own time is 2-3x this loop's, for the same instructions). <stride>
// (default 64): bytes between two bytes written; 4160 touches one line of each page, which
// evicts the TLB's entries too (passthrough_call_overhead's [stride] says why).
//
// <call>: launch (empty kernel, settled), launchlong (249-byte name), launchargs (PyTorch-like
// arguments, as passthrough_call_overhead's row), record (one event on one non-blocking stream),
// copy (cuMemcpyHtoDAsync 4 KiB), copybig (4 MiB), alloc (cuMemAlloc + cuMemFree 2 MiB),
// launchmany (launchargs' kernel on 64 pairs of buffers in turn), launchrecord (launch, then record, on one stream), launchmoving (launchargs with
// one masked word that differs from launch to launch: raw parameters that rarely repeat). Prints the
// loop's CPU time per call. Over the stand-in driver (VGPU_REAL_LIBCUDA=libvgpu_free_calls_driver.so,
// VGPU_SIM_LIBCUDA, VGPU_PHYSICAL_DEVICES=0, as passthrough_call_cost), the instructions a call
// costs are the difference of two callgrind runs:
//   valgrind --tool=callgrind passthrough_call_loop ... launch 20000   (and 40000; (b - a) / 20000)
// An idle thread makes the process multi-threaded, as one with the real driver is; the loop is
// timed only once vgpu's wall clock took the TSC (its calibration: 50-100 ms). Under valgrind the
// program runs ~50x slower, so its own time between calls outlasts a 2 us kernel or a 4 KiB copy
// and back-to-back work no longer merges into stretches (device_activity.h): copybig keeps its
// copies back to back there.
#include <cuda.h>
#include <dlfcn.h>
#include "cache_eviction.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>
#include <thread>
#include <mutex>
#include <condition_variable>
#include <time.h>
#include <unistd.h>
#define CHECK(x) do { CUresult r_=(x); if (r_) { std::fprintf(stderr, "%s -> %d\n", #x, (int)r_); std::exit(1);} } while(0)
template <class F> F fn(void* h, const char* n) { void* p = dlsym(h, n); if (!p) { std::fprintf(stderr, "missing %s\n", n); std::exit(2);} return (F)p; }
int main(int argc, char** argv) {
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), {});
  const char* what = argv[3]; long n = atol(argv[4]);
  CacheEviction eviction(argc > 5 ? static_cast<size_t>(atol(argv[5])) << 10 : 0,
                         argc > 6 ? static_cast<size_t>(atol(argv[6])) : 64);
  std::mutex mu; std::condition_variable cv; bool done = false;
  std::thread idle([&] { std::unique_lock l(mu); cv.wait(l, [&] { return done; }); });
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 2; }
  auto init = fn<CUresult (*)(unsigned)>(h, "cuInit");
  auto retain = fn<CUresult (*)(CUcontext*, CUdevice)>(h, "cuDevicePrimaryCtxRetain");
  auto set_current = fn<CUresult (*)(CUcontext)>(h, "cuCtxSetCurrent");
  auto load = fn<CUresult (*)(CUmodule*, const void*)>(h, "cuModuleLoadData");
  auto get_function = fn<CUresult (*)(CUfunction*, CUmodule, const char*)>(h, "cuModuleGetFunction");
  auto stream_create = fn<CUresult (*)(CUstream*, unsigned)>(h, "cuStreamCreate");
  auto stream_sync = fn<CUresult (*)(CUstream)>(h, "cuStreamSynchronize");
  auto launch = fn<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**)>(h, "cuLaunchKernel");
  auto alloc = fn<CUresult (*)(CUdeviceptr*, size_t)>(h, "cuMemAlloc_v2");
  auto mem_free = fn<CUresult (*)(CUdeviceptr)>(h, "cuMemFree_v2");
  auto event_create = fn<CUresult (*)(CUevent*, unsigned)>(h, "cuEventCreate");
  auto event_record = fn<CUresult (*)(CUevent, CUstream)>(h, "cuEventRecord");
  auto host_alloc = fn<CUresult (*)(void**, size_t)>(h, "cuMemAllocHost_v2");
  auto copy_async = fn<CUresult (*)(CUdeviceptr, const void*, size_t, CUstream)>(h, "cuMemcpyHtoDAsync_v2");
  CHECK(init(0)); CUcontext ctx; CHECK(retain(&ctx, 0)); CHECK(set_current(ctx));
  CUmodule mod; CHECK(load(&mod, image.data())); CUfunction f; CHECK(get_function(&f, mod, "empty"));
  CUfunction f_long, f_args;
  CHECK(get_function(&f_long, mod, "empty_as_long_as_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_name"));
  CHECK(get_function(&f_args, mod, "elementwise_like"));
  CUstream s; CHECK(stream_create(&s, CU_STREAM_NON_BLOCKING));
  CUevent e; CHECK(event_create(&e, CU_EVENT_DISABLE_TIMING));
  void* host; CHECK(host_alloc(&host, 4096)); CUdeviceptr dev; CHECK(alloc(&dev, 4096));
  struct ElementwiseArgs { int dims; unsigned sizes[24]; unsigned long long strides[24]; };
  CUdeviceptr out_buf, in_buf; CHECK(alloc(&out_buf, 4096)); CHECK(alloc(&in_buf, 4096));
  unsigned nn = 1024; ElementwiseArgs args{}; std::vector<char> heap(4096);
  args.dims = 1; args.sizes[0] = nn; args.strides[0] = 4;
  for (unsigned i = 1; i < 24; ++i) { args.sizes[i] = i; args.strides[i] = i % 2 ? reinterpret_cast<uintptr_t>(&args) + 8 * i : reinterpret_cast<uintptr_t>(heap.data()) + 64 * i; }
  void* params[] = {&out_buf, &in_buf, &nn, &args};
  // launchmany: the same kernel on 64 pairs of buffers in turn (an elementwise kernel over a
  // step's tensors); launchmoving: one masked word of the struct (a heap address) differs from
  // launch to launch, repeating only after 65536 launches, so the raw parameters do not repeat
  // for vgpu while the signature does.
  constexpr int kSets = 64;
  std::vector<CUdeviceptr> outs(kSets), ins(kSets);
  if (!strcmp(what, "launchmany"))
    for (int k = 0; k < kSets; ++k) { CHECK(alloc(&outs[k], 4096)); CHECK(alloc(&ins[k], 4096)); }
  std::vector<char> moving_heap(65536 + 8);
  ElementwiseArgs moving = args;
  // warm up: 3000 of the call (settles launches)
  auto one = [&](long i) {
    eviction.touch();
    if (!strcmp(what, "launch")) { CHECK(launch(f, 1,1,1,1,1,1,0,s,nullptr,nullptr)); if (i % 1000 == 999) CHECK(stream_sync(s)); }
    else if (!strcmp(what, "launchlong")) { CHECK(launch(f_long, 1,1,1,1,1,1,0,s,nullptr,nullptr)); if (i % 1000 == 999) CHECK(stream_sync(s)); }
    else if (!strcmp(what, "launchargs")) { CHECK(launch(f_args, 1,1,1,1,1,1,0,s,params,nullptr)); if (i % 1000 == 999) CHECK(stream_sync(s)); }
    else if (!strcmp(what, "record")) CHECK(event_record(e, s));
    // A launch and a record on the same stream (a step's marker after its kernel): the launch's
    // lock makes the record the thread's slot holds (virtual_timeline.h), so its cost is counted.
    else if (!strcmp(what, "launchrecord")) {
      CHECK(launch(f, 1,1,1,1,1,1,0,s,nullptr,nullptr)); CHECK(event_record(e, s));
      if (i % 1000 == 999) CHECK(stream_sync(s));
    }
    else if (!strcmp(what, "copy")) { CHECK(copy_async(dev, host, 4096, s)); if (i % 1000 == 999) CHECK(stream_sync(s)); }
    else if (!strcmp(what, "copybig")) { CHECK(copy_async(dev, host, 4u << 20, s)); if (i % 1000 == 999) CHECK(stream_sync(s)); }
    else if (!strcmp(what, "alloc")) { CUdeviceptr p; CHECK(alloc(&p, 2u<<20)); CHECK(mem_free(p)); }
    else if (!strcmp(what, "launchmany")) {
      const size_t k = static_cast<size_t>(i % kSets);
      void* p[] = {&outs[k], &ins[k], &nn, &args};
      CHECK(launch(f_args, 1,1,1,1,1,1,0,s,p,nullptr)); if (i % 1000 == 999) CHECK(stream_sync(s));
    }
    else if (!strcmp(what, "launchmoving")) {
      moving.strides[1] = reinterpret_cast<uintptr_t>(moving_heap.data()) + static_cast<uintptr_t>(i * 7919 % 65536);
      void* p[] = {&out_buf, &in_buf, &nn, &moving};
      CHECK(launch(f_args, 1,1,1,1,1,1,0,s,p,nullptr)); if (i % 1000 == 999) CHECK(stream_sync(s));
    }
  };
  for (long i = 0; i < 3000; ++i) one(i);
  CHECK(stream_sync(s));
  // vgpu's wall clock takes the TSC once calibrated (50-100 ms after its first reading): time only after.
  usleep(150000);
  for (long i = 0; i < 3000; ++i) one(i);
  CHECK(stream_sync(s));
  timespec a, b; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (long i = 0; i < n; ++i) one(i);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  CHECK(stream_sync(s));
  std::printf("%s %.1f ns/call (cpu)\n", what, ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
  { std::lock_guard l(mu); done = true; } cv.notify_one(); idle.join();
  std::fflush(stdout); std::_Exit(0);
}
