// The passthrough backend's root object: every piece of process state the backend keeps lives
// here (as DriverState is the sim backend's), so this header is the backend's whole state.
//
// Made on the first driver call that needs it and never destroyed: programs call the driver
// from exit handlers and static destructors, after which a destroyed root would be read.
// The virtual devices (PassState) exist from a successful cuInit on; the pieces below are
// each reached through the root (e.g. Passthrough::get().durations()). Pieces whose creation
// has visible effects (a file opened, an exit handler installed) are made on first use, as
// before the root held them, and read on hot paths through one atomic pointer.
//
// Left outside (owned by other files for now): the per-thread clocks and the NCCL horizon
// (thread_clock.cpp), the NCCL timing tables (nccl_timing.cpp), the timeline writer
// (timeline_writer.cpp), the CUDA-array charges (array_api.cpp); the real driver's handle
// (RealDriver::get, found once and never changed) and the per-call-site function pointers of
// VGPU_REAL are read-only once set. Per-thread state is thread_local where it is used
// (kernel_recording.cpp: the launch being recorded; virtual_time.cpp: the per-thread stream).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "front/driver/cuda_api.h"
#include "passthrough/export_tables.h"
#include "passthrough/launch_facts.h"
#include "passthrough/launch_policy.h"
#include "passthrough/measure_lock.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/nccl_gate.h"
#include "passthrough/shared_durations.h"
#include "passthrough/shared_pages.h"

namespace vgpu {
class KernelTimeDb;
}

namespace vgpu::pt {

class KernelRecording;
class VirtualTime;

// A piece made on first use; reading it once made is one acquire load.
template <class T>
class OnFirstUse {
 public:
  template <class Make>
  T& get(Make make) {
    if (T* p = p_.load(std::memory_order_acquire)) return *p;
    std::lock_guard l(mu_);
    if (T* p = p_.load(std::memory_order_relaxed)) return *p;
    T* p = make();
    p_.store(p, std::memory_order_release);
    return *p;
  }
  T* peek() const { return p_.load(std::memory_order_acquire); }

 private:
  std::atomic<T*> p_{nullptr};
  std::mutex mu_;
};

// Peer access between virtual devices on one physical GPU, which vgpu answers itself
// (context_api.cpp): the (current, peer) context pairs enabled.
struct PeerAccess {
  std::mutex mu;
  std::set<std::pair<CUcontext, CUcontext>> pairs;
};

// The (context, function) pairs launched so far (launch_api.cpp: the first launch of a
// function in a context includes its module load, so it is measured, never replayed).
struct LaunchedFunctions {
  std::mutex mu;
  std::set<std::pair<CUcontext, CUfunction>> seen;
};

// The kernel-time databases (front/launch/kernel_time_db.h): one per physical GPU name for
// recording and reading measured durations, and the virtual GPU model's for replayed launches.
struct KernelDatabases {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<KernelTimeDb>> physical;  // by the GPU's name
  OnFirstUse<KernelTimeDb> model;
  std::once_flag groups_at_exit;  // kernel_recording.h: record_measured's exit record
};

class Passthrough {
 public:
  static Passthrough& get();

  // cuInit: the real driver's cuInit, then (once) the cluster config and the virtual devices.
  // The first call's result is every later call's.
  CUresult initialize(unsigned int flags);
  // The virtual devices; nullptr before a successful cuInit.
  PassState* state() const { return state_.load(std::memory_order_acquire); }
  // The streams' virtual time; nullptr before a successful cuInit.
  VirtualTime* virtual_time();

  KernelDurations& durations();
  // The durations if a launch made them already, else nullptr (synchronizations: nothing to do).
  KernelDurations* durations_if_made() const { return durations_.peek(); }
  // The CUPTI kernel-time recorder (kernel_recording.h); nullptr when not recording.
  KernelRecording* kernel_recording();
  MeasureLocks& measure_locks() { return measure_locks_; }
  SharedDurationTables& shared_durations() { return shared_durations_; }
  ExportTables& export_tables() { return export_tables_; }
  FunctionFactsCache& function_facts() { return function_facts_; }
  SharedPages& shared_pages() { return shared_pages_; }
  KernelDatabases& kernel_dbs() { return kernel_dbs_; }
  PeerAccess& peers() { return peers_; }
  LaunchedFunctions& launched() { return launched_; }
  nccl_gate::Tables& nccl_gate() { return nccl_gate_; }

 private:
  Passthrough() = default;

  std::once_flag init_once_;
  CUresult init_result_ = CUDA_ERROR_NOT_INITIALIZED;
  std::atomic<PassState*> state_{nullptr};  // set once under init_once_
  OnFirstUse<VirtualTime> virtual_time_;
  OnFirstUse<KernelDurations> durations_;  // opens VGPU_LAUNCH_STATS
  std::once_flag recording_once_;            // starts CUPTI, installs an exit handler
  KernelRecording* recording_ = nullptr;
  std::atomic<bool> recording_made_{false};  // recording_ is set (kernel_recording's fast path)
  MeasureLocks measure_locks_;
  SharedDurationTables shared_durations_;
  ExportTables export_tables_;
  FunctionFactsCache function_facts_;
  SharedPages shared_pages_;
  KernelDatabases kernel_dbs_;
  PeerAccess peers_;
  LaunchedFunctions launched_;
  nccl_gate::Tables nccl_gate_;
};

}  // namespace vgpu::pt
