#include "status/status_region.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <signal.h>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "status/activity_window.h"

namespace vgpu::status {
namespace {

constexpr size_t kText = 96;

struct Header {
  uint64_t magic;  // written last by the creator (release), read first (acquire)
  uint32_t version;
  uint32_t devices;
  uint32_t process_slots;
  uint32_t reserved;
  uint64_t total_bytes;
  char job[kText];
  char backend[16];
};

struct DeviceRecord {
  char model[kText];
  char uuid[64];
  char pci_bus_id[32];
  uint64_t capacity;
  uint64_t physical;   // atomic
  uint64_t kernels;    // atomic
  uint64_t busy_ns;    // atomic
  uint64_t clock_ns;   // atomic max
  // Version 2: published by the writer that last fed the device's utilization window.
  uint32_t util_gpu_permille;     // atomic
  uint32_t util_memory_permille;  // atomic
  uint32_t sm_clock_mhz;          // atomic
  uint32_t max_sm_clock_mhz;      // fixed
  uint32_t idle_sm_clock_mhz;     // fixed
  uint32_t reserved;
};

struct ProcessRecord {
  int32_t pid;          // atomic: 0 free, -1 being reclaimed, else the owner
  int32_t reserved;
  uint64_t start_time;  // /proc/<pid>/stat field 22, to tell a reused pid from its owner
  char name[kText];
  // followed by uint64_t memory[devices]
};

size_t process_stride(uint32_t devices) { return sizeof(ProcessRecord) + sizeof(uint64_t) * devices; }
size_t region_size(uint32_t devices) {
  return sizeof(Header) + sizeof(DeviceRecord) * devices + process_stride(devices) * kProcessSlots;
}

template <class T> std::atomic_ref<T> atomic(T& v) { return std::atomic_ref<T>(v); }

void copy_text(char* dst, size_t n, const std::string& s) {
  std::snprintf(dst, n, "%s", s.c_str());
}

uint64_t start_time_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

std::string process_name(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmd;
  std::getline(in, cmd, '\0');
  return cmd;
}

bool alive(const ProcessRecord& p) {
  const pid_t pid = atomic(const_cast<int32_t&>(p.pid)).load(std::memory_order_acquire);
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  return start_time_of(pid) == p.start_time;
}

// A mapped region of a known device count.
class Mapping {
 public:
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  static std::unique_ptr<Mapping> map(int fd, size_t size, int prot) {
    void* p = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nullptr;
    auto m = std::unique_ptr<Mapping>(new Mapping);
    m->base_ = static_cast<char*>(p);
    m->size_ = size;
    return m;
  }
  Header& header() const { return *reinterpret_cast<Header*>(base_); }
  uint32_t devices() const { return header().devices; }
  DeviceRecord& device(int i) const {
    return reinterpret_cast<DeviceRecord*>(base_ + sizeof(Header))[i];
  }
  ProcessRecord& process(int slot) const {
    return *reinterpret_cast<ProcessRecord*>(base_ + sizeof(Header) +
                                             sizeof(DeviceRecord) * devices() +
                                             process_stride(devices()) * slot);
  }
  uint64_t* memory(int slot) const {
    return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(&process(slot)) + sizeof(ProcessRecord));
  }
  // Frees the slots of dead processes; true if a live process remains.
  bool reclaim_dead() const {
    bool any_live = false;
    for (int s = 0; s < kProcessSlots; ++s) {
      ProcessRecord& p = process(s);
      int32_t pid = atomic(p.pid).load(std::memory_order_acquire);
      if (pid == 0 || pid == -1) continue;
      if (alive(p)) {
        any_live = true;
        continue;
      }
      if (!atomic(p.pid).compare_exchange_strong(pid, -1)) continue;
      for (uint32_t d = 0; d < devices(); ++d) atomic(memory(s)[d]).store(0);
      atomic(p.pid).store(0, std::memory_order_release);
    }
    return any_live;
  }

 private:
  Mapping() = default;
  char* base_ = nullptr;
  size_t size_ = 0;
};

std::string shm_path(const std::string& name) { return "/dev/shm/" + name; }

// Opens an existing region for reading or writing and checks its header.
std::unique_ptr<Mapping> open_existing(const std::string& name, bool writable, std::string* error) {
  const int fd = shm_open(("/" + name).c_str(), writable ? O_RDWR : O_RDONLY, 0);
  if (fd < 0) {
    if (error) *error = "no status region " + shm_path(name) + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<Mapping> m;
  // The creator may still be sizing and filling it: wait a little for the magic.
  for (int attempt = 0; attempt < 200 && !m; ++attempt) {
    struct stat st{};
    if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= sizeof(Header)) {
      auto probe = Mapping::map(fd, sizeof(Header), PROT_READ);
      if (probe && atomic(probe->header().magic).load(std::memory_order_acquire) == kMagic &&
          probe->header().version == kVersion &&
          static_cast<size_t>(st.st_size) >= region_size(probe->header().devices)) {
        m = Mapping::map(fd, region_size(probe->header().devices),
                         writable ? PROT_READ | PROT_WRITE : PROT_READ);
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(fd);
  if (!m && error) *error = "status region " + shm_path(name) + " is not a vgpu status region (or is still being created)";
  return m;
}

}  // namespace

std::string region_name(uid_t uid, const std::string& job) {
  std::string safe = job;
  for (char& c : safe)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return "vgpu-" + std::to_string(uid) + "-" + safe;
}

std::string current_job_id() {
  if (const char* j = std::getenv("VGPU_JOB_ID"); j != nullptr && *j != '\0') return j;
  return "sid" + std::to_string(getsid(0));
}

std::vector<std::string> list_jobs(uid_t uid) {
  std::vector<std::string> jobs;
  const std::string prefix = "vgpu-" + std::to_string(uid) + "-";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0) jobs.push_back(n.substr(prefix.size()));
    }
    closedir(dir);
  }
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

struct Writer::Impl {
  std::string name;
  std::unique_ptr<Mapping> map;
  int slot = -1;
  std::atomic<bool> detached{false};

  // This process's view of each device's recent work (add_interval), published into the region.
  struct Windows {
    ActivityWindow kernels{kUtilizationWindow};
    ActivityWindow copies{kUtilizationWindow};
    bool dirty = false;
  };
  std::mutex activity_mu;
  std::vector<Windows> windows;                      // under activity_mu, one per device
  std::chrono::steady_clock::time_point published;   // under activity_mu

  void publish_locked() {
    for (uint32_t i = 0; i < windows.size(); ++i) {
      Windows& w = windows[i];
      if (!w.dirty) continue;
      w.dirty = false;
      DeviceRecord& d = map->device(static_cast<int>(i));
      const double now = atomic(d.clock_ns).load() / 1e9;
      const double gpu = w.kernels.utilization(now), mem = w.copies.utilization(now);
      atomic(d.util_gpu_permille).store(static_cast<uint32_t>(gpu * 1000 + 0.5));
      atomic(d.util_memory_permille).store(static_cast<uint32_t>(mem * 1000 + 0.5));
      atomic(d.sm_clock_mhz).store(gpu > 0 || mem > 0 ? d.max_sm_clock_mhz : d.idle_sm_clock_mhz);
    }
    published = std::chrono::steady_clock::now();
  }
};

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {
// Whether region `name` has no live process and describes devices other than `devices`.
bool stale_with_other_devices(const std::string& name, const std::vector<DeviceInfo>& devices) {
  std::string error;
  auto map = open_existing(name, true, &error);
  if (!map) return false;
  map->reclaim_dead();
  for (int s = 0; s < kProcessSlots; ++s)
    if (atomic(map->process(s).pid).load(std::memory_order_acquire) != 0) return false;
  if (map->devices() != devices.size()) return true;
  for (uint32_t i = 0; i < devices.size(); ++i) {
    const DeviceRecord& d = map->device(static_cast<int>(i));
    if (std::strncmp(d.uuid, devices[i].uuid.c_str(), sizeof d.uuid) != 0 ||
        std::strncmp(d.model, devices[i].model.c_str(), sizeof d.model) != 0 || d.capacity != devices[i].capacity)
      return true;
  }
  return false;
}
// VGPU_STATUS_KEEP=1 (set by vgpu-run): the last process leaves the region in place for the
// launcher, which reads the final figures and removes it. Without it a job shorter than the
// launcher's poll could come and go unseen.
bool kept_for_launcher() {
  const char* v = std::getenv("VGPU_STATUS_KEEP");
  return v != nullptr && v[0] == '1';
}

}  // namespace

std::unique_ptr<Writer> Writer::attach(const std::string& job, const std::string& backend,
                                       const std::vector<DeviceInfo>& devices) {
  auto impl = std::make_unique<Impl>();
  impl->name = region_name(getuid(), job);
  const uint32_t n = static_cast<uint32_t>(devices.size());
  const std::string path = "/" + impl->name;
  int fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST && stale_with_other_devices(impl->name, devices)) {
    // Left by processes that have all exited, describing other devices (another config under
    // the same job id): this process's job starts afresh.
    shm_unlink(path.c_str());
    fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  }
  if (fd >= 0) {  // we create it
    if (ftruncate(fd, static_cast<off_t>(region_size(n))) != 0) {
      log::warn("status region {}: {}", shm_path(impl->name), std::strerror(errno));
      close(fd);
      shm_unlink(path.c_str());
      return nullptr;
    }
    impl->map = Mapping::map(fd, region_size(n), PROT_READ | PROT_WRITE);
    close(fd);
    if (!impl->map) return nullptr;
    Header& h = impl->map->header();
    h.version = kVersion;
    h.devices = n;
    h.process_slots = kProcessSlots;
    h.total_bytes = region_size(n);
    copy_text(h.job, sizeof h.job, job);
    copy_text(h.backend, sizeof h.backend, backend);
    for (uint32_t i = 0; i < n; ++i) {
      DeviceRecord& d = impl->map->device(static_cast<int>(i));
      copy_text(d.model, sizeof d.model, devices[i].model);
      copy_text(d.uuid, sizeof d.uuid, devices[i].uuid);
      copy_text(d.pci_bus_id, sizeof d.pci_bus_id, devices[i].pci_bus_id);
      d.capacity = devices[i].capacity;
      d.max_sm_clock_mhz = devices[i].max_sm_clock_mhz;
      d.idle_sm_clock_mhz = devices[i].idle_sm_clock_mhz;
      d.sm_clock_mhz = devices[i].idle_sm_clock_mhz;
    }
    atomic(h.magic).store(kMagic, std::memory_order_release);
  } else {
    std::string error;
    impl->map = open_existing(impl->name, true, &error);
    if (!impl->map) {
      log::warn("{}", error);
      return nullptr;
    }
    if (impl->map->devices() != n) {
      log::warn("status region {} describes {} devices, this process has {}: not reporting status",
                shm_path(impl->name), impl->map->devices(), n);
      return nullptr;
    }
  }
  impl->map->reclaim_dead();
  const pid_t me = getpid();
  for (int s = 0; s < kProcessSlots && impl->slot < 0; ++s) {
    int32_t expected = 0;
    ProcessRecord& p = impl->map->process(s);
    if (atomic(p.pid).compare_exchange_strong(expected, -1)) {
      p.start_time = start_time_of(me);
      copy_text(p.name, sizeof p.name, process_name(me));
      for (uint32_t d = 0; d < n; ++d) atomic(impl->map->memory(s)[d]).store(0);
      atomic(p.pid).store(me, std::memory_order_release);
      impl->slot = s;
    }
  }
  if (impl->slot < 0) {
    log::warn("status region {}: all {} process slots taken", shm_path(impl->name), kProcessSlots);
    return nullptr;
  }
  impl->windows.resize(n);
  return std::unique_ptr<Writer>(new Writer(std::move(impl)));
}

Writer::~Writer() { detach(); }

void Writer::detach() {
  publish();  // the final utilization, for whoever reads the region after this process
  if (impl_->detached.exchange(true)) return;
  Mapping& m = *impl_->map;
  for (uint32_t d = 0; d < m.devices(); ++d) atomic(m.memory(impl_->slot)[d]).store(0);
  atomic(m.process(impl_->slot).pid).store(0, std::memory_order_release);
  if (!m.reclaim_dead() && !kept_for_launcher()) shm_unlink(("/" + impl_->name).c_str());
}

void Writer::add_memory(int device, int64_t delta) {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  atomic(impl_->map->memory(impl_->slot)[device]).fetch_add(static_cast<uint64_t>(delta));
}

void Writer::add_physical(int device, int64_t delta) {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  atomic(impl_->map->device(device).physical).fetch_add(static_cast<uint64_t>(delta));
}

void Writer::add_work(int device, double busy_s, bool kernel) {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  DeviceRecord& d = impl_->map->device(device);
  if (kernel) atomic(d.kernels).fetch_add(1);
  atomic(d.busy_ns).fetch_add(static_cast<uint64_t>(busy_s * 1e9));
}

void Writer::advance_clock(int device, double clock_s) {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  auto clock = atomic(impl_->map->device(device).clock_ns);
  const uint64_t t = static_cast<uint64_t>(clock_s * 1e9);
  uint64_t cur = clock.load();
  while (cur < t && !clock.compare_exchange_weak(cur, t)) {
  }
}

void Writer::add_interval(int device, double start_s, double finish_s, bool kernel) {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  add_work(device, std::max(0.0, finish_s - start_s), kernel);
  advance_clock(device, finish_s);
  std::lock_guard lock(impl_->activity_mu);
  Impl::Windows& w = impl_->windows[static_cast<size_t>(device)];
  (kernel ? w.kernels : w.copies).add(start_s, finish_s);
  w.dirty = true;
  if (std::chrono::steady_clock::now() - impl_->published > std::chrono::milliseconds(50))
    impl_->publish_locked();
}

void Writer::publish() {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(impl_->activity_mu);
  impl_->publish_locked();
}

bool read_snapshot(uid_t uid, const std::string& job, Snapshot* out, std::string* error) {
  const std::string name = region_name(uid, job);
  // Writable when we can (to reclaim dead processes' slots); read-only otherwise.
  auto m = open_existing(name, true, nullptr);
  const bool writable = m != nullptr;
  if (!m) m = open_existing(name, false, error);
  if (!m) return false;
  bool live = writable ? m->reclaim_dead() : true;
  Snapshot s;
  s.job = m->header().job;
  s.backend = m->header().backend;
  for (uint32_t i = 0; i < m->devices(); ++i) {
    DeviceRecord& d = m->device(static_cast<int>(i));
    DeviceSnapshot ds;
    ds.info = {d.model, d.uuid, d.pci_bus_id, d.capacity};
    ds.physical = atomic(d.physical).load();
    ds.kernels = atomic(d.kernels).load();
    ds.busy_s = atomic(d.busy_ns).load() / 1e9;
    ds.clock_s = atomic(d.clock_ns).load() / 1e9;
    ds.info.max_sm_clock_mhz = d.max_sm_clock_mhz;
    ds.info.idle_sm_clock_mhz = d.idle_sm_clock_mhz;
    ds.util_gpu = atomic(d.util_gpu_permille).load() / 1000.0;
    ds.util_memory = atomic(d.util_memory_permille).load() / 1000.0;
    ds.sm_clock_mhz = atomic(d.sm_clock_mhz).load();
    s.devices.push_back(ds);
  }
  for (int slot = 0; slot < kProcessSlots; ++slot) {
    ProcessRecord& p = m->process(slot);
    if (!alive(p)) continue;
    ProcessSnapshot ps;
    ps.pid = p.pid;
    ps.name = p.name;
    for (uint32_t d = 0; d < m->devices(); ++d) {
      ps.memory.push_back(atomic(m->memory(slot)[d]).load());
      s.devices[d].used += ps.memory.back();
    }
    s.processes.push_back(std::move(ps));
  }
  if (writable && !live && !kept_for_launcher()) shm_unlink(("/" + name).c_str());  // only the dead were left
  *out = std::move(s);
  return true;
}

}  // namespace vgpu::status
