#include "client_config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace simcore::daemon {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A positive number of seconds from the environment, else `fallback`.
double env_seconds(const char* name, double fallback) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  return (end && *end == '\0' && d >= 0) ? d : fallback;
}

}  // namespace

std::string token_from_env_or_file(const std::string& file, std::string* error) {
  std::string token = env("VGPU_DAEMON_TOKEN");
  std::string path = file.empty() ? env("VGPU_DAEMON_TOKEN_FILE") : file;
  if (token.empty() && !path.empty()) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      *error = fmt::format("cannot read token file '{}': {}", path, std::strerror(errno));
      return {};
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    token = ss.str();
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' ||
                            token.back() == ' ' || token.back() == '\t'))
    token.pop_back();
  return token;
}

bool resolve_client_config(const RemoteOptions& o, ClientConfig* out, std::string* error) {
  ClientConfig c;
  c.job = o.job_id.empty() ? default_job_id() : o.job_id;
  c.rank = o.rank;
  if (!job_paths(o.socket_dir, c.job, &c.paths, error)) return false;
  c.tcp = o.tcp.empty() ? env("VGPU_DAEMON_TCP") : o.tcp;
  c.token = o.token;
  if (c.token.empty()) {
    std::string err;
    c.token = token_from_env_or_file("", &err);
    if (!err.empty() && !c.tcp.empty()) {
      *error = err;
      return false;
    }
  }
  c.start_daemon = o.start_daemon && c.tcp.empty();
  c.vgpud_path = o.vgpud_path.empty() ? env("VGPU_VGPUD") : o.vgpud_path;
  c.connect_timeout_s = o.connect_timeout_s > 0 ? o.connect_timeout_s : 20;
  c.call_timeout_s =
      o.call_timeout_s >= 0 ? o.call_timeout_s : env_seconds("VGPU_DAEMON_TIMEOUT_S", 120);
  c.daemon_idle_timeout_s = o.daemon_idle_timeout_s >= 0
                                ? o.daemon_idle_timeout_s
                                : env_seconds("VGPU_DAEMON_IDLE_S", 30);
  *out = std::move(c);
  return true;
}

}  // namespace simcore::daemon
