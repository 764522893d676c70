// vgpud's event loop: one thread, epoll over the listening sockets and every client, so one
// slow or dead client can hold up nobody. Requests run against the engine in arrival order per
// connection. A wait_final whose event is not final yet never blocks the loop: it runs on a
// worker (wait_pool.h) and its reply goes out when the engine's own wait returns; meanwhile the
// same connection's later requests are answered (replies may overtake each other).
//
// A client that disconnects has its registered ranks unregistered and the answers to its
// pending waits discarded. A client that sends an undecodable frame gets an Error frame and is
// disconnected. A client over TCP must present the job token in its Hello; a Unix-socket client
// must be the same user (SO_PEERCRED). The loop returns on a Shutdown request, on stop(), or
// after `idle_timeout_s` with no client; in every case it then shuts the engine down (so that
// blocked waits return), answers every pending wait "not final", and closes all connections.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "simcore/engine.h"

namespace simcore::daemon {

struct ServerOptions {
  std::string job;                 // the job id Hello must name
  std::string unix_path;           // listen here (empty: no Unix socket)
  std::string tcp_listen;          // "host:port" (empty: no TCP)
  std::string token;               // TCP clients' shared secret; required when tcp_listen is set
  double idle_timeout_s = 30;      // with no client connected this long, run() returns; < 0: never
  uid_t owner_uid = geteuid();     // the only uid allowed on the Unix socket
  size_t max_output_bytes = 256u << 20;   // replies a client leaves unread before it is dropped
  size_t max_waits_per_client = 1024;    // pending wait_final calls of one connection
  size_t max_wait_threads = 4096;         // pending wait_final calls in all
  double share_timeout_s = 60;            // a ShareCollectives key's wait (wire::kShareTimeoutS)
};

enum class ServerExit { kIdle, kShutdownRequest, kStopped };
const char* to_string(ServerExit e);

class Server {
 public:
  // Binds the sockets. nullptr (and *error) when it cannot.
  static std::unique_ptr<Server> create(Engine& engine, const ServerOptions& options,
                                        std::string* error);
  virtual ~Server() = default;

  virtual ServerExit run() = 0;
  // Ends run() soon; callable from any thread and from a signal handler.
  virtual void stop() = 0;
  virtual int tcp_port() const = 0;   // the bound TCP port, 0 without TCP
};

}  // namespace simcore::daemon
