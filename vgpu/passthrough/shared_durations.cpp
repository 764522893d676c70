#include "passthrough/shared_durations.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>

#include "common/log.h"
#include "common/settings.h"
#include "module/xxhash64.h"
#include "passthrough/job_shared_file.h"
#include "status/status_region.h"

namespace vgpu::pt {
namespace {

bool sharing_enabled() {
  static const bool on = settings::text(settings::Id::measure) != "concurrent";
  return on;
}

}  // namespace

uint64_t SharedDurations::key_of(std::string_view signature) {
  // Asked on every launch, over the whole signature (~400 bytes for PyTorch's elementwise
  // launches). XXH64 reads 32 bytes a step in four independent lanes: half the instructions of
  // the standard library's hash (one serial multiply chain, 8 bytes a step; ~625 instructions on
  // a 400-byte signature) and a third of its latency. A fixed function of the bytes (seed 0), so
  // every process of the job computes the same key (a byte-at-a-time FNV-1a cost ~0.3 us on a
  // 600-byte signature).
  const uint64_t h = module::xxhash64({reinterpret_cast<const uint8_t*>(signature.data()), signature.size()});
  return h == 0 ? 1 : h;
}

std::unique_ptr<SharedDurations> SharedDurations::open(const std::string& path) {
  void* p = map_job_shared_file(path, kSlots * sizeof(Slot), "shared duration table (ranks keep their own measurements)");
  if (p == nullptr) return nullptr;
  return std::unique_ptr<SharedDurations>(new SharedDurations(static_cast<Slot*>(p)));  // zero-filled: all empty
}

SharedDurations::~SharedDurations() { munmap(slots_, kSlots * sizeof(Slot)); }

std::optional<double> SharedDurations::smallest(uint64_t key) const {
  for (size_t i = 0; i < kSlots; ++i) {
    const Slot& s = slots_[(key + i) & (kSlots - 1)];
    const uint64_t k = s.key.load(std::memory_order_acquire);
    if (k == 0) return std::nullopt;
    if (k != key) continue;
    const uint64_t ns = s.ns.load(std::memory_order_relaxed);
    if (ns == 0) return std::nullopt;  // claimed, not yet written
    return static_cast<double>(ns) * 1e-9;
  }
  return std::nullopt;
}

void SharedDurations::offer(uint64_t key, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return;
  const uint64_t ns = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(seconds * 1e9)));
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& s = slots_[(key + i) & (kSlots - 1)];
    uint64_t k = s.key.load(std::memory_order_acquire);
    if (k == 0 && s.key.compare_exchange_strong(k, key, std::memory_order_acq_rel)) k = key;
    if (k != key) continue;
    uint64_t old = s.ns.load(std::memory_order_relaxed);
    while ((old == 0 || ns < old) && !s.ns.compare_exchange_weak(old, ns, std::memory_order_relaxed)) {
    }
    return;
  }
  log::once(log::Level::warn, "shared-durations-full", "passthrough: the job's shared duration table is full");
}

SharedDurations* SharedDurationTables::of(int physical) {
  if (physical < 0 || physical >= kMaxPhysical || !sharing_enabled()) return nullptr;
  const auto i = static_cast<size_t>(physical);
  if (tried_[i].load(std::memory_order_acquire)) return tables_[i].load(std::memory_order_acquire);
  std::lock_guard l(mu_);
  if (!tried_[i].load(std::memory_order_relaxed)) {
    const std::string region = status::region_name(getuid(), status::current_job_id());
    // Released on purpose: the root that holds it is never destroyed (launches run during exit).
    tables_[i].store(region.empty() ? nullptr : SharedDurations::open(status::companion_path(region, physical)).release(),
                     std::memory_order_release);
    tried_[i].store(true, std::memory_order_release);
  }
  return tables_[i].load(std::memory_order_acquire);
}

}  // namespace vgpu::pt
