#include "dial.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/log.h"
#include "launcher.h"

namespace simcore::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using namespace wire;

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

enum class Greeting { kOk, kRetry, kRefused };

Greeting greet(int fd, const ClientConfig& c, double timeout_s, HelloReply* hello,
               std::string* error) {
  Frame reply;
  Hello h{c.job, c.rank, c.tcp.empty() ? std::string() : c.token};
  bool other_version = false;
  if (!exchange_once(fd, Frame{1, std::move(h)}, &reply, timeout_s, error, &other_version))
    // e.g. a daemon on its way out closed us: try again; not a daemon of another version.
    return other_version ? Greeting::kRefused : Greeting::kRetry;
  if (auto* r = std::get_if<HelloReply>(&reply.body)) {
    *hello = std::move(*r);
    return Greeting::kOk;
  }
  if (auto* e = std::get_if<ErrorReply>(&reply.body)) {
    *error = fmt::format("vgpud refused the connection: {}", e->message);
    return Greeting::kRefused;
  }
  *error = "vgpud answered Hello with an unexpected message";
  return Greeting::kRefused;
}

// Holds <job>.lock for as long as it lives, if it could take it without waiting.
struct JobLock {
  UniqueFd fd;
  bool taken = false;
};

JobLock try_lock(const std::string& path, std::string* error) {
  JobLock l;
  l.fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!l.fd) {
    *error = fmt::format("cannot open lock file '{}': {}", path, std::strerror(errno));
    return l;
  }
  int rc;
  do {
    rc = ::flock(l.fd.get(), LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  l.taken = rc == 0;
  return l;
}

std::vector<std::string> daemon_args(const ClientConfig& c) {
  return {"--job", c.job, "--socket-dir", c.paths.dir,
          "--idle-timeout", fmt::format("{}", c.daemon_idle_timeout_s), "--lock-fd", "3"};
}

}  // namespace

bool exchange_once(int fd, const Frame& request, Frame* reply, double timeout_s,
                   std::string* error, bool* other_version) {
  std::vector<uint8_t> out;
  if (!append_frame(out, request)) {
    *error = "request could not be encoded";
    return false;
  }
  set_io_timeouts(fd, timeout_s, 0);
  // A daemon that refuses us may have written its Error and closed before our request went
  // out; the send then fails, but the Error is still there to read.
  std::string send_error;
  if (!send_all(fd, out.data(), out.size())) {
    send_error = fmt::format("send: {}", std::strerror(errno));
    timeout_s = std::min(timeout_s, 0.5);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  std::vector<uint8_t> in;
  for (;;) {
    DecodeError err;
    const size_t n = split_frame(in, &err);
    if (err != DecodeError::kNone) {
      *error = fmt::format("bad reply: {}", to_string(err));
      return false;
    }
    if (n > 0) {
      Decoded d = decode_frame(std::span<const uint8_t>(in).first(n));
      if (!d.frame) {
        if (d.error == DecodeError::kBadVersion) {
          *error = fmt::format("the job's vgpud speaks protocol version {}, this client {} (a vgpud of another vgpu "
                               "build: stop it, or run the job's processes with the same build)",
                               d.version, kVersion);
          if (other_version != nullptr) *other_version = true;
        } else {
          *error = fmt::format("bad reply: {}", to_string(d.error));
        }
        return false;
      }
      *reply = std::move(*d.frame);
      return true;
    }
    const double left = seconds_left(deadline);
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(std::ceil(left * 1000))) == 0) {
      *error = send_error.empty() ? "no reply in time" : send_error;
      return false;
    }
    uint8_t chunk[4096];
    const ssize_t k = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (k > 0) {
      in.insert(in.end(), chunk, chunk + k);
    } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
      *error = send_error.empty() ? "the daemon closed the connection" : send_error;
      return false;
    }
  }
}

UniqueFd dial(const ClientConfig& c, HelloReply* hello, std::string* error) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(c.connect_timeout_s));
  const std::string where = c.tcp.empty() ? c.paths.socket : c.tcp;
  auto backoff = std::chrono::milliseconds(2);
  bool started = false;
  std::string last = "nothing tried";
  std::string vgpud;
  for (;;) {
    const double left = seconds_left(deadline);
    int connect_errno = 0;
    UniqueFd fd = c.tcp.empty() ? connect_unix(c.paths.socket, &last, &connect_errno)
                                : connect_tcp(c.tcp, std::clamp(left, 0.01, 5.0), &last);
    if (connect_errno == EACCES || connect_errno == EPERM) {
      *error = last;  // another user's socket or directory: waiting will not change that
      return {};
    }
    if (fd) {
      switch (greet(fd.get(), c, std::clamp(left, 0.01, 10.0), hello, &last)) {
        case Greeting::kOk:
          return fd;
        case Greeting::kRefused:
          *error = last;
          return {};
        case Greeting::kRetry:
          break;
      }
    } else if (c.start_daemon) {
      if (!ensure_private_dir(c.paths.dir, error)) return {};
      JobLock lock = try_lock(c.paths.lock, error);
      if (!lock.fd) return {};
      if (lock.taken) {
        // Nobody holds the lock, so no daemon lives. If ours did, it has died already.
        if (started) {
          const std::string tail = log_tail(c.paths.log);
          *error = fmt::format("vgpud exited at startup (log {}){}{}", c.paths.log,
                               tail.empty() ? "" : ": ", tail);
          return {};
        }
        if (vgpud.empty()) vgpud = find_vgpud(c.vgpud_path, error);
        if (vgpud.empty()) return {};
        vgpu::log::info("vgpud client: starting {} for job '{}'", vgpud, c.job);
        if (!spawn_detached(vgpud, daemon_args(c), lock.fd.get(), c.paths.log, error))
          return {};
        started = true;
        continue;  // our copy of the lock closes here; the daemon holds its own
      }
    }
    if (seconds_left(deadline) <= 0) {
      *error = fmt::format("no vgpud answered on {} within {} s (last: {})", where,
                           c.connect_timeout_s, last);
      return {};
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace simcore::daemon
