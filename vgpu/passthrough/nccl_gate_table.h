// The NCCL gate's counts (nccl_gate.h): which launches are gated, and on what. No CUDA here, so
// that the rule is tested alone (tests/passthrough/nccl_gate_table_test.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "contracts/nccl_plugin.h"

namespace vgpu::pt::nccl_gate {

// The job's counts (what the GPU waits on), over memory the job's processes share, and this
// process's ranks' own counts. hold() (nccl_gate.h) turns a Plan into stream waits.
class Table {
 public:
  static constexpr int kComms = 256;  // communicators of one job followed at once
  static constexpr int kRanks = 64;   // ranks of a communicator (the passthrough holds far fewer)
  // One communicator's row: its NCCL id, whether the gate let it go (stalled()), and each rank's
  // count of gated launches.
  struct Row {
    std::atomic<uint64_t> comm;
    std::atomic<uint32_t> released;
    uint32_t count[kRanks];
  };
  static constexpr size_t kBytes = (sizeof(Row) * kComms + 4095) / 4096 * 4096;

  // `rows`: kBytes of zero-filled memory shared by the job's processes.
  explicit Table(void* rows) : rows_(static_cast<Row*>(rows)) {}

  // What a launch described as `w` waits for: each other rank's count reaching `value`, and
  // this rank's count to publish as `value` once queued. Empty (mine null) when the launch is
  // not gated: not a collective one, or its communicator unknown or too large.
  struct Plan {
    uint32_t* mine = nullptr;
    uint32_t value = 0;
    std::vector<const uint32_t*> peers;
  };
  // `now`: seconds on a monotonic clock, for stalled().
  Plan plan(const vgpu_nccl_launch& w, double now);

  // Publishes a planned launch's arrival: its rank's count rises to p.value (never falls: a released
  // row's counts stay past every value).
  static void arrive(uint32_t* count, uint32_t value);

  // The safety net under a rule that assumes every rank launches the same collectives: a rank of
  // this process that has waited more than `limit` seconds for a peer's count lets its whole
  // communicator go (every count of the row past any value, so that each waiting stream in every
  // process goes on, and no more gating there). Returns one line per communicator let go, with the
  // counts seen (what tells which rank launched what). Called by the process's watchdog.
  std::vector<std::string> release_stalled(double now, double limit);

 private:
  // This process's latest gated launch of a (communicator, rank): what it waits for since when.
  struct Waiting {
    Row* row;
    int nranks;
    uint32_t value;
    double since;
  };
  Row* row_of(uint64_t comm);  // claimed on first use by whichever rank comes first
  Row* rows_;
  std::mutex mu_;
  std::map<std::pair<uint64_t, int>, uint32_t> launches_;  // this process's ranks' counts
  std::map<std::pair<uint64_t, int>, Waiting> waiting_;    // under mu_
};

}  // namespace vgpu::pt::nccl_gate
