// The data of NCCL collectives on the sim backend. No NCCL kernel runs there, so each
// collective's kernel, when its turn on its stream comes (Work::execute, on a driver thread: it
// may wait for other ranks), moves the data itself: from NCCL's profiler it learns the tasks of
// its launch (sendBuff, recvBuff, count, datatype, root: contracts/nccl_plugin.h,
// launch_tasks), posts this rank's part through the job's exchange (nccl_data_exchange.h), takes
// every rank's part and computes its own result into its recv buffer in host-backed device
// memory. All-reduce, all-gather, broadcast, reduce and reduce-scatter; the reduction is taken
// from the kernel's name where NCCL's specialised kernels carry it (`_Sum_`, `_Prod_`,
// `_PreMulSum_`/`_SumPostDiv_` as sum), else a sum (NCCL's generic kernel does not say;
// min/max share one kernel name and are not told apart: their results are left as they were).
//
// Bounds: a rank's part larger than VGPU_SIM_NCCL_DATA_BYTES moves nothing (the collective is
// timed only; every rank decides alike, as every rank's sizes agree); send/recv kernels are not
// handled (nccl_collectives.h leaves them out). Never a hang: a rank that does not bring its part
// within the rendezvous's timeout leaves the buffers as they were, with one log line. Virtual
// time does not change: the kernel's place on the timeline is set at its launch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "contracts/nccl_plugin.h"
#include "sim/exec/nccl_data_exchange.h"

namespace vgpu {

class MemoryManager;

class NcclData {
 public:
  enum class Op { sum, prod, unknown };
  // The reduction NCCL's kernel `name` performs (sum where the name does not say).
  static Op op_of_kernel(const std::string& name);

  // `dir`: the exchange's folder (empty: the job's).
  explicit NcclData(MemoryManager& memory, std::string dir = {});

  // The real effect of NCCL kernel launch `tag` (rank `rank` of `nranks` of `comm`), for its
  // Work::execute; it must run on a driver thread (Work::blocking). Its place in the
  // communicator's sequence is taken now, at the launch. Empty when no data moves
  // (VGPU_SIM_NCCL_DATA_BYTES=0).
  std::function<void()> mover(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, int nranks,
                              int rank, Op op);

  // The result of one task from every rank's post (parts[r]), written to `recv` (host bytes of
  // `recv_bytes`): false when the task or the posts do not fit. Public for the unit test.
  static bool combine(const vgpu_nccl_task& task, int nranks, int rank, Op op,
                      const std::vector<std::vector<char>>& parts, char* recv, size_t recv_bytes);
  // What rank `rank` posts of `task` and what its recv buffer receives, in bytes; false for a
  // function or datatype not handled.
  static bool sizes(const vgpu_nccl_task& task, int nranks, int rank, size_t* post, size_t* recv);

  static constexpr double kTasksTimeoutS = 60;  // for NCCL to start the launch's task events

 private:
  void move(const vgpu_nccl_plugin_side* plugin, uint64_t tag, uint64_t comm, uint64_t seq, int nranks, int rank,
            Op op);

  MemoryManager& memory_;
  NcclDataExchange exchange_;
  std::mutex mu_;
  std::map<std::pair<uint64_t, int>, uint64_t> seq_;  // (comm, rank) -> collectives launched
};

}  // namespace vgpu
