#include "sim/exec/nccl_rendezvous.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "common/log.h"
#include "status/status_region.h"

namespace vgpu {

struct NcclRendezvous::CommBlock {
  struct Slot {
    std::atomic<uint32_t> posted;  // collectives this rank posted; the futex word
    std::atomic<uint64_t> arrival[kRing];  // bits of a double, index k % kRing
    // The rank's global GPU + 1 once posted (by arrive() or roster()); 0: not yet.
    std::atomic<int32_t> gpu;
  };
  std::atomic<uint64_t> comm;  // 0: free
  std::atomic<int32_t> nranks;
  int32_t pad;
  Slot slot[kMaxRanks];
};

struct NcclRendezvous::Table {
  std::atomic<uint64_t> layout;  // kLayout once the first process set it up
  uint64_t pad;
  CommBlock comm[kMaxComms];
};

namespace {

constexpr uint64_t kLayout = 0x76677075'6e63'0004ull;  // "vgpunc", version 4 (1024 communicators; 3: 64)

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "the table is shared between processes: its atomics must not be locks");

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, double seconds) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - ts.tv_sec) * 1e9);
  // Shared mapping: FUTEX_WAIT (not _PRIVATE) so that wakes from other processes reach it.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string safe_name(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out;
}

}  // namespace

std::string NcclRendezvous::default_path() {
  return "/dev/shm/vgpu-nccl-" + std::to_string(getuid()) + "-" + safe_name(status::current_job_id());
}

NcclRendezvous::NcclRendezvous(std::string path) : path_(std::move(path)) {}

NcclRendezvous::~NcclRendezvous() {
  if (table_ != nullptr) munmap(table_, size_);
}

NcclRendezvous::CommBlock* NcclRendezvous::block(uint64_t comm, int nranks) {
  if (!tried_) {
    tried_ = true;
    if (path_.empty()) path_ = default_path();
    // Only this user's file: O_NOFOLLOW, mode 0600, and its owner checked.
    const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat st{};
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != getuid()) {
      log::warn("sim nccl: cannot open {} ({}): NCCL kernels are timed from the ranks of this process only",
                path_, std::strerror(errno));
      if (fd >= 0) close(fd);
      return nullptr;
    }
    // Sparse: pages exist only for the communicators and ranks in use.
    if (static_cast<size_t>(st.st_size) < sizeof(Table) && ftruncate(fd, sizeof(Table)) != 0) {
      log::warn("sim nccl: cannot size {}: {}", path_, std::strerror(errno));
      close(fd);
      return nullptr;
    }
    void* p = mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      log::warn("sim nccl: cannot map {}: {}", path_, std::strerror(errno));
      return nullptr;
    }
    table_ = static_cast<Table*>(p);
    size_ = sizeof(Table);
    uint64_t expected = 0;
    if (!table_->layout.compare_exchange_strong(expected, kLayout) && expected != kLayout) {
      log::warn("sim nccl: {} has another layout: NCCL kernels are timed from the ranks of this process only", path_);
      munmap(table_, size_);
      table_ = nullptr;
      return nullptr;
    }
  }
  if (table_ == nullptr || comm == 0 || nranks > kMaxRanks) return nullptr;
  if (auto it = blocks_.find(comm); it != blocks_.end()) return it->second;
  for (int i = 0; i < kMaxComms; ++i) {
    CommBlock& b = table_->comm[(comm + i) % kMaxComms];
    uint64_t expected = 0;
    if (b.comm.compare_exchange_strong(expected, comm) || expected == comm) {
      b.nranks.store(nranks);
      return blocks_[comm] = &b;
    }
  }
  log::once(log::Level::warn, "sim-nccl-rendezvous-full",
            fmt::format("sim nccl: more than {} communicators in this job: the later ones are timed from "
                        "the ranks of their own process only", kMaxComms));
  return blocks_[comm] = nullptr;
}

NcclRendezvous::Arrivals NcclRendezvous::arrive(uint64_t comm, int nranks, int rank, int gpu, double arrival,
                                                bool wait, double timeout_s) {
  return collect(comm, nranks, rank, gpu, arrival, post(comm, nranks, rank, gpu, arrival), wait, timeout_s);
}

uint64_t NcclRendezvous::post(uint64_t comm, int nranks, int rank, int gpu, double arrival) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return 0;
  CommBlock* b = nullptr;
  uint64_t k = 0;
  {
    std::lock_guard l(mu_);
    b = block(comm, nranks);
    if (b == nullptr) return 0;
    k = posted_[{comm, rank}]++;
  }
  auto& mine = b->slot[rank];
  mine.gpu.store(gpu + 1, std::memory_order_relaxed);
  mine.arrival[k % kRing].store(std::bit_cast<uint64_t>(arrival), std::memory_order_relaxed);
  mine.posted.store(static_cast<uint32_t>(k + 1), std::memory_order_release);
  futex_wake_all(&mine.posted);
  return k + 1;
}

NcclRendezvous::Arrivals NcclRendezvous::collect(uint64_t comm, int nranks, int rank, int gpu, double arrival,
                                                 uint64_t posted, bool wait, double timeout_s) {
  Arrivals out;
  out.latest = arrival;
  out.known = 1;
  out.gpus.assign(std::max(nranks, 1), -1);
  if (rank >= 0 && rank < nranks) out.gpus[rank] = gpu;
  out.complete = nranks == 1;
  if (nranks < 1 || rank < 0 || rank >= nranks || posted == 0) return out;
  CommBlock* b = nullptr;
  {
    std::lock_guard l(mu_);
    b = block(comm, nranks);
    if (b == nullptr) return out;
  }
  const uint64_t k = posted - 1;

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (int q = 0; q < nranks; ++q) {
    if (q == rank) continue;
    auto& s = b->slot[q];
    for (;;) {
      const uint32_t p = s.posted.load(std::memory_order_acquire);
      if (p >= k + 1) {
        const double t = std::bit_cast<double>(s.arrival[k % kRing].load(std::memory_order_relaxed));
        const int g = s.gpu.load(std::memory_order_relaxed) - 1;  // posted with the arrival
        // Posted kRing collectives further meanwhile: the slot holds a later arrival.
        if (s.posted.load(std::memory_order_acquire) <= k + kRing) {
          out.latest = std::max(out.latest, t);
          out.gpus[q] = g;
          ++out.known;
        }
        break;
      }
      if (!wait || timed_out) break;
      const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      futex_wait(&s.posted, p, std::min(left, 0.5));
    }
  }
  out.complete = out.known == nranks;
  if (timed_out)
    log::warn("sim nccl: rank {}/{} of comm {:x}: {} rank(s) did not reach collective {} within {:.0f} s: its "
              "kernel is timed from the {} known", rank, nranks, comm, nranks - out.known, k, timeout_s, out.known);
  return out;
}

std::vector<int> NcclRendezvous::roster(uint64_t comm, int nranks, int rank, int gpu) {
  std::vector<int> out(std::max(nranks, 0), -1);
  if (nranks < 1 || rank < 0 || rank >= nranks) return out;
  out[rank] = gpu;
  CommBlock* b = nullptr;
  {
    std::lock_guard l(mu_);
    b = block(comm, nranks);
  }
  if (b == nullptr || gpu < 0) return out;
  b->slot[rank].gpu.store(gpu + 1, std::memory_order_relaxed);
  for (int q = 0; q < nranks; ++q)
    if (const int posted = b->slot[q].gpu.load(std::memory_order_relaxed); posted > 0 && q != rank)
      out[q] = posted - 1;
  return out;
}

}  // namespace vgpu
