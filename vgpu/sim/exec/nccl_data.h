// The data of NCCL collectives on the sim backend. No NCCL kernel runs there, so each
// collective's kernel, when its turn on its stream comes (Work::execute, on a driver thread: it
// may wait for other ranks), moves the data itself: from NCCL's profiler it learns the tasks of
// its launch (sendBuff, recvBuff, count, datatype, root: contracts/nccl_plugin.h,
// launch_tasks), posts this rank's part through the job's exchange (nccl_data_exchange.h), takes
// every rank's part and computes its own result into its recv buffer in host-backed device
// memory (the arithmetic: nccl_reduce.h, the reduction from the kernel's name).
//
// Bounds: a rank's part larger than VGPU_SIM_NCCL_DATA_BYTES moves nothing (the collective is
// timed only; every rank decides alike, as every rank's sizes agree). Never a hang: a rank that does not bring its part
// within the rendezvous's timeout leaves the buffers as they were, with one log line. Virtual
// time does not change: the kernel's place on the timeline is set at its launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "contracts/nccl_plugin.h"
#include "sim/exec/nccl_data_exchange.h"
#include "sim/exec/nccl_reduce.h"

namespace vgpu {

class MemoryManager;

class NcclData {
 public:
  using Op = nccl_data::Op;

  // `dir`: the exchange's folder (empty: the job's).
  explicit NcclData(MemoryManager& memory, std::string dir = {});

  // The real effect of NCCL kernel launch `tag` (rank `rank` of `nranks` of `comm`), for its
  // Work::execute; it must run on a driver thread (Work::blocking). Its place in the
  // communicator's sequence is taken now, at the launch. Empty when no data moves
  // (VGPU_SIM_NCCL_DATA_BYTES=0).
  std::function<void()> mover(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int nranks,
                              int rank, Op op);

  // The same for a launch of sends and receives only (each Send posts its buffer for its peer
  // without waiting; each Recv waits for the matching send, in order per pair of ranks; a
  // message larger than VGPU_SIM_NCCL_DATA_BYTES moves nothing on either side).
  std::function<void()> p2p_mover(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int rank);

  // How long a kernel waits for NCCL to start its launch's task events (microseconds after the
  // launch, in NCCL); after one such wait in vain, no kernel of this process waits again.
  static constexpr double kTasksTimeoutS = 10;

 private:
  // The launch's tasks once NCCL started them all; false (one log line) when not known.
  bool tasks_of(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int rank,
                std::vector<vgpu_nccl_task>* out);
  void move(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, uint64_t seq, int nranks, int rank,
            Op op);
  void move_p2p(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int rank);

  MemoryManager& memory_;
  NcclDataExchange exchange_;
  std::atomic<bool> tasks_unknown_{false};  // a wait for a launch's tasks was in vain
  std::mutex mu_;
  std::map<std::pair<uint64_t, int>, uint64_t> seq_;  // (comm, rank) -> collectives launched
  // (comm, src, dst) -> messages sent (on the sender's side) or received (on the receiver's)
  std::map<std::tuple<uint64_t, int, int>, uint64_t> sent_, received_;
};

}  // namespace vgpu
