#include "passthrough/nccl_gate_table.h"

#include <cstring>

#include <fmt/format.h>

#include "common/log.h"

namespace vgpu::pt::nccl_gate {
namespace {

bool is_point_to_point(const char* func) {
  return std::strncmp(func, "Send", 4) == 0 || std::strncmp(func, "Recv", 4) == 0;
}

}  // namespace

Table::Row* Table::row_of(uint64_t comm) {
  if (comm == 0) return nullptr;
  for (int i = 0; i < kComms; ++i) {
    Row& r = rows_[(comm + static_cast<uint64_t>(i)) % kComms];
    uint64_t seen = r.comm.load(std::memory_order_acquire);
    if (seen == 0 && r.comm.compare_exchange_strong(seen, comm, std::memory_order_acq_rel)) return &r;
    if (seen == comm) return &r;
  }
  log::once(log::Level::warn, "nccl-gate-full", "passthrough: VGPU_NCCL_GATE: more communicators than the gate follows");
  return nullptr;
}

Table::Plan Table::plan(const vgpu_nccl_launch& w, double now) {
  if (w.count <= 0 || w.nranks < 2 || w.nranks > kRanks || w.rank < 0 || w.rank >= w.nranks) return {};
  for (int i = 0; i < w.count && i < VGPU_NCCL_MAX_OPERATIONS; ++i)
    if (is_point_to_point(w.op[i].func)) return {};
  Row* row = row_of(w.comm_id);
  if (row == nullptr || row->released.load(std::memory_order_acquire) != 0) return {};
  Plan p;
  {
    std::lock_guard l(mu_);
    p.value = ++launches_[{w.comm_id, w.rank}];
    waiting_[{w.comm_id, w.rank}] = Waiting{row, w.nranks, p.value, now};
  }
  p.mine = &row->count[w.rank];
  for (int r = 0; r < w.nranks; ++r)
    if (r != w.rank) p.peers.push_back(&row->count[r]);
  return p;
}

void Table::arrive(uint32_t* count, uint32_t value) {
  uint32_t seen = __atomic_load_n(count, __ATOMIC_ACQUIRE);
  while (seen < value && !__atomic_compare_exchange_n(count, &seen, value, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
  }
}

std::vector<std::string> Table::release_stalled(double now, double limit) {
  std::vector<std::string> released;
  std::lock_guard l(mu_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const auto& [key, w] = *it;
    bool behind = false;
    for (int r = 0; r < w.nranks && !behind; ++r) behind = __atomic_load_n(&w.row->count[r], __ATOMIC_ACQUIRE) < w.value;
    if (!behind || w.row->released.load(std::memory_order_acquire) != 0) {
      it = waiting_.erase(it);  // every peer arrived (or another process let the row go)
      continue;
    }
    if (now - w.since <= limit) {
      ++it;
      continue;
    }
    std::string counts;  // as they stood when let go
    for (int r = 0; r < w.nranks; ++r)
      counts += fmt::format("{}{}", r == 0 ? "" : " ", __atomic_load_n(&w.row->count[r], __ATOMIC_ACQUIRE));
    w.row->released.store(1, std::memory_order_release);
    for (int r = 0; r < kRanks; ++r) arrive(&w.row->count[r], UINT32_MAX);
    released.push_back(fmt::format("communicator {:#x}: rank {} waited {:.1f} s for its collective #{}; the ranks' "
                                   "counts: {}",
                                   key.first, key.second, now - w.since, w.value, counts));
    it = waiting_.erase(it);
  }
  return released;
}

}  // namespace vgpu::pt::nccl_gate
