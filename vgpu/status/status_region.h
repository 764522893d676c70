// The per-job status region: a small shared-memory file that every process of a job updates
// and vgpu-smi / the virtual NVML read. Per virtual device: model, capacity, memory used (per
// process), kernels run, busy virtual time, the virtual clock. Readable only by its user
// (mode 0600 in /dev/shm); named after the job (VGPU_JOB_ID, else the session id) so several
// jobs side by side do not see each other unless asked.
//
// Layout (all fields naturally aligned; counters are updated with atomics, no locks):
//   Header | DeviceRecord[devices] | ProcessRecord[process_slots] each followed by
//   uint64 memory[devices]
// A process claims a slot at attach() and clears it at detach()/exit. Slots of processes that
// died without detaching are reclaimed by the next attach() or reader (pid gone, or pid reused:
// the start time recorded from /proc differs). The region is unlinked by the last process to
// leave (unless VGPU_STATUS_KEEP=1: vgpu-run removes it after the job), or by a reader that
// finds only dead processes in it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vgpu::status {

inline constexpr uint64_t kMagic = 0x3130'5553'5550'4756ull;  // "VGPUSU01"
inline constexpr uint32_t kVersion = 2;  // 2: utilization over a window, SM clock
inline constexpr int kProcessSlots = 128;
// The stretch of virtual time utilization is measured over (NVML samples over 1/6 s to 1 s).
inline constexpr double kUtilizationWindow = 1.0;

struct DeviceInfo {  // what is fixed for the job's lifetime
  std::string model;  // "NVIDIA H100 80GB HBM3"
  std::string uuid;   // "GPU-76677075-..."
  std::string pci_bus_id;
  uint64_t capacity = 0;
  unsigned max_sm_clock_mhz = 0;   // the SM clock while work runs (the model's boost clock)
  unsigned idle_sm_clock_mhz = 0;  // and while it idles
};

struct DeviceSnapshot {
  DeviceInfo info;
  uint64_t used = 0;           // virtual memory charged, all processes
  uint64_t physical = 0;       // physical memory behind it (passthrough; 0 on the sim backend)
  uint64_t kernels = 0;
  double busy_s = 0;           // virtual time spent running kernels and copies
  double clock_s = 0;          // the furthest virtual time reached on the device
  // Over the last kUtilizationWindow of the device's virtual time: the fraction during which a
  // kernel ran (NVML's utilization.gpu) and during which a copy or memset ran (utilization.memory).
  double util_gpu = 0;
  double util_memory = 0;
  unsigned sm_clock_mhz = 0;   // the SM clock now: boost while the window saw work, else idle
  // The whole run's busy fraction (busy time over the virtual clock).
  double utilization() const { return clock_s > 0 ? std::min(1.0, busy_s / clock_s) : 0; }
};

struct ProcessSnapshot {
  pid_t pid = 0;
  std::string name;
  std::vector<uint64_t> memory;  // per device
};

struct Snapshot {
  std::string job;
  std::string backend;          // "sim" or "passthrough"
  std::vector<DeviceSnapshot> devices;
  std::vector<ProcessSnapshot> processes;
};

// The region name of a job: "vgpu-<uid>-<job>" (in /dev/shm).
std::string region_name(uid_t uid, const std::string& job) noexcept;
// VGPU_JOB_ID if set, else the session id of this process (what torchrun's children share).
std::string current_job_id() noexcept;
// The jobs of `uid` that have a region now.
std::vector<std::string> list_jobs(uid_t uid) noexcept;
// A companion file of the job whose region is named `region` (in /dev/shm): the kernel durations
// the job's processes share on physical GPU `physical` (passthrough/shared_durations.h). It
// lives as long as the region: removed with it by the last process, a sweep or vgpu-run.
std::string companion_path(const std::string& region, int physical) noexcept;

// Every function here is noexcept: they run inside cuInit, NVML calls and vgpu-smi, while the
// processes they read about come and go; a failure is a missing status, never an abort.

// The writer side, one per process (owned by the driver).
class Writer {
 public:
  // Creates the job's region or joins it, and claims a process slot. nullptr (and one log line)
  // if the region cannot be used: the driver then works without status reporting.
  static std::unique_ptr<Writer> attach(const std::string& job, const std::string& backend,
                                        const std::vector<DeviceInfo>& devices) noexcept;
  ~Writer();  // detach()

  // Leaves the region: clears this process's slot and unlinks the region if no live process is
  // left (and VGPU_STATUS_KEEP is not 1). Idempotent; later updates are ignored (the driver calls it at exit, while other
  // threads may still be running).
  void detach() noexcept;

  void add_memory(int device, int64_t delta_bytes) noexcept;
  void add_physical(int device, int64_t delta_bytes) noexcept;
  void add_work(int device, double busy_s, bool kernel) noexcept;
  // `kernels` kernels and `busy_ns` of busy time at once (the passthrough's batched report:
  // passthrough/device_activity.h).
  void add_work(int device, uint64_t kernels, uint64_t busy_ns) noexcept;
  void advance_clock(int device, double clock_s) noexcept;

  // Work that ran on `device` over [start_s, finish_s] of virtual time: a kernel (kernel=true)
  // or a copy/memset. Adds its busy time (and a kernel to the count), moves the device's clock to
  // its finish and feeds the device's utilization window. Utilization and the SM clock are
  // republished at most every 50 ms of real time; publish() forces it (end of a batch).
  void add_interval(int device, double start_s, double finish_s, bool kernel);
  // Only the utilization window's part of add_interval: [start_s, finish_s] was busy (work whose
  // busy time, count and clock were added already, by add_work and advance_clock).
  void add_activity(int device, double start_s, double finish_s, bool kernel);
  void publish();

 private:
  struct Impl;
  explicit Writer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The reader side (vgpu-smi, NVML): a consistent-enough copy of the region, with dead
// processes' slots reclaimed first. nullopt-like empty snapshot (no devices) if there is none.
bool read_snapshot(uid_t uid, const std::string& job, Snapshot* out, std::string* error) noexcept;

}  // namespace vgpu::status
