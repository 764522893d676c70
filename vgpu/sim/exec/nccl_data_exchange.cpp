#include "sim/exec/nccl_data_exchange.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "sim/exec/nccl_rendezvous.h"

namespace vgpu {
namespace {

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The whole file at `path` into *out; false when it does not exist (yet).
bool read_file(const std::string& path, std::vector<char>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st{};
  bool ok = fstat(fd, &st) == 0;
  if (ok) {
    out->resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (ok && got < out->size()) {
      const ssize_t r = ::read(fd, out->data() + got, out->size() - got);
      if (r < 0 && errno == EINTR) continue;
      ok = r > 0;
      if (ok) got += static_cast<size_t>(r);
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

NcclDataExchange::NcclDataExchange(std::string dir) : dir_(std::move(dir)) {}

const std::string& NcclDataExchange::dir() {
  std::lock_guard l(mu_);
  if (dir_.empty()) dir_ = NcclRendezvous::default_path() + ".data";
  return dir_;
}

bool NcclDataExchange::ready() {
  if (tried_) return ok_;
  tried_ = true;
  if (dir_.empty()) dir_ = NcclRendezvous::default_path() + ".data";
  // Only this user's folder (the first rank creates it, mode 0700).
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    log::warn("sim nccl: cannot create {} ({}): NCCL collectives move no data", dir_, std::strerror(errno));
    return false;
  }
  struct stat st{};
  if (::lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
    log::warn("sim nccl: {} is not this user's folder: NCCL collectives move no data", dir_);
    return false;
  }
  ok_ = true;
  return true;
}

std::string NcclDataExchange::name(uint64_t comm, uint64_t seq, int task, int rank) const {
  return fmt::format("{}/{:016x}-{}-{}-{}", dir_, comm, seq, task, rank);
}

std::string NcclDataExchange::p2p_name(uint64_t comm, int src, int dst, uint64_t k) const {
  return fmt::format("{}/{:016x}-p2p-{}-{}-{}", dir_, comm, src, dst, k);
}

std::string NcclDataExchange::arrival_name(uint64_t comm, int src, int dst, uint64_t k, bool receive) const {
  return fmt::format("{}/{:016x}-arrival-{}-{}-{}-{}", dir_, comm, receive ? "recv" : "send", src, dst, k);
}

std::string NcclDataExchange::abandoned_name(uint64_t comm, uint64_t seq, int rank) const {
  return fmt::format("{}/{:016x}-{}-abandoned-{}", dir_, comm, seq, rank);
}

bool NcclDataExchange::put(const std::string& path, const void* data, size_t bytes) {
  const std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && write_all(fd, static_cast<const char*>(data), bytes);
  if (fd >= 0) ::close(fd);
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    log::warn("sim nccl: cannot post {} ({}): the other ranks of this collective keep their data", path,
              std::strerror(errno));
    ::unlink(tmp.c_str());
  }
  return ok;
}

bool NcclDataExchange::post(uint64_t comm, uint64_t seq, int task, int rank, const void* data, size_t bytes) {
  std::string path;
  {
    std::lock_guard l(mu_);
    if (!ready()) return false;
    path = name(comm, seq, task, rank);
    posted_[{comm, rank}].emplace_back(seq, path);
  }
  return put(path, data, bytes);
}

bool NcclDataExchange::send(uint64_t comm, int src, int dst, uint64_t k, const void* data, size_t bytes) {
  std::string path;
  {
    std::lock_guard l(mu_);
    if (!ready()) return false;
    path = p2p_name(comm, src, dst, k);
  }
  return put(path, data, bytes);
}

bool NcclDataExchange::receive(uint64_t comm, int src, int dst, uint64_t k, double timeout_s,
                               std::vector<char>* out) {
  std::string path;
  {
    std::lock_guard l(mu_);
    if (!ready()) return false;
    path = p2p_name(comm, src, dst, k);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(20);
  while (!read_file(path, out)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      log::warn("sim nccl: rank {} did not send its {}-th message to rank {} of comm {:x} within {} s: the recv "
                "buffer keeps what it held", src, k, dst, comm, timeout_s);
      return false;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  ::unlink(path.c_str());  // its only reader
  return true;
}

bool NcclDataExchange::post_arrival(uint64_t comm, int src, int dst, uint64_t k, bool receive, double arrival) {
  std::string path;
  {
    std::lock_guard l(mu_);
    if (!ready()) return false;
    path = arrival_name(comm, src, dst, k, receive);
  }
  return put(path, &arrival, sizeof arrival);
}

bool NcclDataExchange::take_arrival(uint64_t comm, int src, int dst, uint64_t k, bool receive, double timeout_s,
                                    double* arrival) {
  std::string path;
  {
    std::lock_guard l(mu_);
    if (!ready()) return false;
    path = arrival_name(comm, src, dst, k, receive);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(20);
  std::vector<char> bytes;
  // A process of the job is still on its way to its send: wait without burning a shared core.
  while (!read_file(path, &bytes) || bytes.size() != sizeof *arrival) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  std::memcpy(arrival, bytes.data(), sizeof *arrival);
  ::unlink(path.c_str());  // its only reader
  return true;
}

void NcclDataExchange::abandon(uint64_t comm, uint64_t seq, int rank) {
  std::string path;
  {
    std::lock_guard l(mu_);
    if (!ready()) return;
    path = abandoned_name(comm, seq, rank);
    posted_[{comm, rank}].emplace_back(seq, path);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) ::close(fd);
}

bool NcclDataExchange::collect(uint64_t comm, uint64_t seq, int task, int nranks, double timeout_s,
                               std::vector<std::vector<char>>* out) {
  std::vector<std::string> paths(nranks), abandoned(nranks);
  {
    std::lock_guard l(mu_);
    if (!ready()) return false;
    for (int r = 0; r < nranks; ++r) {
      paths[r] = name(comm, seq, task, r);
      abandoned[r] = abandoned_name(comm, seq, r);
    }
  }
  out->assign(nranks, {});
  std::vector<bool> have(nranks, false);
  int missing = nranks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    for (int r = 0; r < nranks; ++r)
      if (!have[r] && read_file(paths[r], &(*out)[r])) {
        have[r] = true;
        --missing;
      }
    if (missing == 0) return true;
    for (int r = 0; r < nranks; ++r)
      if (!have[r] && ::access(abandoned[r].c_str(), F_OK) == 0) {
        log::debug("sim nccl: rank {} moves no data at collective {} of comm {:x}: neither does this one", r,
                   seq, comm);
        return false;
      }
    if (std::chrono::steady_clock::now() >= deadline) break;
    // A rank of another process (or another stream of this one) is still on its way: wait
    // without burning a core that 64 ranks share.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  const int first = static_cast<int>(std::find(have.begin(), have.end(), false) - have.begin());
  log::warn("sim nccl: {} of {} ranks (first: rank {}) did not bring their data to collective {} of comm {:x} "
            "within {} s: the recv buffers keep what they held",
            missing, nranks, first, seq, comm, timeout_s);
  return false;
}

void NcclDataExchange::done(uint64_t comm, uint64_t seq, int rank) {
  std::vector<std::string> gone;
  {
    std::lock_guard l(mu_);
    auto it = posted_.find({comm, rank});
    if (it == posted_.end()) return;
    auto& q = it->second;
    while (!q.empty() && q.front().first < seq) {
      gone.push_back(std::move(q.front().second));
      q.pop_front();
    }
    if (q.empty()) posted_.erase(it);
  }
  for (const std::string& p : gone) ::unlink(p.c_str());
}

}  // namespace vgpu
