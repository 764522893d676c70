#include "vclock/handoff.h"

#include <atomic>
#include <cstdint>

#include "vclock/job_clock.h"

namespace vgpu::vclock_shim::handoff {
namespace {

// One entry: which condition variable, and the virtual time its last signaller was at. A
// sequence word (odd while written) keeps the pair consistent for readers without a lock.
struct Entry {
  std::atomic<uint32_t> seq{0};
  std::atomic<uintptr_t> cond{0};
  std::atomic<double> seconds{0};
};

constexpr size_t kEntries = 4096;  // power of two
Entry g_entries[kEntries];

Entry& entry_of(const void* cond) {
  auto h = reinterpret_cast<uintptr_t>(cond);
  h ^= h >> 17;
  h *= 0x9E3779B97F4A7C15ull;
  return g_entries[(h >> 40) & (kEntries - 1)];
}

}  // namespace

void signalled(const void* cond) {
  double now = 0;
  if (cond == nullptr || !job_virtual_seconds(&now)) return;
  Entry& e = entry_of(cond);
  uint32_t s = e.seq.load(std::memory_order_relaxed);
  // Writers take the entry by making its sequence odd; a busy entry is skipped (another thread
  // is signalling there at this very moment: its time is as current as ours).
  if ((s & 1) != 0 || !e.seq.compare_exchange_strong(s, s + 1, std::memory_order_acquire)) return;
  e.cond.store(reinterpret_cast<uintptr_t>(cond), std::memory_order_relaxed);
  e.seconds.store(now, std::memory_order_relaxed);
  e.seq.store(s + 2, std::memory_order_release);
}

void woke(const void* cond) {
  if (cond == nullptr) return;
  Entry& e = entry_of(cond);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint32_t before = e.seq.load(std::memory_order_acquire);
    if ((before & 1) != 0) continue;
    const uintptr_t which = e.cond.load(std::memory_order_relaxed);
    const double seconds = e.seconds.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != before) continue;
    if (which == reinterpret_cast<uintptr_t>(cond)) job_handoff(seconds);
    return;
  }
}

}  // namespace vgpu::vclock_shim::handoff
