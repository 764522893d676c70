// POSIX shared-memory segments for the plugin: naming (uid + job id), creation with mode 0600
// and pages reserved up front (so a full /dev/shm is an error at connect time, never a SIGBUS
// in the middle of a transfer), mapping, unlinking; and the liveness test of a peer process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vgpu::nccl {

class ShmMapping {
 public:
  ShmMapping() = default;
  ~ShmMapping();
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  // Creates `name` exclusively (mode 0600), sized `bytes`, zero-filled. Empty string on success,
  // else what failed.
  std::string create(const std::string& name, size_t bytes);
  // create() of a name make_segment_name() gave this process: the name holds this process's pid
  // and a count of its own, so a segment already there was left by an exited process that had
  // the same pid (killed before it unlinked; the pid reused since): it is removed first. Without
  // that, every name such a leftover holds fails create() until reap_stale_segments() runs in
  // another process (this pid is alive, so it never reaps them).
  std::string create_own(const std::string& name, size_t bytes);
  // Maps an existing segment of this user's plugin (is_segment_name), a regular file owned by
  // this user with no access for others; its size must be at least `min_bytes`.
  std::string open(const std::string& name, size_t min_bytes);
  void unlink();  // removes the name (mappings stay valid); idempotent

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool linked_ = false;
};

// "/vgpu-nccl.<uid>.<job>.<kind>.<pid>.<n>": unique per process and call.
std::string make_segment_name(char kind);
// Whether `name` has the form of this user's segment names (what open() and an unlink of a name
// read from shared memory accept).
bool is_segment_name(const std::string& name);
// The job part of the names: VGPU_JOB_ID (sanitized, long ones hashed) or "sid<session id>".
std::string job_tag();
uint64_t random_nonce();

// Removes this uid's and job's segments whose creating process has exited (a crashed rank
// cannot clean up after itself). Returns how many were removed.
int reap_stale_segments();

// False when `pid` has exited (gone or a zombie). The calling process always counts as alive.
bool process_alive(int pid);

}  // namespace vgpu::nccl
