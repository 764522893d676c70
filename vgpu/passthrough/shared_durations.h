// Kernel durations shared by the processes of one job on one physical GPU.
//
// When ranks are processes on one GPU, each measures its launches while the others' work is
// resident: CUDA time-slices the contexts, so a kernel measured while another rank's kernel
// (above all an NCCL kernel spinning on a peer that has not arrived yet) holds the GPU reads
// its duration plus the other's slices. Measured on 2 H200s (2026-11-26, DDP GPT-2, VGPU_TIMELINE):
// the rank that lags behind read its backward GEMMs 4.5 ms per step slower than the rank ahead,
// the whole step 56.6 ms of kernels against 47.3 ms, which made the step 24-38% slow.
//
// Disturbance only adds time, so of the settled durations (launch_policy.h: each process's median
// of its samples) that the job's processes measured for one signature on one physical GPU, the
// smallest is the one least disturbed. Each process offers its settled durations here and every
// launch takes the smallest offered so far (never more than its own), so the ranks of a job agree
// on every kernel they share after a few steps, at what the least disturbed of them measured.
// Ranks' exact signatures rarely meet, though (their by-value bytes hold each process's stack
// garbage), so where several virtual devices share the GPU every measured sample is also offered
// under the launch's work key (signature_work_key, launch_signature.h), which launch_api.cpp
// reads beside the exact key: the same table holds both kinds of key.
//
// The table is a file in /dev/shm beside the job's status region (status_region.h), private to
// the user (checked on the opened descriptor, as the status region is) and removed with it: an
// open-addressing hash table of 64-bit signature hashes and nanoseconds, updated with atomics
// (no lock, any number of processes). VGPU_MEASURE=concurrent turns sharing off with the
// measurement lock (measure_lock.h).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace vgpu::pt {

class SharedDurations {
 public:
  static constexpr size_t kSlots = size_t{1} << 16;  // 1 MiB; a step of GPT-2 has ~300 signatures

  // Opens (creating if needed) the table at `path`; nullptr when it is not a private regular
  // file of the user or cannot be mapped (one log line says why).
  static std::unique_ptr<SharedDurations> open(const std::string& path);
  ~SharedDurations();
  SharedDurations(const SharedDurations&) = delete;
  SharedDurations& operator=(const SharedDurations&) = delete;

  // The key of a launch signature (XXH64 of its bytes, launch_signature.h); never 0 (0 becomes 1).
  static uint64_t key_of(std::string_view signature);

  // The key under which a duration one process *settled* for work key `work` is offered (raw
  // samples go under `work` itself): a rank whose exact signature differs (its stack garbage,
  // its buffers) takes it instead of measuring the same work again. Never 0, never `work`.
  static uint64_t settled_work_key(uint64_t work) {
    const uint64_t k = (work ^ 0x5e771edf00d5eedbULL) * 0x9e3779b97f4a7c15ULL;
    return k == 0 || k == work ? k + 1 : k;
  }

  // The smallest duration offered for `key`, in seconds.
  std::optional<double> smallest(uint64_t key) const;
  // Offers a settled duration; the table keeps the smallest. A full table keeps what it has.
  void offer(uint64_t key, double seconds);

 private:
  struct Slot {
    std::atomic<uint64_t> key;
    std::atomic<uint64_t> ns;  // 0: none yet
  };
  static_assert(sizeof(Slot) == 16 && std::atomic<uint64_t>::is_always_lock_free);
  explicit SharedDurations(Slot* slots) : slots_(slots) {}
  Slot* slots_;
};

// The process's tables, one per physical GPU (held by the backend root, passthrough.h).
class SharedDurationTables {
 public:
  static constexpr int kMaxPhysical = 64;

  // The table of physical GPU `physical` for the calling process's job (VGPU_JOB_ID, else the
  // session: status_region.h); nullptr when sharing is off or the table cannot be used. Asked on
  // every launch: once opened, one acquire load.
  SharedDurations* of(int physical);

 private:
  std::mutex mu_;  // opening
  // Never unmapped: launches may run during exit. Tried once per GPU (a failure stays nullptr).
  std::array<std::atomic<SharedDurations*>, kMaxPhysical> tables_{};
  std::array<std::atomic<bool>, kMaxPhysical> tried_{};
};

}  // namespace vgpu::pt
