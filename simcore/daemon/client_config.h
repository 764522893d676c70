// RemoteOptions with every default filled in from the environment, once, so the rest of the
// client never reads the environment.
#pragma once

#include <string>

#include "job_paths.h"
#include "simcore/remote_engine.h"

namespace simcore::daemon {

struct ClientConfig {
  std::string job;
  int rank = -1;
  JobPaths paths;
  std::string tcp;
  std::string token;
  bool start_daemon = true;
  std::string vgpud_path;       // may stay empty until a daemon must be started
  double connect_timeout_s = 20;
  double call_timeout_s = 120;
  double daemon_idle_timeout_s = 30;
};

bool resolve_client_config(const RemoteOptions& options, ClientConfig* out, std::string* error);

// The job token from VGPU_DAEMON_TOKEN, else the file named by VGPU_DAEMON_TOKEN_FILE (or by
// `file` when given), trailing whitespace removed. Empty when none is set.
std::string token_from_env_or_file(const std::string& file, std::string* error);

}  // namespace simcore::daemon
