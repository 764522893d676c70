#include "vclock/driver_clock.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "contracts/vgpu_clock_table.h"

namespace vgpu::vclock_shim {
namespace {

using darkapi::ThreadVirtualNowFn;

enum State : int { kLooking = 0, kFound = 1, kGivenUp = 2 };

std::atomic<ThreadVirtualNowFn> g_now{nullptr};
std::atomic<darkapi::ThreadHandoffFn> g_handoff{nullptr};  // version 2 drivers
std::atomic<int> g_state{kLooking};
std::atomic<int64_t> g_next_try_ns{0};
std::atomic<bool> g_trying{false};
std::atomic<bool> g_forked{false};  // in a forked child: never a virtual clock

// The loaded objects named libcuda.so*, copied out of dl_iterate_phdr into fixed storage: the
// callback runs under the loader's lock and must not allocate. Only the thread that won
// g_trying writes here.
constexpr int kMaxCandidates = 4;
constexpr size_t kMaxPath = 1024;
struct Candidates {
  int count = 0;
  char path[kMaxCandidates][kMaxPath];
};
Candidates g_candidates;

int collect(dl_phdr_info* info, size_t, void* data) {
  auto* c = static_cast<Candidates*>(data);
  const char* name = info->dlpi_name;
  if (name == nullptr || *name == '\0' || c->count == kMaxCandidates) return 0;
  const char* slash = std::strrchr(name, '/');
  const char* base = slash ? slash + 1 : name;
  if (std::strncmp(base, "libcuda.so", 10) != 0) return 0;
  const size_t n = std::strlen(name);
  if (n >= kMaxPath) return 0;
  std::memcpy(c->path[c->count++], name, n + 1);
  return 0;
}

// The slots of a clock table this shim knows (a version-1 table has no hand-over).
struct Slots {
  ThreadVirtualNowFn now = nullptr;
  darkapi::ThreadHandoffFn handoff = nullptr;
};
Slots slots_of(const void* table) {
  if (table == nullptr) return {};
  const auto* slots = static_cast<const void* const*>(table);
  const auto size = reinterpret_cast<uintptr_t>(slots[darkapi::kClockSlotSize]);
  if (size < darkapi::kClockTableSlotsV1 * sizeof(void*)) return {};
  auto version = reinterpret_cast<darkapi::ClockTableVersionFn>(
      const_cast<void*>(slots[darkapi::kClockSlotVersion]));
  const int v = version == nullptr ? 0 : version();
  if (v < 1) return {};
  Slots out;
  out.now = reinterpret_cast<ThreadVirtualNowFn>(const_cast<void*>(slots[darkapi::kClockSlotThreadVirtualNow]));
  if (v >= 2 && size >= darkapi::kClockTableSlots * sizeof(void*))
    out.handoff = reinterpret_cast<darkapi::ThreadHandoffFn>(const_cast<void*>(slots[darkapi::kClockSlotThreadHandoff]));
  return out;
}

// Takes the table's slots as the driver's clock unless one was taken already.
bool adopt(Slots slots) {
  ThreadVirtualNowFn expected = nullptr;
  if (slots.now == nullptr || !g_now.compare_exchange_strong(expected, slots.now)) return false;
  g_handoff.store(slots.handoff, std::memory_order_release);
  g_state.store(kFound, std::memory_order_release);
  return true;
}

// The table of one loaded libcuda, taken when it is vgpu's; its dlopen reference is kept then.
bool try_library(const char* path) {
  void* h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  using GetExportTable = int (*)(const void**, const void*);
  auto get = reinterpret_cast<GetExportTable>(dlsym(h, "cuGetExportTable"));
  const void* table = nullptr;
  if (get != nullptr && get(&table, darkapi::kVgpuClockTableUuid) == 0 && adopt(slots_of(table)))
    return true;
  dlclose(h);
  return false;
}

void look(int64_t now_ns) {
  if (now_ns < g_next_try_ns.load(std::memory_order_relaxed)) return;
  bool expected = false;
  if (!g_trying.compare_exchange_strong(expected, true, std::memory_order_acquire)) return;
  g_next_try_ns.store(now_ns + kRetryNs, std::memory_order_relaxed);
  g_candidates.count = 0;
  dl_iterate_phdr(collect, &g_candidates);
  bool found = false;
  for (int i = 0; i < g_candidates.count && !found; ++i) found = try_library(g_candidates.path[i]);
  // A libcuda that is not vgpu's will not become vgpu's later.
  if (!found && g_candidates.count > 0) {
    int looking = kLooking;
    g_state.compare_exchange_strong(looking, kGivenUp);
  }
  g_trying.store(false, std::memory_order_release);
}

}  // namespace

int driver_virtual_now(int64_t real_monotonic_ns, double* seconds) {
  if (g_forked.load(std::memory_order_relaxed)) return darkapi::kClockNone;
  int state = g_state.load(std::memory_order_acquire);
  if (state == kLooking) {
    look(real_monotonic_ns);
    state = g_state.load(std::memory_order_acquire);
  }
  if (state != kFound) return darkapi::kClockNone;
  ThreadVirtualNowFn now = g_now.load(std::memory_order_acquire);
  if (now == nullptr) return darkapi::kClockNone;
  const int answer = now(seconds);
  return answer == darkapi::kClockVirtual || answer == darkapi::kClockRealForNow
             ? answer
             : darkapi::kClockNone;
}

bool driver_handoff(double seconds) {
  if (g_forked.load(std::memory_order_relaxed) || g_state.load(std::memory_order_acquire) != kFound) return false;
  darkapi::ThreadHandoffFn handoff = g_handoff.load(std::memory_order_acquire);
  return handoff != nullptr && handoff(seconds) == darkapi::kClockVirtual;
}

void forget_driver_after_fork() { g_forked.store(true, std::memory_order_relaxed); }

}  // namespace vgpu::vclock_shim

extern "C" void vgpu_vclock_attach(const void* table) {
  using namespace vgpu::vclock_shim;
  if (g_forked.load(std::memory_order_relaxed)) return;
  // Pin the library that holds the table (the driver calls this from its constructor, under
  // the loader's recursive lock: a NOLOAD dlopen of itself is allowed there).
  Dl_info info{};
  void* h = nullptr;
  if (dladdr(table, &info) != 0 && info.dli_fname != nullptr)
    h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!adopt(slots_of(table)) && h != nullptr) dlclose(h);
}
