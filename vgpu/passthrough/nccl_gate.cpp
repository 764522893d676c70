#include "passthrough/nccl_gate.h"

#include <unistd.h>

#include <chrono>
#include <string>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "common/settings.h"
#include "passthrough/job_shared_file.h"
#include "passthrough/nccl_gate_table.h"
#include "passthrough/nccl_timing.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "status/status_region.h"

namespace vgpu::pt::nccl_gate {
namespace {

// The table's name: a companion of the job's status region (removed with it), numbered past any
// physical GPU so that it is never a GPU's shared duration table.
constexpr int kCompanion = 1 << 20;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void Tables::watch() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (const std::string& line : table_->release_stalled(now_seconds(), kStallSeconds))
      log::always("vgpu: VGPU_NCCL_GATE let a communicator go (its ranks did not launch the same collectives): " +
                  line);
  }
}

Table* Tables::get() {
  std::call_once(once_, [this] {
    const std::string region = status::region_name(getuid(), status::current_job_id());
    void* p = region.empty() ? nullptr
                             : map_job_shared_file(status::companion_path(region, kCompanion), Table::kBytes, "NCCL gate");
    if (p == nullptr) return;
    // Without registration this process's GPU cannot wait on the table, but its ranks still
    // publish their arrivals there: their peers in other processes wait for them.
    can_wait_ = VGPU_REAL("cuMemHostRegister_v2", CUresult (*)(void*, size_t, unsigned))(
                    p, Table::kBytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP) == CUDA_SUCCESS;
    if (!can_wait_)
      log::once(log::Level::warn, "nccl-gate",
                "passthrough: VGPU_NCCL_GATE: cannot register the gate's memory: this process's kernels are not held");
    table_ = new Table(p);
    if (can_wait_) {
      try {
        std::thread([this] { watch(); }).detach();
      } catch (const std::system_error&) {
        can_wait_ = false;  // no safety net, no gate
        log::once(log::Level::warn, "nccl-gate", "passthrough: VGPU_NCCL_GATE: no watchdog thread: kernels are not held");
      }
    }
  });
  return table_;
}

bool enabled() {
  static const bool on = settings::flag(settings::Id::nccl_gate);
  return on;
}

Ticket hold(uint64_t launch, CUstream stream) {
  if (!enabled() || launch == 0) return {};
  vgpu_nccl_launch w{};
  if (!nccl_timing::describe(launch, &w)) return {};
  // A process that drives several ranks of the communicator launches them from one thread, and
  // held there (one device's stream waiting on a rank launched next) nccl-tests -g 2 hung on an
  // H200 (2026-11-26e call 1, after the watchdog had let the communicator go): such a
  // communicator is not gated.
  if (nccl_timing::local_ranks(w.comm_id) > 1) return {};
  Table* table = Passthrough::get().nccl_gate().get();
  if (table == nullptr) return {};
  const Table::Plan p = table->plan(w, now_seconds());
  if (p.mine == nullptr) return {};
  if (!Passthrough::get().nccl_gate().can_wait()) return {p.mine, p.value};
  auto device_pointer = VGPU_REAL("cuMemHostGetDevicePointer_v2", CUresult (*)(CUdeviceptr*, void*, unsigned));
  auto wait = VGPU_REAL("cuStreamWaitValue32_v2", CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned));
  for (const uint32_t* peer : p.peers) {
    CUdeviceptr d = 0;
    if (device_pointer == nullptr || wait == nullptr ||
        device_pointer(&d, const_cast<uint32_t*>(peer), 0) != CUDA_SUCCESS ||
        wait(stream, d, p.value, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
      log::once(log::Level::warn, "nccl-gate", "passthrough: VGPU_NCCL_GATE: a stream cannot wait on the gate");
      break;
    }
  }
  log::debug("passthrough: VGPU_NCCL_GATE: communicator {:#x} rank {}/{}: {} #{}", w.comm_id, w.rank, w.nranks,
             w.op[0].func, p.value);
  log::once(log::Level::info, "nccl-gate-on",
            fmt::format("passthrough: VGPU_NCCL_GATE: communicator {:#x}'s collectives wait for its {} ranks", w.comm_id,
                        w.nranks));
  return {p.mine, p.value};
}

void arrive(const Ticket& ticket) {
  if (ticket.count != nullptr) Table::arrive(ticket.count, ticket.value);
}

}  // namespace vgpu::pt::nccl_gate
