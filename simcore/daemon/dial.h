// Reaching the job's daemon: connect, greet, and — when nobody answers on the Unix socket —
// start one, so that however many ranks arrive at once, exactly one daemon is started:
//
//   loop until the deadline:
//     connect + Hello                     → done (or a refusal, which is final)
//     else try flock(<job>.lock, LOCK_NB)  → we hold it: no daemon is alive (a living daemon
//                                            always holds it); start vgpud with our lock fd as
//                                            its fd 3, so the lock passes to the daemon
//                                          → if we started one before and the lock is free
//                                            again, it died at startup: report its log
//     back off (2 ms doubling to 50 ms)
#pragma once

#include <string>

#include "client_config.h"
#include "protocol.h"
#include "socket_io.h"

namespace simcore::daemon {

// A connected, greeted socket, or an empty one with *error set.
UniqueFd dial(const ClientConfig& config, wire::HelloReply* hello, std::string* error);

// One request and its reply on a socket nobody else reads (the Hello, or a lone Shutdown),
// waiting at most `timeout_s`. False on a dropped connection or timeout. *other_version (when
// given) is set when the reply came in another protocol version (a vgpud of another build: no
// retry will change that; *error names both versions).
bool exchange_once(int fd, const wire::Frame& request, wire::Frame* reply, double timeout_s,
                   std::string* error, bool* other_version = nullptr);

}  // namespace simcore::daemon
