#include "shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "common/log.h"
#include "common/settings.h"
#include "common/proc_info.h"

namespace vgpu::nccl {

ShmMapping::~ShmMapping() {
  if (data_ != nullptr) munmap(data_, size_);
  unlink();
}

void ShmMapping::unlink() {
  if (linked_) {
    shm_unlink(name_.c_str());
    linked_ = false;
  }
}

std::string ShmMapping::create_own(const std::string& name, size_t bytes) {
  shm_unlink(name.c_str());  // a leftover of an exited process with this pid (ENOENT otherwise)
  return create(name, bytes);
}

std::string ShmMapping::create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return fmt::format("shm_open({}) failed: {}", name, std::strerror(errno));
  // Reserve the pages now: on a full tmpfs this fails here instead of SIGBUS on first touch.
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return fmt::format("cannot reserve {} bytes in /dev/shm for {}: {} (enlarge /dev/shm or lower "
                       "VGPU_NCCL_RING_BYTES)", bytes, name, std::strerror(rc));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return fmt::format("mmap of {} failed: {}", name, std::strerror(err));
  }
  data_ = p;
  size_ = bytes;
  name_ = name;
  linked_ = true;
  return {};
}

bool is_segment_name(const std::string& name) {
  const std::string prefix = fmt::format("/vgpu-nccl.{}.", static_cast<unsigned>(getuid()));
  return name.size() < 256 && name.compare(0, prefix.size(), prefix) == 0 &&
         name.find('/', 1) == std::string::npos;
}

std::string ShmMapping::open(const std::string& name, size_t min_bytes) {
  // The name comes from a handle or a peer's slot: only this user's plugin segments are
  // opened, never following a symlink or blocking on a FIFO, and only if the opened file is a
  // regular file of this user closed to everyone else (another user could have made the name).
  if (!is_segment_name(name)) return fmt::format("{} is not a segment name of this user's plugin", name);
  int fd = ::open(("/dev/shm" + name).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return fmt::format("open(/dev/shm{}) failed: {}", name, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
    close(fd);
    return fmt::format("segment {} is not a private file of this user (owner uid {}, mode {:o}): not used",
                       name, static_cast<unsigned>(st.st_uid), st.st_mode & 07777);
  }
  if (static_cast<size_t>(st.st_size) < min_bytes) {
    close(fd);
    return fmt::format("segment {} is too small or unreadable", name);
  }
  size_t bytes = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) return fmt::format("mmap of {} failed: {}", name, std::strerror(err));
  data_ = p;
  size_ = bytes;
  name_ = name;
  linked_ = false;  // the creator owns the name
  return {};
}

std::string job_tag() {
  const std::string job = vgpu::settings::text(vgpu::settings::Id::job_id);
  if (job.empty()) return fmt::format("sid{}", static_cast<long>(getsid(0)));
  std::string s;
  for (const char ch : job) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_';
    s.push_back(ok ? ch : '_');
  }
  if (s.size() > 32) s = fmt::format("h{:016x}", std::hash<std::string>{}(job));
  return s;
}

std::string make_segment_name(char kind) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("/vgpu-nccl.{}.{}.{}.{}.{}", static_cast<unsigned>(getuid()), job_tag(), kind,
                     static_cast<long>(getpid()), counter.fetch_add(1));
}

uint64_t random_nonce() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof v)) {
    v = (static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&v);
  }
  return v | 1;  // never 0
}

int reap_stale_segments() {
  std::string prefix = fmt::format("vgpu-nccl.{}.{}.", static_cast<unsigned>(getuid()), job_tag());
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // <prefix><kind>.<pid>.<n>
    int pid = 0;
    char kind = 0;
    if (std::sscanf(name.c_str() + prefix.size(), "%c.%d.", &kind, &pid) != 2) continue;
    if (!process_alive(pid) && shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

bool process_alive(int pid) {
  if (pid <= 0) return false;
  if (pid == getpid()) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // An exited child nobody reaped yet still answers kill(): look at its state ('\0': no
  // procfs, or it went just now; trust kill()).
  const char state = vgpu::process_state(pid);
  return state != 'Z' && state != 'X';
}

}  // namespace vgpu::nccl
