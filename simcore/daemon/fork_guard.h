// Daemon connections must not outlive their process in a forked child. A rank process that
// forks (PyTorch DataLoader workers) would otherwise hand each child a copy of its socket: the
// daemon would not see the rank leave while a child lives on, so the rank's floor would hold the
// whole job back. In a child, each tracked socket is replaced (dup2, async-signal-safe) by a
// dead one, so the child's copy of the engine fails cleanly and the parent's connection is the
// only one. (exec'd children are covered by close-on-exec.)
//
// This is process-wide by nature (pthread_atfork), hence a fixed table of atomics: it is
// touched inside the fork handler, where no lock can be trusted.
#pragma once

namespace simcore::daemon {

// Starts / stops guarding `fd`. Returns false when the table is full (then the fd is simply
// not guarded; logged once).
bool guard_against_fork(int fd);
void unguard(int fd);

}  // namespace simcore::daemon
