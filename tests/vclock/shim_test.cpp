// libvgpu-vclock.so against the sim driver, as a program sees it. Run twice (meson.build):
// with the shim preloaded (VCLOCK_EXPECT=virtual) and without it (VCLOCK_EXPECT=real), where
// every reading must be the real one.
//
// Known virtual work: one launch of an empty kernel given as PTX text, timed by the fallback
// model (front/launch/kernel_time_model.h): 2^20 x 800 blocks of 1024 threads, 16 bytes each over the
// H100's 3.35 TB/s, about 4.1 s of virtual time, while the sim executes nothing (milliseconds
// of real time). Each test drives the GPU from a thread of its own, so that each starts with a
// thread that has no virtual clock yet.
//
// The real clock is read with the raw system call, which no shim sees. Real durations are only
// ever compared as "far from the virtual one", with wide margins.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "contracts/vgpu_clock_table.h"

namespace {

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

constexpr int64_t kMs = 1'000'000;

const char kPtx[] = R"(
.version 8.0
.target sm_90
.address_size 64

.visible .entry vclock_spin()
{
	ret;
}
)";

bool expect_virtual() {
  const char* e = std::getenv("VCLOCK_EXPECT");
  return e != nullptr && std::string(e) == "virtual";
}

int64_t ns(const timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec; }

// The real clock, past any interposer.
int64_t sys_now(clockid_t id) {
  timespec ts{};
  syscall(SYS_clock_gettime, id, &ts);
  return ns(ts);
}
// The clock as the program reads it (the shim's, when preloaded).
int64_t libc_now(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return ns(ts);
}
int64_t steady_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
int64_t system_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}
int64_t timeofday_now() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<int64_t>(tv.tv_sec) * 1'000'000'000 + tv.tv_usec * 1000;
}
int64_t time_now() { return static_cast<int64_t>(time(nullptr)) * 1'000'000'000; }

struct Reader {
  const char* name;
  std::function<int64_t()> read;
  int64_t slack;  // extra tolerance: coarse clocks tick every few ms, time() every second
};

const Reader kReaders[] = {
    {"CLOCK_MONOTONIC", [] { return libc_now(CLOCK_MONOTONIC); }, 0},
    {"CLOCK_MONOTONIC_RAW", [] { return libc_now(CLOCK_MONOTONIC_RAW); }, 0},
    {"CLOCK_MONOTONIC_COARSE", [] { return libc_now(CLOCK_MONOTONIC_COARSE); }, 20 * kMs},
    {"CLOCK_BOOTTIME", [] { return libc_now(CLOCK_BOOTTIME); }, 0},
    {"CLOCK_REALTIME", [] { return libc_now(CLOCK_REALTIME); }, 0},
    {"CLOCK_REALTIME_COARSE", [] { return libc_now(CLOCK_REALTIME_COARSE); }, 20 * kMs},
    {"steady_clock", steady_now, 0},
    {"system_clock", system_now, 0},
    {"gettimeofday", timeofday_now, 0},
    {"time", time_now, 1000 * kMs},
};
constexpr int kReaderCount = sizeof kReaders / sizeof kReaders[0];

// The driver objects every test shares; each test's GPU thread makes the context current.
class Gpu {
 public:
  static Gpu& get() {
    static Gpu g;
    return g;
  }
  void bind() { ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS); }
  CUfunction spin() const { return spin_; }

 private:
  Gpu() {
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx_, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx_) != CUDA_SUCCESS || cuModuleLoadData(&module_, kPtx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&spin_, module_, "vclock_spin") != CUDA_SUCCESS)
      spin_ = nullptr;
  }
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction spin_ = nullptr;
};

// A thread's GPU work: a stream, two events, and the 4-second kernel between them.
class Work {
 public:
  Work() {
    Gpu::get().bind();
    EXPECT_NE(Gpu::get().spin(), nullptr);
    EXPECT_EQ(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT_EQ(cuEventCreate(&a_, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuEventCreate(&b_, 0), CUDA_SUCCESS);
  }
  ~Work() {
    cuEventDestroy(a_);
    cuEventDestroy(b_);
    cuStreamDestroy(s_);
  }
  // The thread's first submission: from here on it has a virtual clock.
  void first_submission() {
    EXPECT_EQ(cuEventRecord(a_, s_), CUDA_SUCCESS);
    EXPECT_EQ(cuEventSynchronize(a_), CUDA_SUCCESS);
  }
  // The long kernel, synchronized; returns its virtual duration (events), ns.
  int64_t long_kernel() {
    EXPECT_EQ(cuEventRecord(a_, s_), CUDA_SUCCESS);
    EXPECT_EQ(cuLaunchKernel(Gpu::get().spin(), 1 << 20, 800, 1, 1024, 1, 1, 0, s_, nullptr, nullptr),
              CUDA_SUCCESS);
    EXPECT_EQ(cuEventRecord(b_, s_), CUDA_SUCCESS);
    EXPECT_EQ(cuEventSynchronize(b_), CUDA_SUCCESS);
    float ms = 0;
    EXPECT_EQ(cuEventElapsedTime(&ms, a_, b_), CUDA_SUCCESS);
    return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }

 private:
  CUstream s_ = nullptr;
  CUevent a_ = nullptr, b_ = nullptr;
};

void on_new_thread(const std::function<void()>& body) {
  std::thread t(body);
  t.join();
}

TEST(VirtualClock, ShimIsWhatTheRunSays) {
  const char* preload = std::getenv("LD_PRELOAD");
  const bool loaded = preload != nullptr && std::strstr(preload, "libvgpu-vclock.so") != nullptr;
  EXPECT_EQ(loaded, expect_virtual());
}

// (a) A thread that launched work reads its virtual clock: every reading moves by the virtual
// duration of the work it waited for, not by the real time it took.
TEST(VirtualClock, GpuThreadReadsTheVirtualDuration) {
  on_new_thread([] {
    Work w;
    w.first_submission();
    int64_t before[kReaderCount], after[kReaderCount];
    for (int i = 0; i < kReaderCount; ++i) before[i] = kReaders[i].read();
    const int64_t real0 = sys_now(CLOCK_MONOTONIC);
    const int64_t elapsed = w.long_kernel();
    const int64_t real = sys_now(CLOCK_MONOTONIC) - real0;
    for (int i = 0; i < kReaderCount; ++i) after[i] = kReaders[i].read();
    ASSERT_GT(elapsed, 3000 * kMs) << "the kernel's virtual duration";
    ASSERT_LT(real, elapsed / 2) << "the sim took as long as the virtual kernel: cannot tell them apart";
    for (int i = 0; i < kReaderCount; ++i) {
      const int64_t d = after[i] - before[i];
      const int64_t slack = kReaders[i].slack;
      if (expect_virtual()) {
        // The virtual clock also moved by the launch latency and the CPU time between readings.
        EXPECT_GE(d, elapsed - slack - kMs / 10) << kReaders[i].name;
        EXPECT_LE(d, elapsed + slack + 100 * kMs) << kReaders[i].name;
      } else {
        EXPECT_LE(d, real + slack + 100 * kMs) << kReaders[i].name;
      }
    }
  });
}

// (b) A thread that never calls the driver keeps real time, while a GPU thread's readings lead.
TEST(VirtualClock, ThreadWithoutGpuWorkKeepsRealTime) {
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;  // 1: the GPU thread's clock leads; 2: the other thread has read
  int64_t gpu_lead = 0, elapsed = 0;
  std::thread gpu([&] {
    Work w;
    w.first_submission();
    libc_now(CLOCK_MONOTONIC);  // the switch: readings follow the virtual clock from here
    elapsed = w.long_kernel();
    gpu_lead = libc_now(CLOCK_MONOTONIC) - sys_now(CLOCK_MONOTONIC);
    std::unique_lock lk(mu);
    phase = 1;
    cv.notify_all();
    cv.wait(lk, [&] { return phase == 2; });
  });
  std::thread other([&] {
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return phase == 1; });
    }
    for (clockid_t id : {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME})
      EXPECT_NEAR(static_cast<double>(libc_now(id) - sys_now(id)), 0.0, 50.0 * kMs) << id;
    EXPECT_NEAR(static_cast<double>(steady_now() - sys_now(CLOCK_MONOTONIC)), 0.0, 50.0 * kMs);
    std::lock_guard lk(mu);
    phase = 2;
    cv.notify_all();
  });
  gpu.join();
  other.join();
  if (expect_virtual())
    EXPECT_GT(gpu_lead, elapsed / 2) << "the GPU thread's clock should lead the real one";
  else
    EXPECT_NEAR(static_cast<double>(gpu_lead), 0.0, 50.0 * kMs);
}

// (c) Readings never go back, across the switch to virtual time and after it; the switch does
// not jump forward either.
// The driver's own reading of the calling thread's virtual clock, seconds (its clock table,
// contracts/vgpu_clock_table.h): absolute, where the shim's readings start from the real clock.
double driver_virtual_seconds() {
  const void* table = nullptr;
  CUuuid id;
  std::memcpy(id.bytes, vgpu::darkapi::kVgpuClockTableUuid, sizeof id.bytes);
  if (cuGetExportTable(&table, &id) != CUDA_SUCCESS || table == nullptr) return -1;
  auto now = reinterpret_cast<int (*)(double*)>(const_cast<void*>(static_cast<const void* const*>(table)[1]));
  double t = -1;
  return now(&t) == 0 ? t : -1;
}

// (c) Work handed between threads through a condition variable carries virtual time
// (vclock/handoff.h): a thread that keeps virtual time and wakes from a signal goes on from the
// virtual time of the thread that signalled, as PyTorch's main thread does from its autograd
// thread at the end of backward(). Both waits: the untimed one and one with a timeout. Without
// the shim nothing is handed over.
TEST(VirtualClock, AWokenThreadGoesOnFromItsSignaller) {
  if (expect_virtual()) {
    // ThreadSanitizer's runtime comes first in LD_PRELOAD and intercepts condition variables
    // itself, then calls the C library's directly: the shim never sees them there.
    Dl_info where{};
    if (dladdr(dlsym(RTLD_DEFAULT, "pthread_cond_wait"), &where) == 0 || where.dli_fname == nullptr ||
        std::strstr(where.dli_fname, "libvgpu-vclock.so") == nullptr)
      GTEST_SKIP() << "pthread_cond_wait resolves to " << (where.dli_fname ? where.dli_fname : "?")
                   << ", not the shim (a sanitizer runtime intercepts it first)";
  }
  for (const bool timed : {false, true}) {
    std::mutex mu;
    std::condition_variable cv;
    int phase = 0;  // 1: the waiter keeps virtual time and waits; 2: signalled
    double signaller_at = 0, waiter_before = 0, waiter_at = 0;
    std::thread waiter([&] {
      Work w;
      w.first_submission();
      waiter_before = driver_virtual_seconds();
      std::unique_lock lk(mu);
      phase = 1;
      cv.notify_all();
      if (timed)
        cv.wait_for(lk, std::chrono::seconds(60), [&] { return phase == 2; });
      else
        cv.wait(lk, [&] { return phase == 2; });
      waiter_at = driver_virtual_seconds();
    });
    std::thread signaller([&] {
      Work w;
      w.first_submission();
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return phase == 1; });
      }
      w.long_kernel();
      signaller_at = driver_virtual_seconds();
      std::lock_guard lk(mu);
      phase = 2;
      cv.notify_all();
    });
    signaller.join();
    waiter.join();
    ASSERT_GE(waiter_before, 0);
    ASSERT_GT(signaller_at, waiter_before + 3.0) << "the signaller's clock leads by its kernel";
    if (expect_virtual())
      EXPECT_GE(waiter_at, signaller_at) << "timed " << timed << ": the waiter went on from before its signaller";
    else
      EXPECT_LT(waiter_at, waiter_before + 1.0) << "timed " << timed << ": handed over without the shim";
  }
}

TEST(VirtualClock, ReadingsAreMonotonicAcrossTheSwitch) {
  on_new_thread([] {
    int64_t last[kReaderCount];
    for (int i = 0; i < kReaderCount; ++i) last[i] = kReaders[i].read();
    auto check = [&](const char* when) {
      for (int i = 0; i < kReaderCount; ++i) {
        const int64_t r = kReaders[i].read();
        EXPECT_GE(r, last[i]) << kReaders[i].name << " went back " << when;
        last[i] = r;
      }
    };
    check("before any driver call");
    Work w;
    check("after the context was made current");
    const int64_t mono_before = libc_now(CLOCK_MONOTONIC);
    w.first_submission();
    const int64_t mono_after = libc_now(CLOCK_MONOTONIC);
    EXPECT_LT(mono_after - mono_before, 100 * kMs) << "the switch jumped forward";
    check("after the first submission");
    w.long_kernel();
    check("after the long kernel");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    check("after a sleep");
    w.long_kernel();
    check("after a second long kernel");
  });
}

// The virtual clock counts the thread's CPU time and the GPU work it waits for; a sleep is
// neither (README: the rule and its limits).
TEST(VirtualClock, SleepingDoesNotAdvanceTheVirtualClock) {
  on_new_thread([] {
    Work w;
    w.first_submission();
    const int64_t t0 = libc_now(CLOCK_MONOTONIC);
    const int64_t real0 = sys_now(CLOCK_MONOTONIC);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t d = libc_now(CLOCK_MONOTONIC) - t0;
    const int64_t real = sys_now(CLOCK_MONOTONIC) - real0;
    ASSERT_GE(real, 190 * kMs);
    if (expect_virtual())
      EXPECT_LT(d, 100 * kMs);
    else
      EXPECT_GE(d, 190 * kMs);
  });
}

// Waits with an absolute deadline computed from the thread's (virtual) readings last their real
// timeout: not 0, and not the 4 s the thread's clock leads the real one by.
TEST(VirtualClock, AbsoluteDeadlinesWaitTheirRealDuration) {
  on_new_thread([] {
    Work w;
    w.first_submission();
    libc_now(CLOCK_MONOTONIC);  // the switch
    w.long_kernel();
    const int64_t lead = libc_now(CLOCK_MONOTONIC) - sys_now(CLOCK_MONOTONIC);
    if (expect_virtual()) {
      ASSERT_GT(lead, 2000 * kMs) << "the thread's readings should lead";
    }
    const int64_t timeout = 100 * kMs;
    auto deadline = [&](clockid_t id) {
      const int64_t t = libc_now(id) + timeout;
      return timespec{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
    };
    auto timed = [&](const char* what, const std::function<void()>& wait) {
      const int64_t r0 = sys_now(CLOCK_MONOTONIC);
      wait();
      const int64_t real = sys_now(CLOCK_MONOTONIC) - r0;
      EXPECT_GE(real, timeout - 10 * kMs) << what;
      EXPECT_LT(real, 1500 * kMs) << what;
    };
    timed("clock_nanosleep MONOTONIC", [&] {
      const timespec d = deadline(CLOCK_MONOTONIC);
      EXPECT_EQ(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, nullptr), 0);
    });
    timed("clock_nanosleep REALTIME", [&] {
      const timespec d = deadline(CLOCK_REALTIME);
      EXPECT_EQ(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &d, nullptr), 0);
    });
    timed("sem_timedwait", [&] {
      sem_t sem;
      sem_init(&sem, 0, 0);
      const timespec d = deadline(CLOCK_REALTIME);
      EXPECT_EQ(sem_timedwait(&sem, &d), -1);
      EXPECT_EQ(errno, ETIMEDOUT);
      sem_destroy(&sem);
    });
    timed("sem_clockwait", [&] {
      sem_t sem;
      sem_init(&sem, 0, 0);
      const timespec d = deadline(CLOCK_MONOTONIC);
      EXPECT_EQ(sem_clockwait(&sem, CLOCK_MONOTONIC, &d), -1);
      sem_destroy(&sem);
    });
#if !defined(__SANITIZE_THREAD__)
    // TSan's interceptor reaches the C library's pthread_cond_timedwait by its symbol version
    // (dlvsym), past the shim's unversioned definition (README: limits).
    timed("pthread_cond_timedwait", [&] {
      pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
      pthread_cond_t c = PTHREAD_COND_INITIALIZER;
      pthread_mutex_lock(&m);
      const timespec d = deadline(CLOCK_REALTIME);
      EXPECT_EQ(pthread_cond_timedwait(&c, &m, &d), ETIMEDOUT);
      pthread_mutex_unlock(&m);
    });
#endif
    timed("condition_variable::wait_for", [&] {
      std::mutex m;
      std::condition_variable c;
      std::unique_lock lk(m);
      c.wait_for(lk, std::chrono::milliseconds(100));
    });
    std::timed_mutex held;
    std::mutex gate_mu;
    std::condition_variable gate;
    int stage = 0;  // 1: `held` is locked by the holder; 2: the holder may unlock it
    std::thread holder([&] {
      held.lock();
      std::unique_lock lk(gate_mu);
      stage = 1;
      gate.notify_all();
      gate.wait(lk, [&] { return stage == 2; });
      held.unlock();
    });
    {
      std::unique_lock lk(gate_mu);
      gate.wait(lk, [&] { return stage == 1; });
    }
    timed("timed_mutex::try_lock_for", [&] {
      EXPECT_FALSE(held.try_lock_for(std::chrono::milliseconds(100)));
    });
    {
      std::lock_guard lk(gate_mu);
      stage = 2;
      gate.notify_all();
    }
    holder.join();
  });
}

// A forked child has no driver: it goes on from the parent's readings at real speed.
TEST(VirtualClock, ForkedChildGoesOnAtRealSpeed) {
  on_new_thread([] {
    Work w;
    w.first_submission();
    libc_now(CLOCK_MONOTONIC);  // the switch
    w.long_kernel();
    const int64_t parent = libc_now(CLOCK_MONOTONIC);
    if (expect_virtual()) {
      ASSERT_GT(parent - sys_now(CLOCK_MONOTONIC), 2000 * kMs);
    }
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int64_t r0 = libc_now(CLOCK_MONOTONIC);
      const timespec pause{0, 100 * kMs};
      nanosleep(&pause, nullptr);
      const int64_t d = libc_now(CLOCK_MONOTONIC) - r0;
      _exit(r0 < parent ? 1 : d < 90 * kMs ? 2 : d > 1500 * kMs ? 3 : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: went back, 2: not at real speed, 3: too slow";
  });
}

// The driver's clock table itself (contracts/vgpu_clock_table.h), preloaded or not.
TEST(VirtualClock, DriverServesTheClockTable) {
  Gpu::get();
  const void* table = nullptr;
  CUuuid id;
  std::memcpy(id.bytes, vgpu::darkapi::kVgpuClockTableUuid, sizeof id.bytes);
  OK(cuGetExportTable(&table, &id));
  ASSERT_NE(table, nullptr);
  const auto* slots = static_cast<const void* const*>(table);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slots[0]), 4 * sizeof(void*));
  auto version = reinterpret_cast<int (*)()>(const_cast<void*>(slots[2]));
  EXPECT_EQ(version(), 2);
  auto now = reinterpret_cast<int (*)(double*)>(const_cast<void*>(slots[1]));
  auto handoff = reinterpret_cast<int (*)(double)>(const_cast<void*>(slots[3]));
  EXPECT_EQ(now(nullptr), -1);
  on_new_thread([&] {
    double t = -7;
    EXPECT_EQ(now(&t), -1) << "a thread that never submitted has no virtual clock";
    EXPECT_EQ(t, -7);
    EXPECT_EQ(handoff(1e3), -1) << "nor is one made by a hand-over";
    Work w;
    EXPECT_EQ(now(&t), -1) << "making a context current is no submission";
    w.first_submission();
    ASSERT_EQ(now(&t), 0);
    const double t0 = t;
    const int64_t elapsed = w.long_kernel();
    ASSERT_EQ(now(&t), 0);
    EXPECT_GE(t - t0, static_cast<double>(elapsed) * 1e-9 - 1e-6);
    // A hand-over moves the clock forward, never back.
    EXPECT_EQ(handoff(t + 2.0), 0);
    ASSERT_EQ(now(&t), 0);
    const double moved = t;
    EXPECT_GE(moved - t0, static_cast<double>(elapsed) * 1e-9 + 2.0 - 1e-6);
    EXPECT_EQ(handoff(t0), 0);
    ASSERT_EQ(now(&t), 0);
    EXPECT_GE(t, moved);
  });
}

}  // namespace
