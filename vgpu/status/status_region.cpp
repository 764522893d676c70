#include "status/status_region.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <signal.h>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"
#include "common/settings.h"
#include "common/proc_info.h"
#include "status/activity_window.h"

namespace vgpu::status {
namespace {

constexpr size_t kText = 96;
// A region's name when the plain one is taken by something that is not this user's private
// region: "<name>+1" ... "+7", tried in order by writers and readers alike, so the processes of
// one job still meet (see open_owned).
constexpr int kNameChoices = 8;
// More devices than any configuration may have (simcore bounds the cluster far below this): a
// header claiming more is garbage, whatever its size says.
constexpr uint32_t kMaxDevices = 1u << 22;
constexpr uint32_t kKeptForLauncher = 1;  // Header::flags

struct Header {
  uint64_t magic;  // written before the region gets its name (see publish), checked first
  uint32_t version;
  uint32_t devices;
  uint32_t process_slots;
  uint32_t flags;  // atomic: kKeptForLauncher once the last process left under VGPU_STATUS_KEEP
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

// A text field of the region as something safe to print: at most the field's size (it need not
// be NUL-terminated), and every byte that is not printable ASCII shown as '?', so a region
// written by someone else cannot put terminal escapes into vgpu-smi's or NVML's output.
std::string printable(const char* field, size_t size) {
  std::string out;
  for (size_t i = 0; i < size && field[i] != '\0'; ++i) {
    const unsigned char c = static_cast<unsigned char>(field[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  return out;
}

bool alive(const ProcessRecord& p) {
  const pid_t pid = atomic(const_cast<int32_t&>(p.pid)).load(std::memory_order_acquire);
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  return process_start_time(pid) == p.start_time;
}

// A mapped region of a known device count (fixed when mapped: the count in the shared header
// is never trusted again afterwards).
class Mapping {
 public:
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  static std::unique_ptr<Mapping> map(int fd, size_t size, uint32_t devices, int prot) {
    void* p = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nullptr;
    auto m = std::unique_ptr<Mapping>(new Mapping);
    m->base_ = static_cast<char*>(p);
    m->size_ = size;
    m->devices_ = devices;
    return m;
  }
  Header& header() const { return *reinterpret_cast<Header*>(base_); }
  uint32_t devices() const { return devices_; }
  DeviceRecord& device(int i) const {
    return reinterpret_cast<DeviceRecord*>(base_ + sizeof(Header))[i];
  }
  ProcessRecord& process(int slot) const {
    return *reinterpret_cast<ProcessRecord*>(base_ + sizeof(Header) +
                                             sizeof(DeviceRecord) * devices_ +
                                             process_stride(devices_) * slot);
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
      for (uint32_t d = 0; d < devices_; ++d) atomic(memory(s)[d]).store(0);
      atomic(p.pid).store(0, std::memory_order_release);
    }
    return any_live;
  }
  // Claims a free slot for this process; -1 if all are taken.
  int claim_slot() const {
    const pid_t me = getpid();
    for (int s = 0; s < kProcessSlots; ++s) {
      int32_t expected = 0;
      ProcessRecord& p = process(s);
      if (!atomic(p.pid).compare_exchange_strong(expected, -1)) continue;
      p.start_time = process_start_time(me);
      process_name(me, p.name, sizeof p.name);
      for (uint32_t d = 0; d < devices_; ++d) atomic(memory(s)[d]).store(0);
      atomic(p.pid).store(me, std::memory_order_release);
      return s;
    }
    return -1;
  }
  void release_slot(int slot) const {
    for (uint32_t d = 0; d < devices_; ++d) atomic(memory(slot)[d]).store(0);
    atomic(process(slot).pid).store(0, std::memory_order_release);
  }
  bool kept() const {
    return (atomic(header().flags).load(std::memory_order_acquire) & kKeptForLauncher) != 0;
  }

 private:
  Mapping() = default;
  char* base_ = nullptr;
  size_t size_ = 0;
  uint32_t devices_ = 0;
};

std::string shm_path(const std::string& name) { return "/dev/shm/" + name; }
std::string choice_name(const std::string& name, int k) {
  return k == 0 ? name : name + "+" + std::to_string(k);
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// What opening a region's name found.
enum class Access {
  kOk,       // a private region file of the user
  kMissing,  // no such name
  kForeign,  // something else under the name: another user's file, a symlink, a FIFO, a file
             // open to group/others. Never used; the job takes the next name.
  kDenied,   // no permission to open it
  kFailed,
};

struct Opened {
  Fd fd;
  Access access = Access::kFailed;
  std::string error;
};

// Opens region `name` of user `uid` without following a symlink or blocking on a FIFO, and
// accepts it only if the opened file (fstat on the descriptor, so nothing can be swapped in
// between) is a regular file owned by `uid` with no access for group or others.
Opened open_owned(const std::string& name, uid_t uid, bool writable) {
  Opened o;
  const std::string path = shm_path(name);
  o.fd = Fd(open(path.c_str(),
                 (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (o.fd.get() < 0) {
    const int e = errno;
    o.access = e == ENOENT ? Access::kMissing
             : e == ELOOP  ? Access::kForeign
             : (e == EACCES || e == EPERM) ? Access::kDenied
                                           : Access::kFailed;
    o.error = e == ENOENT ? "no status region " + path
                          : "status region " + path + ": " + std::strerror(e);
    return o;
  }
  struct stat st{};
  if (fstat(o.fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid ||
      (st.st_mode & 077) != 0) {
    o.error = fmt::format("{} is not a private status region of uid {} (owner uid {}, mode {:o})",
                          path, uid, st.st_uid, st.st_mode & 07777);
    o.fd.reset();
    o.access = Access::kForeign;
    return o;
  }
  o.access = Access::kOk;
  return o;
}

// Maps the region behind `fd` if its header is complete and consistent with the file's size.
// O(1) and never waits: a region gets its name only once complete (publish), so a bad header
// is garbage or a crash's leftover, not one being written.
std::unique_ptr<Mapping> map_checked(int fd, bool writable, std::string* why) {
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    *why = std::strerror(errno);
    return nullptr;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < sizeof(Header)) {
    *why = fmt::format("{} bytes, shorter than a header", size);
    return nullptr;
  }
  Header h{};
  if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) {
    *why = "cannot read the header";
    return nullptr;
  }
  if (h.magic != kMagic || h.version != kVersion) {
    *why = "no vgpu status header";
    return nullptr;
  }
  if (h.devices > kMaxDevices || h.process_slots != static_cast<uint32_t>(kProcessSlots) ||
      h.total_bytes != region_size(h.devices) || size != h.total_bytes) {
    *why = fmt::format("inconsistent header ({} devices, {} slots, {} bytes in a file of {})",
                       h.devices, h.process_slots, h.total_bytes, size);
    return nullptr;
  }
  auto m = Mapping::map(fd, region_size(h.devices), h.devices,
                        writable ? PROT_READ | PROT_WRITE : PROT_READ);
  if (!m) *why = fmt::format("mmap: {}", std::strerror(errno));
  return m;
}

// The companions of region `name` ("<job region>.<what>", companion_path) are named after the
// job's region name without the "+k" a taken name got (region_name never writes a '+').
constexpr const char* kCompanionMark = ".durations-gpu";
std::string companion_prefix(const std::string& name) {
  return name.substr(0, name.find('+')) + kCompanionMark;
}

// Removes the companion files of region `name` that `uid` owns.
void unlink_companions(const std::string& name, uid_t uid) {
  const std::string prefix = companion_prefix(name);
  std::vector<std::string> found;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) found.emplace_back(e->d_name);
    closedir(dir);
  }
  for (const std::string& f : found) {
    struct stat st{};
    if (lstat(shm_path(f).c_str(), &st) == 0 && st.st_uid == uid) unlink(shm_path(f).c_str());
  }
}

// Removes `name` (and its companions) if it still names the file open as `fd` (not one created
// since).
void unlink_if_same(const std::string& name, int fd) {
  struct stat a{}, b{};
  if (fstat(fd, &a) == 0 && lstat(shm_path(name).c_str(), &b) == 0 && a.st_ino == b.st_ino &&
      a.st_dev == b.st_dev) {
    unlink(shm_path(name).c_str());
    unlink_companions(name, a.st_uid);
  }
}

// VGPU_STATUS_KEEP=1 (set by vgpu-run): the last process leaves the region in place for the
// launcher, which reads the final figures and removes it. Without it a job shorter than the
// launcher's poll could come and go unseen.
bool kept_for_launcher() {
  return settings::flag(settings::Id::status_keep);
}

// Whether the region has no live process and describes devices other than `devices`.
bool stale_with_other_devices(const Mapping& map, const std::vector<DeviceInfo>& devices) {
  map.reclaim_dead();
  for (int s = 0; s < kProcessSlots; ++s)
    if (atomic(map.process(s).pid).load(std::memory_order_acquire) != 0) return false;
  if (map.devices() != devices.size()) return true;
  for (uint32_t i = 0; i < devices.size(); ++i) {
    const DeviceRecord& d = map.device(static_cast<int>(i));
    if (std::strncmp(d.uuid, devices[i].uuid.c_str(), sizeof d.uuid) != 0 ||
        std::strncmp(d.model, devices[i].model.c_str(), sizeof d.model) != 0 || d.capacity != devices[i].capacity)
      return true;
  }
  return false;
}

enum class Publish { kDone, kTaken, kFailed };

// Creates the region complete, with this process in slot 0, under a temporary name, then gives
// it `name` with link() (which fails if the name exists): nobody ever sees it half written.
Publish publish_region(const std::string& name, const std::string& job, const std::string& backend,
                const std::vector<DeviceInfo>& devices, std::unique_ptr<Mapping>* out, int* slot,
                std::string* error) {
  const uint32_t n = static_cast<uint32_t>(devices.size());
  const std::string tmp = name + "+new" + std::to_string(getpid());
  unlink(shm_path(tmp).c_str());  // left by this pid's predecessor, if any
  Fd fd(open(shm_path(tmp).c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    *error = fmt::format("cannot create {}: {}", shm_path(tmp), std::strerror(errno));
    return Publish::kFailed;
  }
  auto fail = [&](const char* what) {
    *error = fmt::format("{} {}: {}", what, shm_path(tmp), std::strerror(errno));
    unlink(shm_path(tmp).c_str());
    return Publish::kFailed;
  };
  // posix_fallocate, not ftruncate: a full /dev/shm fails here instead of raising SIGBUS in the
  // program at the first write to a page tmpfs cannot give.
  if (posix_fallocate(fd.get(), 0, static_cast<off_t>(region_size(n))) != 0) return fail("cannot size");
  auto map = Mapping::map(fd.get(), region_size(n), n, PROT_READ | PROT_WRITE);
  if (!map) return fail("cannot map");
  Header& h = map->header();
  h.version = kVersion;
  h.devices = n;
  h.process_slots = kProcessSlots;
  h.total_bytes = region_size(n);
  copy_text(h.job, sizeof h.job, job);
  copy_text(h.backend, sizeof h.backend, backend);
  for (uint32_t i = 0; i < n; ++i) {
    DeviceRecord& d = map->device(static_cast<int>(i));
    copy_text(d.model, sizeof d.model, devices[i].model);
    copy_text(d.uuid, sizeof d.uuid, devices[i].uuid);
    copy_text(d.pci_bus_id, sizeof d.pci_bus_id, devices[i].pci_bus_id);
    d.capacity = devices[i].capacity;
    d.max_sm_clock_mhz = devices[i].max_sm_clock_mhz;
    d.idle_sm_clock_mhz = devices[i].idle_sm_clock_mhz;
    d.sm_clock_mhz = devices[i].idle_sm_clock_mhz;
  }
  atomic(h.magic).store(kMagic, std::memory_order_release);
  *slot = map->claim_slot();  // before it has a name: a sweeper never finds it empty
  if (link(shm_path(tmp).c_str(), shm_path(name).c_str()) != 0) {
    const int e = errno;
    unlink(shm_path(tmp).c_str());
    if (e == EEXIST) return Publish::kTaken;
    *error = fmt::format("cannot name {}: {}", shm_path(name), std::strerror(e));
    return Publish::kFailed;
  }
  unlink(shm_path(tmp).c_str());
  *out = std::move(map);
  return Publish::kDone;
}

// Removes the regions of `uid` that only dead processes hold, whatever their job (a killed job
// leaves its region in /dev/shm, which is memory), and the temporary files of creators that
// died. Regions kept for vgpu-run (it removes them), live ones, and ones this version cannot
// read (another vgpu build's) are left alone.
void sweep_dead_regions(uid_t uid) {
  const std::string prefix = "vgpu-" + std::to_string(uid) + "-";
  std::vector<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.emplace_back(e->d_name);
    closedir(dir);
  }
  for (const std::string& name : names) {
    if (const size_t at = name.rfind("+new"); at != std::string::npos) {
      const long pid = std::strtol(name.c_str() + at + 4, nullptr, 10);
      struct stat st{};
      if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
          lstat(shm_path(name).c_str(), &st) == 0 && st.st_uid == uid)
        unlink(shm_path(name).c_str());
      continue;
    }
    if (const size_t at = name.find(kCompanionMark); at != std::string::npos) {
      // A companion whose region is gone (its job's processes died without a region).
      struct stat st{};
      if (lstat(shm_path(name.substr(0, at)).c_str(), &st) != 0 && errno == ENOENT &&
          lstat(shm_path(name).c_str(), &st) == 0 && st.st_uid == uid)
        unlink(shm_path(name).c_str());
      continue;
    }
    Opened o = open_owned(name, uid, true);
    if (o.access != Access::kOk) continue;
    std::string why;
    auto map = map_checked(o.fd.get(), true, &why);
    if (map && !map->kept() && !map->reclaim_dead()) unlink_if_same(name, o.fd.get());
  }
}

}  // namespace

std::string region_name(uid_t uid, const std::string& job) noexcept try {
  std::string safe = job;
  for (char& c : safe)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return "vgpu-" + std::to_string(uid) + "-" + safe;
} catch (...) {
  return {};  // out of memory: no name, so nothing is opened
}

std::string companion_path(const std::string& region, int physical) noexcept try {
  return shm_path(companion_prefix(region) + std::to_string(physical));
} catch (...) {
  return {};
}

std::string current_job_id() noexcept try {
  if (std::string j = settings::text(settings::Id::job_id); !j.empty()) return j;
  return "sid" + std::to_string(getsid(0));
} catch (...) {
  return {};
}

std::vector<std::string> list_jobs(uid_t uid) noexcept try {
  std::vector<std::string> jobs;
  const std::string prefix = "vgpu-" + std::to_string(uid) + "-";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      std::string n = e->d_name;
      if (n.rfind(prefix, 0) != 0) continue;
      std::string job = n.substr(prefix.size());
      // "<job>+<k>": the job's region under another name (see kNameChoices); "+new<pid>": one
      // being created.
      if (const size_t plus = job.find('+'); plus != std::string::npos) {
        const std::string k = job.substr(plus + 1);
        if (k.size() != 1 || k[0] < '1' || k[0] >= '0' + kNameChoices) continue;
        job.resize(plus);
      }
      struct stat st{};
      if (lstat(shm_path(n).c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid ||
          (st.st_mode & 077) != 0)
        continue;  // not this user's region
      jobs.push_back(job);
    }
    closedir(dir);
  }
  std::sort(jobs.begin(), jobs.end());
  jobs.erase(std::unique(jobs.begin(), jobs.end()), jobs.end());
  return jobs;
} catch (...) {
  return {};
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

std::unique_ptr<Writer> Writer::attach(const std::string& job, const std::string& backend,
                                       const std::vector<DeviceInfo>& devices) noexcept try {
  const uid_t uid = getuid();
  const std::string base = region_name(uid, job);
  if (base.empty() || devices.size() > kMaxDevices) return nullptr;
  const uint32_t n = static_cast<uint32_t>(devices.size());
  sweep_dead_regions(uid);
  auto impl = std::make_unique<Impl>();
  std::string skipped;  // why the names before the one used were not
  for (int k = 0; k < kNameChoices && !impl->map; ++k) {
    const std::string name = choice_name(base, k);
    // A few rounds per name: the region may be created, replaced or removed by another process
    // of the job while this one joins.
    for (int round = 0; round < 4 && !impl->map; ++round) {
      Opened o = open_owned(name, uid, true);
      if (o.access == Access::kMissing) {
        std::string error;
        const Publish p = publish_region(name, job, backend, devices, &impl->map, &impl->slot, &error);
        if (p == Publish::kFailed) {
          log::warn("status region: {}: not reporting status", error);
          return nullptr;
        }
        if (p == Publish::kDone) impl->name = name;
        continue;  // kTaken: another process of the job named it first; join it
      }
      if (o.access == Access::kForeign || o.access == Access::kDenied) {
        skipped = o.error;
        break;  // never joined: the next name
      }
      if (o.access != Access::kOk) {
        log::warn("{}: not reporting status", o.error);
        return nullptr;
      }
      std::string why;
      auto map = map_checked(o.fd.get(), true, &why);
      if (!map) {
        log::warn("status region {}: {}: replaced", shm_path(name), why);
        unlink_if_same(name, o.fd.get());
        continue;
      }
      if (stale_with_other_devices(*map, devices)) {
        // Left by processes that have all exited, describing other devices (another config
        // under the same job id): this process's job starts afresh.
        unlink_if_same(name, o.fd.get());
        continue;
      }
      if (map->devices() != n) {
        log::warn("status region {} describes {} devices, this process has {}: not reporting status",
                  shm_path(name), map->devices(), n);
        return nullptr;
      }
      map->reclaim_dead();
      const int slot = map->claim_slot();
      if (slot < 0) {
        log::warn("status region {}: all {} process slots taken", shm_path(name), kProcessSlots);
        return nullptr;
      }
      struct stat now{}, mine{};
      if (lstat(shm_path(name).c_str(), &now) != 0 || fstat(o.fd.get(), &mine) != 0 ||
          now.st_ino != mine.st_ino) {
        map->release_slot(slot);  // removed or replaced while joining: look again
        continue;
      }
      atomic(map->header().flags).fetch_and(~kKeptForLauncher);  // live again
      impl->map = std::move(map);
      impl->slot = slot;
      impl->name = name;
    }
  }
  if (!impl->map) {
    log::warn("status region {}: no usable name ({}): not reporting status", shm_path(base), skipped);
    return nullptr;
  }
  if (!skipped.empty())
    log::warn("{}; this job's status region is {} instead", skipped, shm_path(impl->name));
  impl->windows.resize(n);
  return std::unique_ptr<Writer>(new Writer(std::move(impl)));
} catch (const std::exception& e) {
  log::warn("status region: {}: not reporting status", e.what());
  return nullptr;
} catch (...) {
  return nullptr;
}

Writer::~Writer() { detach(); }

void Writer::detach() noexcept try {
  publish();  // the final utilization, for whoever reads the region after this process
  if (impl_->detached.exchange(true)) return;
  Mapping& m = *impl_->map;
  m.release_slot(impl_->slot);
  if (m.reclaim_dead()) return;
  if (kept_for_launcher()) {
    atomic(m.header().flags).fetch_or(kKeptForLauncher);
  } else {
    unlink(shm_path(impl_->name).c_str());
    unlink_companions(impl_->name, getuid());
  }
} catch (...) {
  // Leaving is best effort: a region left behind is reclaimed by the next process.
}

void Writer::add_memory(int device, int64_t delta) noexcept {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  atomic(impl_->map->memory(impl_->slot)[device]).fetch_add(static_cast<uint64_t>(delta));
}

void Writer::add_physical(int device, int64_t delta) noexcept {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  atomic(impl_->map->device(device).physical).fetch_add(static_cast<uint64_t>(delta));
}

void Writer::add_work(int device, double busy_s, bool kernel) noexcept {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  DeviceRecord& d = impl_->map->device(device);
  if (kernel) atomic(d.kernels).fetch_add(1);
  atomic(d.busy_ns).fetch_add(static_cast<uint64_t>(busy_s * 1e9));
}

void Writer::add_work(int device, uint64_t kernels, uint64_t busy_ns) noexcept {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
  DeviceRecord& d = impl_->map->device(device);
  if (kernels > 0) atomic(d.kernels).fetch_add(kernels);
  if (busy_ns > 0) atomic(d.busy_ns).fetch_add(busy_ns);
}

void Writer::advance_clock(int device, double clock_s) noexcept {
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
  add_activity(device, start_s, finish_s, kernel);
}

void Writer::add_activity(int device, double start_s, double finish_s, bool kernel) {
  if (impl_->detached.load(std::memory_order_relaxed)) return;
  if (device < 0 || static_cast<uint32_t>(device) >= impl_->map->devices()) return;
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

bool read_snapshot(uid_t uid, const std::string& job, Snapshot* out, std::string* error) noexcept try {
  const std::string base = region_name(uid, job);
  if (base.empty()) return false;
  std::unique_ptr<Mapping> m;
  std::string name;
  bool writable = true;
  for (int k = 0; k < kNameChoices && !m; ++k) {
    name = choice_name(base, k);
    // Writable when we can (to reclaim dead processes' slots); read-only otherwise.
    writable = true;
    Opened o = open_owned(name, uid, true);
    if (o.access == Access::kDenied) {
      writable = false;
      o = open_owned(name, uid, false);
    }
    if (o.access == Access::kForeign) continue;  // the job's processes took the next name
    if (o.access != Access::kOk) {
      if (error) *error = o.error;
      return false;
    }
    std::string why;
    m = map_checked(o.fd.get(), writable, &why);
    if (!m) {
      if (error) *error = fmt::format("{} is not a valid vgpu status region: {}", shm_path(name), why);
      if (writable) unlink_if_same(name, o.fd.get());  // garbage of ours: the next writer starts afresh
      return false;
    }
  }
  if (!m) {
    if (error) *error = "no status region " + shm_path(base) + " of uid " + std::to_string(uid);
    return false;
  }
  bool live = writable ? m->reclaim_dead() : true;
  Snapshot s;
  s.job = printable(m->header().job, sizeof m->header().job);
  s.backend = printable(m->header().backend, sizeof m->header().backend);
  for (uint32_t i = 0; i < m->devices(); ++i) {
    DeviceRecord& d = m->device(static_cast<int>(i));
    DeviceSnapshot ds;
    ds.info = {printable(d.model, sizeof d.model), printable(d.uuid, sizeof d.uuid),
               printable(d.pci_bus_id, sizeof d.pci_bus_id), d.capacity};
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
    ps.name = printable(p.name, sizeof p.name);
    for (uint32_t d = 0; d < m->devices(); ++d) {
      ps.memory.push_back(atomic(m->memory(slot)[d]).load());
      s.devices[d].used += ps.memory.back();
    }
    s.processes.push_back(std::move(ps));
  }
  // Only the dead were left: the region goes (unless this reader runs under vgpu-run).
  if (writable && !live && !kept_for_launcher()) unlink(shm_path(name).c_str());
  *out = std::move(s);
  return true;
} catch (const std::exception& e) {
  try {
    if (error) *error = std::string("status region: ") + e.what();
  } catch (...) {
  }
  return false;
} catch (...) {
  return false;
}

}  // namespace vgpu::status
