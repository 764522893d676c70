// What vgpu needs to know about another process from /proc: its start time (the status region
// tells a live owner from a reused pid), its name, and whether it is stopped (a SIGSTOPped
// vgpud or peer rank is reported rather than waited on in silence). The process may exit at any moment, between the
// open and the read or in the middle of it, so every function here is exception-free and treats
// a short, empty or unreadable file as "unknown" (0 / empty name), never as an error to throw.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace vgpu {

// Reads /proc/<pid>/<leaf> into buf (at most cap - 1 bytes, NUL-terminated). The number of bytes
// read, or -1 if the file cannot be opened or read (the process is gone).
long read_proc_file(pid_t pid, const char* leaf, char* buf, size_t cap) noexcept;

// Field 22 (starttime) of a /proc/<pid>/stat text of `len` bytes; 0 if the text is cut short or
// malformed. The command name (field 2) may hold spaces and parentheses: fields are counted from
// the last ')'.
uint64_t start_time_from_stat(const char* stat, size_t len) noexcept;

// The start time of `pid` now; 0 if it is gone.
uint64_t process_start_time(pid_t pid) noexcept;

// The first word of /proc/<pid>/cmdline (the program as started) into out[n], NUL-terminated;
// empty if the process is gone.
void process_name(pid_t pid, char* out, size_t n) noexcept;

// The state letter of /proc/<pid>/stat (field 3: 'R', 'S', 'T' stopped, 't' traced, 'Z'...),
// or '\0' if the process is gone.
char process_state(pid_t pid) noexcept;

}  // namespace vgpu
