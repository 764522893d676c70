#include "socket_io.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace simcore::daemon {
namespace {

std::string errno_text(std::string_view what) {
  return fmt::format("{}: {}", what, std::strerror(errno));
}

bool fill_unix_addr(const std::string& path, sockaddr_un* addr, std::string* error) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr->sun_path)) {
    *error = fmt::format("bad Unix socket path '{}'", path);
    return false;
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() { if (head) freeaddrinfo(head); }
};

bool resolve(std::string_view host_port, bool passive, AddrInfoList* out, std::string* error) {
  std::string host, port;
  if (!split_host_port(host_port, &host, &port)) {
    *error = fmt::format("'{}' is not host:port", host_port);
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints,
                             &out->head);
  if (rc != 0) {
    *error = fmt::format("cannot resolve '{}': {}", host_port, gai_strerror(rc));
    return false;
  }
  return true;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

bool split_host_port(std::string_view hp, std::string* host, std::string* port) {
  size_t colon;
  if (!hp.empty() && hp.front() == '[') {  // [v6]:port
    const size_t close = hp.find(']');
    if (close == std::string_view::npos || close + 1 >= hp.size() || hp[close + 1] != ':')
      return false;
    *host = std::string(hp.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = hp.rfind(':');
    if (colon == std::string_view::npos) return false;
    *host = std::string(hp.substr(0, colon));
  }
  *port = std::string(hp.substr(colon + 1));
  if (port->empty() || port->size() > 5) return false;
  for (char c : *port)
    if (c < '0' || c > '9') return false;
  return std::stoi(*port) <= 65535;
}

UniqueFd listen_unix(const std::string& path, std::string* error) {
  sockaddr_un addr;
  if (!fill_unix_addr(path, &addr, error)) return {};
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    *error = errno_text("socket");
    return {};
  }
  ::unlink(path.c_str());  // a socket file left by a daemon that died
  // The directory is 0700 already; the umask keeps the socket private from its first instant.
  const mode_t old = ::umask(0177);
  const int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0) {
    *error = errno_text(fmt::format("bind {}", path));
    return {};
  }
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
    *error = errno_text(fmt::format("listen {}", path));
    ::unlink(path.c_str());
    return {};
  }
  return fd;
}

UniqueFd listen_tcp(std::string_view host_port, int* bound_port, std::string* error) {
  AddrInfoList ai;
  if (!resolve(host_port, true, &ai, error)) return {};
  std::string last = "no address";
  for (addrinfo* a = ai.head; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                         a->ai_protocol));
    if (!fd) continue;
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last = errno_text(fmt::format("bind {}", host_port));
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    *bound_port = ss.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    return fd;
  }
  *error = last;
  return {};
}

UniqueFd connect_unix(const std::string& path, std::string* error, int* err_no) {
  sockaddr_un addr;
  int ignored;
  if (!err_no) err_no = &ignored;
  *err_no = EINVAL;
  if (!fill_unix_addr(path, &addr, error)) return {};
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    *error = errno_text("socket");
    return {};
  }
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    *err_no = errno;
    *error = errno_text(fmt::format("connect {}", path));
    return {};
  }
  *err_no = 0;
  return fd;
}

UniqueFd connect_tcp(std::string_view host_port, double timeout_s, std::string* error) {
  AddrInfoList ai;
  if (!resolve(host_port, false, &ai, error)) return {};
  *error = "no address";
  for (addrinfo* a = ai.head; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                         a->ai_protocol));
    if (!fd) continue;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *error = errno_text(fmt::format("connect {}", host_port));
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      const int ms = static_cast<int>(std::ceil(std::max(timeout_s, 0.0) * 1000));
      int soerr = 0;
      socklen_t len = sizeof(soerr);
      if (::poll(&p, 1, ms) != 1 ||
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
        errno = soerr ? soerr : ETIMEDOUT;
        *error = errno_text(fmt::format("connect {}", host_port));
        continue;
      }
    }
    const int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  return {};
}

bool peer_uid(int fd, uid_t* uid) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred))
    return false;
  *uid = cred.uid;
  return true;
}

bool send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;  // EAGAIN here means the send timeout expired
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void set_io_timeouts(int fd, double send_timeout_s, double recv_timeout_s) {
  auto tv = [](double s) {
    timeval t{};
    if (s > 0) {
      t.tv_sec = static_cast<time_t>(s);
      t.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(t.tv_sec)) * 1e6);
    }
    return t;
  };
  const timeval snd = tv(send_timeout_s), rcv = tv(recv_timeout_s);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
}

bool set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace simcore::daemon
