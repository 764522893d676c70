#include "passthrough/nccl_gate_table.h"

#include <cstring>

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

Table::Plan Table::plan(const vgpu_nccl_launch& w) {
  if (w.count <= 0 || w.nranks < 2 || w.nranks > kRanks || w.rank < 0 || w.rank >= w.nranks) return {};
  for (int i = 0; i < w.count && i < VGPU_NCCL_MAX_OPERATIONS; ++i)
    if (is_point_to_point(w.op[i].func)) return {};
  Row* row = row_of(w.comm_id);
  if (row == nullptr) return {};
  Plan p;
  {
    std::lock_guard l(mu_);
    p.value = ++launches_[{w.comm_id, w.rank}];
  }
  p.mine = &row->count[w.rank];
  for (int r = 0; r < w.nranks; ++r)
    if (r != w.rank) p.peers.push_back(&row->count[r]);
  return p;
}

}  // namespace vgpu::pt::nccl_gate
