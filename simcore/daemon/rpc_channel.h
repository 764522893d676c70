// The client's end of one daemon connection, shared by all threads of a process: each call
// gets a request id and sends its frame under a write lock; then, while its reply is missing,
// one of the waiting callers at a time reads the socket and hands every reply to the caller it
// belongs to (leader/follower). So a lone caller reads its own reply (no extra thread hop, no
// background thread in the host process), and many callers share one reader.
// When the connection drops, every waiting call wakes at once with "no reply", and so does
// every later call. A local daemon that exits or is stopped (SIGSTOP) is noticed by the waiting
// reader within about a second and treated the same way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <sys/types.h>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol.h"
#include "socket_io.h"

namespace simcore::daemon {

class RpcChannel {
 public:
  // `fd`: a connected, greeted, blocking socket. `call_timeout_s` bounds every call made with
  // a timeout (0: none).
  RpcChannel(UniqueFd fd, double call_timeout_s);
  ~RpcChannel();  // no call may be in progress
  RpcChannel(const RpcChannel&) = delete;
  RpcChannel& operator=(const RpcChannel&) = delete;

  // The reply to `request`, or nullopt when the connection is gone, the call timed out (then the
  // channel counts as broken: a daemon that does not answer in time is not trusted again), or
  // close() was called. An Error reply is returned as the ErrorReply it is.
  std::optional<wire::Body> call(wire::Body request, bool wait_forever = false);

  // Fails every pending and later call; the daemon sees this client disconnect.
  void close(const std::string& why);
  bool alive() const;
  std::string why_dead() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::optional<wire::Body> reply;
    bool done = false;
    std::condition_variable cv;
  };
  enum class Read { kProgress, kTimeout, kClosed };

  // As the reader (mu_ not held): waits for bytes until `deadline` (nullopt: forever), then
  // hands out every whole frame received.
  Read read_and_dispatch(std::optional<Clock::time_point> deadline, std::string* why);
  void dispatch(wire::Frame frame, std::string* why, bool* broken);
  void fail_locked(const std::string& why);
  void hand_off_locked();
  // As the reader, between slices of a wait: why the local daemon cannot answer (exited, or
  // stopped for kStoppedFor), or empty.
  std::string daemon_stalled();

  UniqueFd fd_;
  double call_timeout_s_;
  mutable std::mutex mu_;                      // guards everything below but rbuf_
  std::unordered_map<uint64_t, Slot*> pending_;
  uint64_t next_id_ = 1;
  bool dead_ = false;
  bool reading_ = false;                       // a caller is the reader now
  std::string why_dead_;
  std::mutex write_mu_;                        // one frame at a time on the socket
  std::vector<uint8_t> rbuf_;                  // only the current reader touches it
  const pid_t daemon_pid_;                     // the daemon (Unix socket), 0 over TCP
  std::optional<Clock::time_point> stopped_since_;  // only the current reader touches it
};

}  // namespace simcore::daemon
