// A bare socket client for the tests that speak (or break) the protocol by hand.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "protocol.h"
#include "socket_io.h"

namespace simcore::testing {

struct RawReplies {
  std::vector<wire::Frame> frames;
  bool eof = false;         // the daemon closed the connection
  bool bad_bytes = false;   // something that was not a frame came back
};

inline bool raw_send(int fd, const std::vector<uint8_t>& bytes) {
  return daemon::send_all(fd, bytes.data(), bytes.size());
}

inline bool raw_send(int fd, const wire::Frame& f) {
  std::vector<uint8_t> b;
  return wire::append_frame(b, f) && raw_send(fd, b);
}

// Reads frames until `want` have arrived, the peer closes, or `limit_s` passes.
inline RawReplies raw_read(int fd, size_t want, double limit_s = 10) {
  RawReplies r;
  std::vector<uint8_t> buf;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (r.frames.size() < want) {
    wire::DecodeError err;
    const size_t n = wire::split_frame(buf, &err);
    if (err != wire::DecodeError::kNone) {
      r.bad_bytes = true;
      return r;
    }
    if (n > 0) {
      auto d = wire::decode_frame(std::span<const uint8_t>(buf).first(n));
      if (!d.frame) {
        r.bad_bytes = true;
        return r;
      }
      r.frames.push_back(std::move(*d.frame));
      buf.erase(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n));
      continue;
    }
    const auto left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) return r;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
    uint8_t chunk[4096];
    const ssize_t k = ::recv(fd, chunk, sizeof(chunk), 0);
    if (k <= 0) {
      r.eof = true;
      return r;
    }
    buf.insert(buf.end(), chunk, chunk + k);
  }
  return r;
}

// After the frames we expect: does the daemon close the connection (within `limit_s`)?
inline bool raw_sees_eof(int fd, double limit_s = 10) {
  RawReplies r = raw_read(fd, ~size_t{0}, limit_s);
  return r.eof;
}

inline const wire::ErrorReply* as_error(const wire::Frame& f) {
  return std::get_if<wire::ErrorReply>(&f.body);
}

}  // namespace simcore::testing
