// Starting vgpud on demand from inside a rank process: find the binary, and start it detached
// (double fork: it is never our child, so no zombie and no SIGCHLD for the host to reap) with
// the job lock handed over on fd 3, so that the lock passes from the starter to the daemon
// without a gap in which a second starter could start a second daemon.
#pragma once

#include <string>
#include <vector>

namespace simcore::daemon {

// The vgpud to start: `configured` (VGPU_VGPUD) if set, else beside the library holding this
// code, else ../bin beside it, else the first on PATH. Empty, with *error, when none is found.
std::string find_vgpud(const std::string& configured, std::string* error);

// Starts `exe args...` detached: new session, stdin/stdout on /dev/null, stderr appended to
// `log_path`, `lock_fd` as fd 3, no other inherited descriptors, signal mask cleared. Returns
// once exec has succeeded or failed (the failure, e.g. ENOENT, is reported in *error).
// Only async-signal-safe calls run between fork and exec, so it is safe in threaded hosts.
bool spawn_detached(const std::string& exe, const std::vector<std::string>& args, int lock_fd,
                    const std::string& log_path, std::string* error);

// The last lines of a daemon log, for an error message (empty if unreadable).
std::string log_tail(const std::string& path, size_t max_bytes = 1024);

}  // namespace simcore::daemon
