// How much a call costs through vgpud compared with the same call in process, measured in one
// run (not a test: `meson compile -C <build> daemon_rpc_bench && <build>/tests/daemon/daemon_rpc_bench`).
// The daemon is an in-process Server on its own thread over the FakeEngine (so the engine's
// own cost is negligible and the numbers are the transport's), on a Unix socket.
//
// Prints: per-call latency (one thread, one request in flight), throughput with several threads
// multiplexed on one connection and with one connection per thread, each as a ratio to the
// in-process call.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "fake_engine.h"
#include "job_paths.h"
#include "server.h"
#include "simcore/remote_engine.h"

namespace simcore::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Calls per second of `call` run `n` times on each of `threads` threads.
double rate(int threads, int n, const std::function<void(int thread)>& call) {
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < n; ++i) call(t);
    });
  for (auto& th : ts) th.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return threads * n / s;
}

// A daemon on a thread of this process, in a private temp directory.
class BenchDaemon {
 public:
  BenchDaemon() {
    char tmpl[] = "/tmp/vgpud-bench-XXXXXX";
    dir_ = ::mkdtemp(tmpl) ? tmpl : "/tmp";
    daemon::JobPaths paths;
    std::string err;
    daemon::job_paths(dir_, job_, &paths, &err);
    daemon::ServerOptions o;
    o.job = job_;
    o.unix_path = paths.socket;
    server_ = daemon::Server::create(engine_, o, &err);
    if (!server_) std::fprintf(stderr, "cannot start the daemon: %s\n", err.c_str());
    else thread_ = std::thread([this] { server_->run(); });
  }
  ~BenchDaemon() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::unique_ptr<Engine> connect(int rank) {
    RemoteOptions o;
    o.job_id = job_;
    o.socket_dir = dir_;
    o.rank = rank;
    o.start_daemon = false;
    return server_ ? connect_engine(o) : nullptr;
  }

 private:
  std::string dir_, job_ = "bench";
  FakeEngine engine_;
  std::unique_ptr<daemon::Server> server_;
  std::thread thread_;
};

int run() {
  BenchDaemon d;
  auto remote = d.connect(0);
  FakeEngine local;
  if (!remote) return 1;
  const int n = 20000;
  TaskSpec task;
  task.duration = 1e-6;
  FlowSpec flow{0, 1, 4096, 0, {}, "bench flow"};

  // Warm up both paths.
  for (int i = 0; i < 1000; ++i) {
    remote->add_task(task);
    local.add_task(task);
  }
  struct Row {
    const char* what;
    double per_s;
    double base_per_s;
  };
  std::vector<Row> rows;
  const double local_task = rate(1, n, [&](int) { local.add_task(task); });
  const double local_flow = rate(1, n, [&](int) { local.add_flow(flow); });
  const double local_query = rate(1, n, [&](int) { local.query(1); });
  rows.push_back({"add_task, 1 thread", rate(1, n, [&](int) { remote->add_task(task); }), local_task});
  rows.push_back({"add_flow, 1 thread", rate(1, n, [&](int) { remote->add_flow(flow); }), local_flow});
  rows.push_back({"query, 1 thread", rate(1, n, [&](int) { remote->query(1); }), local_query});
  rows.push_back({"set_rank_floor, 1 thread",
                  rate(1, n, [&](int) { remote->set_rank_floor(0, 0); }), local_query});
  rows.push_back({"add_task, 8 threads / 1 conn",
                  rate(8, n / 4, [&](int) { remote->add_task(task); }), local_task});
  std::vector<std::unique_ptr<Engine>> conns;
  for (int i = 0; i < 8; ++i) conns.push_back(d.connect(i));
  rows.push_back({"add_task, 8 threads / 8 conns",
                  rate(8, n / 4, [&](int t) { conns[t]->add_task(task); }), local_task});

  std::printf("%-32s %14s %14s %12s %10s\n", "call (through vgpud)", "calls/s", "in-process/s",
              "us/call", "slowdown");
  for (const Row& r : rows)
    std::printf("%-32s %14.0f %14.0f %12.2f %9.0fx\n", r.what, r.per_s, r.base_per_s,
                1e6 / r.per_s, r.base_per_s / r.per_s);
  return 0;
}

}  // namespace
}  // namespace simcore::testing

int main() { return simcore::testing::run(); }
