#include "passthrough/shared_durations.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>

#include "common/log.h"
#include "common/settings.h"
#include "status/status_region.h"

namespace vgpu::pt {
namespace {

bool sharing_enabled() {
  static const bool on = settings::text(settings::Id::measure) != "concurrent";
  return on;
}

}  // namespace

uint64_t SharedDurations::key_of(std::string_view signature) {
  // Asked on every launch: the standard library's hash reads 8 bytes a step (a byte-at-a-time
  // FNV-1a cost ~0.3 us on a 600-byte signature). It is unseeded, so every process of the job,
  // running this build on this machine, computes the same key.
  const uint64_t h = std::hash<std::string_view>{}(signature);
  return h == 0 ? 1 : h;
}

std::unique_ptr<SharedDurations> SharedDurations::open(const std::string& path) {
  const size_t bytes = kSlots * sizeof(Slot);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) {
    log::once(log::Level::warn, "shared-durations",
              fmt::format("passthrough: cannot open {} ({}); ranks keep their own measurements", path,
                          std::strerror(errno)));
    return nullptr;
  }
  // Accepted only as a private regular file of this user (another user may have made the name
  // first in the shared /dev/shm), judged on the opened descriptor.
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0 ||
      (static_cast<size_t>(st.st_size) != bytes && st.st_size != 0) ||
      // Allocated now (posix_fallocate, not ftruncate): a full /dev/shm then refuses the table
      // here instead of raising SIGBUS in the program at its first write.
      (st.st_size == 0 && posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0)) {
    log::once(log::Level::warn, "shared-durations",
              fmt::format("passthrough: {} is not a private table of this user; ranks keep their own "
                          "measurements", path));
    ::close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return nullptr;
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
