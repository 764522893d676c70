// An Engine whose methods run in the job's vgpud daemon, for jobs with one process per rank
// (torchrun, Slurm): every rank process connects to the one daemon of its job, so all of them
// see one simulation. The daemon is started on demand by whichever rank finds none.
//
// Behaviour when things go wrong, which a host process can rely on:
// - the daemon dies: every call in progress and every later call returns at once with the
//   method's error value (kNoEvent, nullopt, false, an empty timeline); wait_final included;
// - the daemon hangs: calls give up after RemoteOptions::call_timeout_s (wait_final excepted,
//   which waits as long as the daemon lives) and the engine then counts as disconnected;
// - a local daemon is stopped (SIGSTOP) or exits while a call waits: noticed within about a
//   second (the daemon's process state), and the engine counts as disconnected;
// - once disconnected, lost() says why;
// - no call ever raises SIGPIPE, throws, or blocks another thread's call.
// Threads share one connection: no background thread is started (a waiting caller reads the
// replies of all). A forked child does not inherit the connection (its copy is replaced by a
// dead socket), so a rank's DataLoader workers cannot keep a dead rank registered.
// shutdown() on a remote engine only disconnects this client (its pending calls return); use
// shutdown_daemon() to stop the daemon of the whole job.
//
// Environment (each used when the matching option is left empty / negative):
//   VGPU_JOB_ID            job id (default: "sid" + the session id of the calling process)
//   VGPU_DAEMON_DIR        socket directory (default $XDG_RUNTIME_DIR/vgpu or /tmp/vgpu-<uid>,
//                          or "<that>.1".."7" when another user took the name)
//   VGPU_DAEMON_TCP        host:port of a daemon on another host: connect over TCP instead
//   VGPU_DAEMON_TOKEN      the job's shared secret for TCP (or VGPU_DAEMON_TOKEN_FILE: a file
//                          holding it); both ends must have the same one
//   VGPU_VGPUD             the vgpud binary to start (default: beside the library that holds
//                          this code, then ../bin beside it, then PATH)
//   VGPU_DAEMON_IDLE_S     idle timeout given to a daemon started on demand
//   VGPU_DAEMON_TIMEOUT_S  call timeout
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "simcore/engine.h"

namespace simcore {

struct RemoteOptions {
  std::string job_id;            // empty: VGPU_JOB_ID, else the session id
  int rank = -1;                 // this client's rank, told to the daemon (logs)
  std::string socket_dir;        // empty: see above
  std::string tcp;               // "host:port": connect over TCP (no start on demand)
  std::string token;             // TCP secret (empty: from the environment)
  bool start_daemon = true;      // start vgpud when none answers on the job's socket
  std::string vgpud_path;        // empty: VGPU_VGPUD, dladdr, PATH
  double connect_timeout_s = 20; // total time to find, start and greet the daemon
  double call_timeout_s = -1;    // < 0: VGPU_DAEMON_TIMEOUT_S, else 120; 0: no timeout
  double daemon_idle_timeout_s = -1;  // < 0: VGPU_DAEMON_IDLE_S, else 30
};

// Connects to (starting if needed) the job's daemon. nullptr, with *error set when given and one
// log line, when no daemon can be reached within connect_timeout_s or the daemon refuses us
// (another job, another protocol version, a wrong token).
std::unique_ptr<Engine> connect_engine(const RemoteOptions& options, std::string* error = nullptr);

// Asks the job's daemon to stop (its waiting clients get "not final"). Starts none. True when a
// daemon acknowledged, or when none was running.
bool shutdown_daemon(const RemoteOptions& options, std::string* error = nullptr);

// Starts the job's daemon if none answers, without keeping a connection (vgpu-run does this
// before it launches the ranks). True when a daemon now answers.
bool ensure_daemon(const RemoteOptions& options, std::string* error = nullptr);

// One collective of a rank process for share_collectives: its key (communicator and its count
// of shared collectives, the same on every rank), the communicator's size, the ranks this
// process places, and their flows.
struct SharedCollective {
  uint64_t comm = 0;
  uint64_t seq = 0;
  uint32_t nranks = 0;  // 0: wait for nobody (a message only its receiver places)
  std::vector<int32_t> ranks;
  std::vector<FlowSpec> flows;
};
struct SharedResult {
  std::optional<Time> finish;  // the latest finish of every process's flows of the key
  uint32_t covered = 0;        // the key's ranks that had placed theirs (nranks: all)
};
// A rank process's collectives of one NCCL group in one request to the daemon (protocol 7,
// ShareCollectives): the flows are placed, then, when `floor` is given, rank `rank` (which the
// caller registered) promises that no submission of its own starts before it; the reply comes
// once every rank of each collective's key placed its flows (any process's request; at most
// wire::kShareTimeoutS, then from the flows placed so far), one result per collective, in order;
// each key's flows are released there. Empty results (no finish) when the daemon is lost
// (`engine.lost()` says so). *registered (may be null): the ranks every client of the job has
// registered. `released`: ids the caller will never name again (Engine::release), released after
// the flows are placed (protocol 8). On an in-process engine: placed and answered at once from
// these flows alone (*registered then 0: not known).
std::vector<SharedResult> share_collectives(Engine& engine, std::span<const SharedCollective> collectives, int rank,
                                            std::optional<Time> floor, uint32_t* registered,
                                            std::span<const EventId> released = {});

// The Unix socket path the job's daemon listens on (for messages and vgpu-run).
std::string daemon_socket_path(const RemoteOptions& options);

}  // namespace simcore
