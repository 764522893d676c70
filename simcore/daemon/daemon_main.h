// vgpud's command line and lifecycle, apart from which engine it serves, so that tests can run
// the very same daemon over a stand-in engine.
//
//   vgpud [--job ID] [--socket-dir DIR] [--tcp HOST:PORT] [--token-file FILE]
//         [--idle-timeout SECONDS] [--lock-fd N]
//
//   --job           the job it serves (default: VGPU_JOB_ID, else the session id)
//   --socket-dir    default: VGPU_DAEMON_DIR, $XDG_RUNTIME_DIR/vgpu, /tmp/vgpu-<uid>
//   --tcp           also listen on TCP for ranks on other hosts; needs the job token, from
//                   --token-file, VGPU_DAEMON_TOKEN or VGPU_DAEMON_TOKEN_FILE. The token is a
//                   shared secret sent in clear: it keeps other jobs and stray connections out,
//                   it is no encryption; use it on the cluster's own network.
//   --idle-timeout  exit after this long without any client (default VGPU_DAEMON_IDLE_S, else
//                   30; negative: never)
//   --lock-fd       the job lock, already taken by the client that started us (internal)
//
// It runs in the foreground; a client starting it on demand detaches it. Once listening it
// prints one line to stdout: "vgpud: job <job> listening on <socket> [tcp port <n>]".
// Exit status: 0 after an idle timeout, a Shutdown request, SIGTERM/SIGINT, or when another
// vgpud already serves the job; 1 when it cannot start (the reason goes to stderr); 2 on usage.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "simcore/engine.h"

namespace simcore::daemon {

// Makes the engine the daemon serves; nullptr with *error when it cannot (a bad cluster config).
using EngineFactory = std::function<std::unique_ptr<Engine>(std::string* error)>;

int vgpud_main(int argc, char** argv, const EngineFactory& make_engine);

}  // namespace simcore::daemon
