#include "job_paths.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "common/settings.h"

namespace simcore::daemon {
namespace {

constexpr size_t kMaxStem = 64;
constexpr int kDirChoices = 8;

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::string default_job_id() {
  std::string id = vgpu::settings::text(vgpu::settings::Id::job_id);
  if (!id.empty()) return id;
  return fmt::format("sid{}", static_cast<long>(getsid(0)));
}

std::string default_socket_dir() {
  std::string dir = vgpu::settings::text(vgpu::settings::Id::daemon_dir);
  if (!dir.empty()) return dir;  // the user's own choice: checked when used, never replaced
  const std::string xdg = env_or_empty("XDG_RUNTIME_DIR");
  const std::string base =
      !xdg.empty() ? xdg + "/vgpu" : fmt::format("/tmp/vgpu-{}", static_cast<unsigned>(geteuid()));
  // Someone else may have created the name first (in /tmp anyone can): such a directory is
  // never used, and the job takes "<base>.1" ... ".7" instead, the first that is absent or a
  // real directory of this user, so every process of the job still picks the same one.
  for (int k = 0; k < kDirChoices; ++k) {
    const std::string candidate = k == 0 ? base : fmt::format("{}.{}", base, k);
    struct stat st {};
    if (lstat(candidate.c_str(), &st) != 0) {
      if (errno != ENOENT) continue;
    } else if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      continue;
    }
    if (k > 0)
      vgpu::log::once(vgpu::log::Level::warn, "vgpu-runtime-dir",
                      fmt::format("'{}' is not a directory of this user: using '{}' instead",
                                  base, candidate));
    return candidate;
  }
  return base;  // all taken: ensure_private_dir refuses it with the reason
}

std::string job_file_stem(std::string_view job) {
  std::string stem;
  stem.reserve(job.size());
  for (char c : job) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    stem.push_back(safe ? c : '_');
  }
  if (!stem.empty() && stem.front() == '.') stem.front() = '_';  // no hidden or ".." names
  // A changed or cut id gets a hash of the original, so "a/b" and "a_b" stay two jobs.
  if (stem != job || stem.size() > kMaxStem)
    stem = fmt::format("{}-{:016x}", stem.substr(0, 40), fnv1a(job));
  return stem;
}

bool job_paths(std::string_view dir, std::string_view job, JobPaths* out, std::string* error) {
  if (job.empty()) {
    *error = "empty job id";
    return false;
  }
  JobPaths p;
  p.dir = dir.empty() ? default_socket_dir() : std::string(dir);
  while (p.dir.size() > 1 && p.dir.back() == '/') p.dir.pop_back();
  const std::string base = p.dir + "/" + job_file_stem(job);
  p.socket = base + ".sock";
  p.lock = base + ".lock";
  p.log = base + ".log";
  if (p.socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
    *error = fmt::format("socket path '{}' is longer than a Unix socket allows ({} bytes); "
                         "set VGPU_DAEMON_DIR to a shorter directory",
                         p.socket, sizeof(sockaddr_un{}.sun_path) - 1);
    return false;
  }
  *out = std::move(p);
  return true;
}

bool ensure_private_dir(const std::string& dir, std::string* error) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = fmt::format("cannot create '{}': {}", dir, std::strerror(errno));
    return false;
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    *error = fmt::format("cannot stat '{}': {}", dir, std::strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = fmt::format("'{}' is not a directory (a symlink or file is refused)", dir);
    return false;
  }
  if (st.st_uid != geteuid()) {
    *error = fmt::format("'{}' belongs to uid {}, not to this user (uid {}); refusing to use it",
                         dir, static_cast<unsigned>(st.st_uid), static_cast<unsigned>(geteuid()));
    return false;
  }
  if ((st.st_mode & 077) != 0 && chmod(dir.c_str(), 0700) != 0) {
    *error = fmt::format("'{}' is open to other users and chmod failed: {}", dir,
                         std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace simcore::daemon
