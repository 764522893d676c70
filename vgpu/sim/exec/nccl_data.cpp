#include "sim/exec/nccl_data.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/settings.h"
#include "sim/exec/nccl_reduce.h"
#include "sim/memory/memory.h"

namespace vgpu {
namespace {

// As long as the timing rendezvous waits for a rank (nccl_collectives.cpp).
constexpr double kRankTimeoutS = 600;

}  // namespace

using nccl_data::combine;
using nccl_data::field;
using nccl_data::sizes;

NcclData::NcclData(MemoryManager& memory, std::string dir) : memory_(memory), exchange_(std::move(dir)) {}

std::function<void()> NcclData::mover(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int nranks,
                                      int rank, Op op) {
  if (plugin == nullptr || plugin->launch_tasks == nullptr || tag == 0 || nranks < 1) return {};
  if (settings::integer(settings::Id::sim_nccl_data_bytes) <= 0) return {};
  uint64_t seq = 0;
  {
    std::lock_guard l(mu_);
    seq = seq_[{comm, rank}]++;
  }
  return [this, plugin, tag, comm, seq, nranks, rank, op] { move(plugin, tag, comm, seq, nranks, rank, op); };
}

bool NcclData::tasks_of(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int rank,
                        std::vector<vgpu_nccl_task>* out) {
  // NCCL starts the launch's task events right after the launch returned (or from its host
  // stream): wait for the plan's event to end.
  out->assign(VGPU_NCCL_MAX_TASKS, vgpu_nccl_task{});
  int count = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTasksTimeoutS);
  auto pause = std::chrono::microseconds(10);
  int got = 0;
  while ((got = plugin->launch_tasks(tag, out->data(), VGPU_NCCL_MAX_TASKS, &count)) == 0 &&
         !tasks_unknown_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  if (got != 1) {
    if (got == 0) tasks_unknown_.store(true, std::memory_order_relaxed);
    log::once(log::Level::warn, "sim-nccl-data-tasks",
              fmt::format("sim nccl: NCCL's profiler did not tell the buffers of launch {} (rank {} of comm {:x}): "
                          "its collectives move no data (nor, from now on, those whose tasks are not known at once)",
                          tag, rank, comm));
    return false;
  }
  out->resize(count);
  return true;
}

std::function<void()> NcclData::p2p_mover(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm,
                                          int rank) {
  if (plugin == nullptr || plugin->launch_tasks == nullptr || tag == 0 || rank < 0) return {};
  if (settings::integer(settings::Id::sim_nccl_data_bytes) <= 0) return {};
  return [this, plugin, tag, comm, rank] { move_p2p(plugin, tag, comm, rank); };
}

void NcclData::move_p2p(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int rank) {
  std::vector<vgpu_nccl_task> tasks;
  if (!tasks_of(plugin, tag, comm, rank, &tasks)) return;
  const auto limit = static_cast<uint64_t>(settings::integer(settings::Id::sim_nccl_data_bytes));
  auto bytes_of = [](const vgpu_nccl_task& t) {
    vgpu_nccl_task as = t;  // sizes() knows a copy's size by its datatype: an all-gather of one rank
    std::strncpy(as.func, "AllGather", sizeof as.func);
    size_t post = 0, recv = 0;
    return sizes(as, 1, 0, &post, &recv) ? post : size_t{0};
  };
  // Sends first, without waiting (the receives of this launch may wait for the peers' sends).
  std::vector<std::vector<char>> to_self;
  for (const vgpu_nccl_task& t : tasks) {
    if (field(t.func, sizeof t.func) != "Send") continue;
    const size_t n = bytes_of(t);
    if (n == 0 || n > limit || t.peer < 0) continue;
    std::vector<char> data(n);
    auto at = memory_.resolve(reinterpret_cast<CUdeviceptr>(t.send), n);
    if (at) std::memcpy(data.data(), at->host, n);
    else data.clear();  // the receiver sees a message of the wrong size and keeps its buffer
    if (t.peer == rank) {
      to_self.push_back(std::move(data));
      continue;
    }
    uint64_t k = 0;
    {
      std::lock_guard l(mu_);
      k = sent_[{comm, rank, t.peer}]++;
    }
    exchange_.send(comm, rank, t.peer, k, data.data(), data.size());
  }
  size_t self = 0;
  for (const vgpu_nccl_task& t : tasks) {
    if (field(t.func, sizeof t.func) != "Recv") continue;
    const size_t n = bytes_of(t);
    if (n == 0 || n > limit || t.peer < 0) continue;
    std::vector<char> data;
    if (t.peer == rank) {
      if (self >= to_self.size()) continue;
      data = std::move(to_self[self++]);
    } else {
      uint64_t k = 0;
      {
        std::lock_guard l(mu_);
        k = received_[{comm, t.peer, rank}]++;
      }
      if (!exchange_.receive(comm, t.peer, rank, k, kRankTimeoutS, &data)) continue;
    }
    if (data.size() != n ||
        !memory_.store(reinterpret_cast<CUdeviceptr>(t.recv), data.data(), n, MemoryManager::DeviceWrite::nccl)) {
      log::once(log::Level::warn, "sim-nccl-data-p2p",
                fmt::format("sim nccl: a message of {} B from rank {} to rank {} of comm {:x} could not be "
                            "delivered (sizes differ, or a buffer is not memory of this process)",
                            n, t.peer, rank, comm));
      continue;
    }
  }
}

void NcclData::move(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, uint64_t seq, int nranks,
                    int rank, Op op) {
  std::vector<vgpu_nccl_task> tasks;
  if (!tasks_of(plugin, tag, comm, rank, &tasks)) {
    exchange_.abandon(comm, seq, rank);  // the other ranks need not wait for this one's parts
    return;
  }
  const int count = static_cast<int>(tasks.size());
  const auto limit = static_cast<uint64_t>(settings::integer(settings::Id::sim_nccl_data_bytes));
  for (int i = 0; i < count; ++i) {
    const vgpu_nccl_task& t = tasks[i];
    size_t post = 0, recv = 0;
    if (!sizes(t, nranks, rank, &post, &recv)) continue;  // send/recv, or a datatype not known
    // Every rank decides alike: the largest part any rank posts.
    size_t largest = 0;
    for (int r = 0; r < nranks && largest <= limit; ++r) {
      size_t p = 0, ignored = 0;
      if (sizes(t, nranks, r, &p, &ignored)) largest = std::max(largest, p);
    }
    if (largest > limit) {
      log::debug("sim nccl: {} of {} B per rank on comm {:x}: above VGPU_SIM_NCCL_DATA_BYTES, timed only",
                 field(t.func, sizeof t.func), largest, comm);
      continue;
    }
    std::vector<char> mine(post);
    if (post > 0) {
      auto at = memory_.resolve(reinterpret_cast<CUdeviceptr>(t.send), post);
      if (at) {
        std::memcpy(mine.data(), at->host, post);
      } else {
        log::once(log::Level::warn, "sim-nccl-data-send",
                  fmt::format("sim nccl: the send buffer {} of a {} is not memory of this process: its "
                              "collective moves no data", t.send, field(t.func, sizeof t.func)));
        mine.clear();  // posted empty: every rank then leaves its buffers
      }
    }
    if (!exchange_.post(comm, seq, i, rank, mine.data(), mine.size())) {
      exchange_.abandon(comm, seq, rank);
      return;
    }
    std::vector<std::vector<char>> parts;
    if (!exchange_.collect(comm, seq, i, nranks, kRankTimeoutS, &parts)) return;
    exchange_.done(comm, seq, rank);
    if (recv == 0) continue;
    std::vector<char> result(recv);
    if (!combine(t, nranks, rank, op, parts, result.data(), recv)) {
      log::once(log::Level::warn, "sim-nccl-data-combine",
                fmt::format("sim nccl: a {} of comm {:x} could not be computed (a rank's part is missing, or "
                            "its reduction/datatype is not handled): its recv buffers keep what they held",
                            field(t.func, sizeof t.func), comm));
      continue;
    }
    if (!memory_.store(reinterpret_cast<CUdeviceptr>(t.recv), result.data(), recv,
                       MemoryManager::DeviceWrite::nccl)) {
      log::once(log::Level::warn, "sim-nccl-data-recv",
                fmt::format("sim nccl: the recv buffer {} of a {} is not memory of this process", t.recv,
                            field(t.func, sizeof t.func)));
      continue;
    }
  }
}

}  // namespace vgpu
