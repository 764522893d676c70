// A job's vgpud of the test's own: its socket in a fresh directory under a unique job id (set in
// the environment, so that the plugin and the test's child ranks find it), started on demand by
// the plugin as this process's child, shut down and its directory removed when this goes.
#pragma once

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "simcore/remote_engine.h"

namespace vtest {

class OwnDaemon {
 public:
  explicit OwnDaemon(const std::string& job_prefix) {
    char tmpl[] = "/tmp/vgpu-nccl-test-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    setenv("VGPU_DAEMON_DIR", dir_.c_str(), 1);
    setenv("VGPU_JOB_ID", (job_prefix + std::to_string(getpid())).c_str(), 1);
    prctl(PR_SET_CHILD_SUBREAPER, 1);  // the daemon started on demand stays our child
  }
  ~OwnDaemon() {
    if (dir_.empty()) return;
    simcore::RemoteOptions o;
    o.socket_dir = dir_;
    simcore::shutdown_daemon(o);
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  OwnDaemon(const OwnDaemon&) = delete;
  OwnDaemon& operator=(const OwnDaemon&) = delete;
  bool ok() const { return !dir_.empty(); }

 private:
  std::string dir_;
};

}  // namespace vtest
