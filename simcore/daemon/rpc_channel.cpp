#include "rpc_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "common/proc_info.h"
#include "fork_guard.h"

namespace simcore::daemon {

using namespace wire;

namespace {

// How often a waiting caller looks at the daemon process, and how long the daemon may be seen
// stopped before its calls fail: a SIGSTOPped vgpud is reported within about a second, not
// after the call timeout (120 s).
constexpr auto kStallCheck = std::chrono::milliseconds(200);
constexpr auto kStoppedFor = std::chrono::milliseconds(750);

// The process at the other end of a Unix socket; 0 over TCP (a daemon on another host).
pid_t peer_pid(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) return 0;
  return cred.pid > 0 ? cred.pid : 0;
}

}  // namespace

RpcChannel::RpcChannel(UniqueFd fd, double call_timeout_s)
    : fd_(std::move(fd)), call_timeout_s_(call_timeout_s), daemon_pid_(peer_pid(fd_.get())) {
  // A daemon that stops reading must not block a sender for longer than a call may take.
  set_io_timeouts(fd_.get(), call_timeout_s_, 0);
  guard_against_fork(fd_.get());
}

std::string RpcChannel::daemon_stalled() {
  if (daemon_pid_ <= 0) return {};
  const char state = vgpu::process_state(daemon_pid_);
  if (state == '\0' || state == 'Z' || state == 'X')
    return fmt::format("vgpud (pid {}) has exited", daemon_pid_);
  if (state != 'T' && state != 't') {
    stopped_since_.reset();
    return {};
  }
  const auto now = Clock::now();
  if (!stopped_since_) stopped_since_ = now;
  if (now - *stopped_since_ < kStoppedFor) return {};
  return fmt::format("vgpud (pid {}) is stopped (SIGSTOP or a debugger): not waiting for it",
                     daemon_pid_);
}

RpcChannel::~RpcChannel() {
  close("engine destroyed");  // shutdown(): the daemon sees us leave, whoever holds copies
  unguard(fd_.get());
}

bool RpcChannel::alive() const {
  std::lock_guard lk(mu_);
  return !dead_;
}

std::string RpcChannel::why_dead() const {
  std::lock_guard lk(mu_);
  return why_dead_;
}

void RpcChannel::fail_locked(const std::string& why) {
  if (!dead_) {
    dead_ = true;
    why_dead_ = why;
    // Wakes a reader out of poll(); the fd itself is closed only by the destructor, so no
    // thread can ever use a recycled descriptor number.
    ::shutdown(fd_.get(), SHUT_RDWR);
  }
  for (auto& [id, slot] : pending_) {
    slot->done = true;
    slot->cv.notify_one();
  }
  pending_.clear();
}

void RpcChannel::close(const std::string& why) {
  std::lock_guard lk(mu_);
  fail_locked(why);
}

// The reader is leaving: another waiting caller takes over reading.
void RpcChannel::hand_off_locked() {
  if (!reading_ && !pending_.empty()) pending_.begin()->second->cv.notify_one();
}

void RpcChannel::dispatch(Frame frame, std::string* why, bool* broken) {
  std::lock_guard lk(mu_);
  auto it = pending_.find(frame.request_id);
  if (it != pending_.end()) {
    it->second->reply = std::move(frame.body);
    it->second->done = true;
    it->second->cv.notify_one();
    pending_.erase(it);
  } else if (const auto* e = std::get_if<ErrorReply>(&frame.body); e && frame.request_id == 0) {
    *why = fmt::format("the daemon refused this client: {}", e->message);
    *broken = true;
  }
  // Otherwise a late reply to a call that gave up: dropped.
}

RpcChannel::Read RpcChannel::read_and_dispatch(std::optional<Clock::time_point> deadline,
                                               std::string* why) {
  int timeout_ms = -1;
  if (deadline) {
    const double left = std::chrono::duration<double>(*deadline - Clock::now()).count();
    if (left <= 0) return Read::kTimeout;
    timeout_ms = static_cast<int>(std::ceil(std::min(left, 3600.0) * 1000));
  }
  pollfd p{fd_.get(), POLLIN, 0};
  const int ready = ::poll(&p, 1, timeout_ms);
  if (ready == 0) return Read::kTimeout;
  if (ready < 0) return errno == EINTR ? Read::kProgress : (*why = "poll failed", Read::kClosed);

  const size_t old = rbuf_.size();
  rbuf_.resize(old + (64u << 10));
  const ssize_t k = ::recv(fd_.get(), rbuf_.data() + old, 64u << 10, MSG_DONTWAIT);
  rbuf_.resize(old + static_cast<size_t>(std::max<ssize_t>(k, 0)));
  if (k == 0) {
    *why = "the daemon closed the connection";
    return Read::kClosed;
  }
  if (k < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return Read::kProgress;
    *why = fmt::format("receiving from the daemon failed: {}", std::strerror(errno));
    return Read::kClosed;
  }
  size_t off = 0;
  bool broken = false;
  while (!broken) {
    const std::span<const uint8_t> rest(rbuf_.data() + off, rbuf_.size() - off);
    DecodeError err;
    const size_t n = split_frame(rest, &err);
    if (err != DecodeError::kNone) {
      *why = fmt::format("bad frame from the daemon: {}", to_string(err));
      return Read::kClosed;
    }
    if (n == 0) break;
    Decoded d = decode_frame(rest.first(n));
    off += n;
    if (!d.frame) {
      *why = fmt::format("bad frame from the daemon: {}", to_string(d.error));
      return Read::kClosed;
    }
    dispatch(std::move(*d.frame), why, &broken);
  }
  rbuf_.erase(rbuf_.begin(), rbuf_.begin() + static_cast<ptrdiff_t>(off));
  return broken ? Read::kClosed : Read::kProgress;
}

std::optional<Body> RpcChannel::call(Body request, bool wait_forever) {
  Slot slot;
  uint64_t id;
  {
    std::lock_guard lk(mu_);
    if (dead_) return std::nullopt;
    id = next_id_++;
    pending_.emplace(id, &slot);
  }
  std::vector<uint8_t> frame;
  bool sent = append_frame(frame, Frame{id, std::move(request)});
  if (!sent) {
    vgpu::log::once(vgpu::log::Level::error, "vgpud-encode",
                    "vgpud client: a request breaks the protocol's caps (too many dependencies, "
                    "a NaN time, an over-long string) and was not sent");
  } else {
    std::lock_guard wl(write_mu_);
    sent = send_all(fd_.get(), frame.data(), frame.size());
    if (!sent) {
      const int e = errno;
      std::lock_guard lk(mu_);
      fail_locked(fmt::format("sending to the daemon failed: {}", std::strerror(e)));
    }
  }

  std::unique_lock lk(mu_);
  if (!sent) {
    pending_.erase(id);
    hand_off_locked();
    return std::nullopt;
  }
  std::optional<Clock::time_point> deadline;
  if (!wait_forever && call_timeout_s_ > 0)
    deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(call_timeout_s_));
  bool timed_out = false;
  while (!slot.done) {
    if (!reading_) {
      // Lead: read until our reply (or something else) comes.
      reading_ = true;
      lk.unlock();
      std::string why;
      // Read in short slices when the daemon is a local process, and look at it in between.
      std::optional<Clock::time_point> until = deadline;
      const bool watch = daemon_pid_ > 0;
      if (watch && (!until || *until > Clock::now() + kStallCheck)) until = Clock::now() + kStallCheck;
      Read r = read_and_dispatch(until, &why);
      std::string stalled;
      if (r == Read::kTimeout && watch && (!deadline || Clock::now() < *deadline)) {
        stalled = daemon_stalled();
        r = stalled.empty() ? Read::kProgress : Read::kClosed;
        why = stalled;
      }
      lk.lock();
      reading_ = false;
      if (r == Read::kClosed) {
        if (!dead_) vgpu::log::error("vgpud client: {}", why);
        fail_locked(why);
      } else if (r == Read::kTimeout && !slot.done) {
        timed_out = true;
        break;
      }
      continue;
    }
    // Follow: sleep until the reader hands us our reply, or stops reading.
    auto ready = [&] { return slot.done || !reading_; };
    if (!deadline) {
      slot.cv.wait(lk, ready);
    } else if (!slot.cv.wait_until(lk, *deadline, ready)) {
      timed_out = true;
      break;
    }
  }
  if (timed_out) {
    pending_.erase(id);
    vgpu::log::error("vgpud client: no reply within {} s; treating the daemon as gone",
                     call_timeout_s_);
    fail_locked(fmt::format("no reply within {} s", call_timeout_s_));
  }
  hand_off_locked();
  return std::move(slot.reply);
}

}  // namespace simcore::daemon
