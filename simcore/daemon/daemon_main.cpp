#include "daemon_main.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "client_config.h"
#include "common/log.h"
#include "common/settings.h"
#include "job_paths.h"
#include "server.h"
#include "socket_io.h"

namespace simcore::daemon {
namespace {

struct Args {
  std::string job;
  std::string socket_dir;
  std::string tcp;
  std::string token_file;
  double idle_timeout_s = -2;   // -2: not given
  int lock_fd = -1;
};

constexpr const char* kUsage =
    "usage: vgpud [--job ID] [--socket-dir DIR] [--tcp HOST:PORT] [--token-file FILE]\n"
    "             [--idle-timeout SECONDS] [--lock-fd N]\n";

bool parse_args(int argc, char** argv, Args* a, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      *error = "";
      return false;
    }
    if (i + 1 >= argc) {
      *error = fmt::format("{} needs a value", flag);
      return false;
    }
    const std::string value = argv[++i];
    char* end = nullptr;
    if (flag == "--job") {
      a->job = value;
    } else if (flag == "--socket-dir") {
      a->socket_dir = value;
    } else if (flag == "--tcp") {
      a->tcp = value;
    } else if (flag == "--token-file") {
      a->token_file = value;
    } else if (flag == "--idle-timeout") {
      a->idle_timeout_s = std::strtod(value.c_str(), &end);
      if (!end || *end != '\0') {
        *error = fmt::format("--idle-timeout: '{}' is not a number", value);
        return false;
      }
    } else if (flag == "--lock-fd") {
      const long fd = std::strtol(value.c_str(), &end, 10);
      if (!end || *end != '\0' || fd < 0 || fd > 1 << 20) {
        *error = fmt::format("--lock-fd: '{}' is not a descriptor", value);
        return false;
      }
      a->lock_fd = static_cast<int>(fd);
    } else {
      *error = fmt::format("unknown option {}", flag);
      return false;
    }
  }
  return true;
}

// The server the signal handlers stop. Set once, before the handlers are installed.
std::atomic<Server*> g_signal_target{nullptr};

extern "C" void on_stop_signal(int) {
  if (Server* s = g_signal_target.load()) s->stop();
}

void install_signal_handlers(Server* server) {
  g_signal_target.store(server);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);  // a daemon started from a terminal outlives it
}

int fail(const std::string& message) {
  std::fprintf(stderr, "vgpud: %s\n", message.c_str());
  vgpu::log::error("vgpud: {}", message);
  return 1;
}

}  // namespace

int vgpud_main(int argc, char** argv, const EngineFactory& make_engine) {
  signal(SIGPIPE, SIG_IGN);
  Args a;
  std::string err;
  if (!parse_args(argc, argv, &a, &err)) {
    if (!err.empty()) std::fprintf(stderr, "vgpud: %s\n", err.c_str());
    std::fputs(kUsage, err.empty() ? stdout : stderr);
    return err.empty() ? 0 : 2;
  }
  if (a.job.empty()) a.job = default_job_id();
  if (a.idle_timeout_s == -2) {
    a.idle_timeout_s = vgpu::settings::real(vgpu::settings::Id::daemon_idle_s);
  }

  JobPaths paths;
  if (!job_paths(a.socket_dir, a.job, &paths, &err) || !ensure_private_dir(paths.dir, &err))
    return fail(err);

  // One daemon per job: the lock is held for the whole life of the process. A client that
  // started us passed it already taken (taking it again on the same open file succeeds).
  UniqueFd lock(a.lock_fd >= 0 ? a.lock_fd
                               : ::open(paths.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) return fail(fmt::format("cannot open {}: {}", paths.lock, std::strerror(errno)));
  ::fcntl(lock.get(), F_SETFD, FD_CLOEXEC);
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    std::fprintf(stderr, "vgpud: another vgpud already serves job '%s' (%s)\n", a.job.c_str(),
                 paths.socket.c_str());
    return 0;
  }
  const std::string pid_text = fmt::format("{}\n", ::getpid());
  if (::ftruncate(lock.get(), 0) == 0) {
    [[maybe_unused]] ssize_t n = ::pwrite(lock.get(), pid_text.data(), pid_text.size(), 0);
  }

  ServerOptions so;
  so.job = a.job;
  so.unix_path = paths.socket;
  so.tcp_listen = a.tcp;
  so.idle_timeout_s = a.idle_timeout_s;
  if (!a.tcp.empty()) {
    so.token = token_from_env_or_file(a.token_file, &err);
    if (!err.empty()) return fail(err);
  }

  std::unique_ptr<Engine> engine = make_engine(&err);
  if (!engine) return fail(fmt::format("cannot create the simulation engine: {}", err));
  std::unique_ptr<Server> server = Server::create(*engine, so, &err);
  if (!server) return fail(err);
  install_signal_handlers(server.get());

  std::printf("vgpud: job %s listening on %s", a.job.c_str(), paths.socket.c_str());
  if (server->tcp_port() > 0) std::printf(" tcp port %d", server->tcp_port());
  std::printf("\n");
  std::fflush(stdout);
  vgpu::log::info("vgpud: pid {} serves job '{}' on {}", ::getpid(), a.job, paths.socket);

  const ServerExit why = server->run();
  g_signal_target.store(nullptr);
  server.reset();
  // What the job left in the engine (tests read it: bounded memory over a long job).
  const Engine::Stats st = engine->stats();
  vgpu::log::info("vgpud: engine at exit: {} events submitted, {} live, {} flow segments, {} B history, {} B results, "
                  "{} B timeline, floor {:.6f} s", st.events_submitted, st.events_live, st.flow_segments,
                  st.history_bytes, st.result_bytes, st.timeline_bytes, st.floor);
  engine.reset();
  vgpu::log::info("vgpud: exiting ({})", to_string(why));
  return 0;
}

}  // namespace simcore::daemon
