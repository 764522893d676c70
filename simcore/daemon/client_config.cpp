#include "client_config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/settings.h"

namespace simcore::daemon {
namespace {

// Read at every resolution, not once: a process may change them between connections (the
// tests do; see Reading::each_use in common/settings.h).
using vgpu::settings::Id;
std::string env(Id id) { return vgpu::settings::text(id); }
double env_seconds(Id id) { return vgpu::settings::real(id); }

}  // namespace

std::string token_from_env_or_file(const std::string& file, std::string* error) {
  std::string token = env(Id::daemon_token);
  std::string path = file.empty() ? env(Id::daemon_token_file) : file;
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
  c.tcp = o.tcp.empty() ? env(Id::daemon_tcp) : o.tcp;
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
  c.vgpud_path = o.vgpud_path.empty() ? env(Id::vgpud) : o.vgpud_path;
  c.connect_timeout_s = o.connect_timeout_s > 0 ? o.connect_timeout_s : 20;
  c.call_timeout_s =
      o.call_timeout_s >= 0 ? o.call_timeout_s : env_seconds(Id::daemon_timeout_s);
  c.daemon_idle_timeout_s = o.daemon_idle_timeout_s >= 0
                                ? o.daemon_idle_timeout_s
                                : env_seconds(Id::daemon_idle_s);
  *out = std::move(c);
  return true;
}

}  // namespace simcore::daemon
