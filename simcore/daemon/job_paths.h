// Where a job's daemon lives on this host: one private directory per user, and in it, per job,
// the socket, the lock that the living daemon holds, and the daemon's log. Shared by the client
// (to find or start the daemon) and vgpud (to serve), so both always agree.
//
//   directory  $VGPU_DAEMON_DIR, else $XDG_RUNTIME_DIR/vgpu, else /tmp/vgpu-<uid>; mode 0700,
//              owned by the user (a directory someone else owns is refused, not used: without
//              VGPU_DAEMON_DIR the first of "<dir>.1" ... ".7" that is free or ours is taken)
//   <job>.sock the Unix socket (0600)
//   <job>.lock flock()ed by the daemon for its whole life (and by the client starting it), so
//              at most one daemon serves a job; left in place on exit (unlinking a lock races)
//   <job>.log  the stderr of a daemon started on demand
#pragma once

#include <string>
#include <string_view>

namespace simcore::daemon {

struct JobPaths {
  std::string dir;
  std::string socket;
  std::string lock;
  std::string log;
};

// VGPU_JOB_ID, else this process's session id (ranks launched together share it).
std::string default_job_id();

// The default directory (see above), without creating it.
std::string default_socket_dir();

// A file-name-safe form of a job id: [A-Za-z0-9._-] kept, others become '_'; long ids are cut
// and suffixed with a hash of the whole id so distinct ids stay distinct.
std::string job_file_stem(std::string_view job);

// Paths for `job` under `dir` (empty: the default). Fails when the socket path would not fit a
// sockaddr_un or the job id is empty.
bool job_paths(std::string_view dir, std::string_view job, JobPaths* out, std::string* error);

// Creates `dir` (mode 0700) if missing, else checks it: a real directory (not a symlink) owned
// by this user; group/other access is removed. Fails, naming the reason, otherwise.
bool ensure_private_dir(const std::string& dir, std::string* error);

}  // namespace simcore::daemon
