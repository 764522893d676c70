// Socket plumbing shared by vgpud and its client: listening and connecting on Unix and TCP
// sockets, the peer-uid check, and writes that never raise SIGPIPE in the host process.
// Every fd made here is close-on-exec. Functions return -1/false and set *error on failure.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace simcore::daemon {

// Owns one file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset(int fd = -1);
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A listening, non-blocking Unix socket at `path` (a stale file there is replaced: callers hold
// the job lock), mode 0600.
UniqueFd listen_unix(const std::string& path, std::string* error);

// A listening, non-blocking TCP socket on "host:port" ("[v6addr]:port" for IPv6; port 0 picks
// one, reported in *bound_port).
UniqueFd listen_tcp(std::string_view host_port, int* bound_port, std::string* error);

// Blocking connected sockets. connect_unix fails at once when nobody listens; *err_no (when
// given) tells why (ENOENT/ECONNREFUSED: no daemon; EACCES: not ours to open).
UniqueFd connect_unix(const std::string& path, std::string* error, int* err_no = nullptr);
UniqueFd connect_tcp(std::string_view host_port, double timeout_s, std::string* error);

bool split_host_port(std::string_view host_port, std::string* host, std::string* port);

// The uid of the process at the other end of a Unix socket (SO_PEERCRED).
bool peer_uid(int fd, uid_t* uid);
// Who may talk to a user's daemon: that same user only.
inline bool uid_may_connect(uid_t peer, uid_t owner) { return peer == owner; }

// Writes all of [p, p+n) on a blocking socket (EINTR retried, MSG_NOSIGNAL). False on error or
// when the socket's send timeout expires.
bool send_all(int fd, const uint8_t* p, size_t n);
// Bounds how long a blocking send/recv on `fd` may wait (0: forever).
void set_io_timeouts(int fd, double send_timeout_s, double recv_timeout_s);
bool set_nonblocking(int fd);

// Compares secrets without leaking where they first differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace simcore::daemon
