// Shared by the daemon tests: a private temporary socket directory, unique job ids, and an
// in-process vgpud server over a FakeEngine running on its own thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "fake_engine.h"
#include "job_paths.h"
#include "server.h"
#include "simcore/remote_engine.h"

namespace simcore::testing {

// A fresh 0700 directory under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/vgpud-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string unique_job(const char* tag) {
  static std::atomic<int> n{0};
  return std::string(tag) + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

// Polls `pred` until it holds or `limit_s` passes (a bound against hangs, not a timing test).
template <class Pred>
bool eventually(Pred pred, double limit_s = 20) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

class InProcessDaemon {
 public:
  explicit InProcessDaemon(daemon::ServerOptions options = {}, const std::string& dir = "")
      : job_(options.job.empty() ? unique_job("inproc") : options.job) {
    options.job = job_;
    std::string err;
    dir_ = dir.empty() ? tmp_.path() : dir;
    daemon::JobPaths paths;
    EXPECT_TRUE(daemon::job_paths(dir_, job_, &paths, &err)) << err;
    if (options.unix_path.empty()) options.unix_path = paths.socket;
    socket_ = options.unix_path;
    server_ = daemon::Server::create(engine_, options, &err);
    EXPECT_TRUE(server_) << err;
    if (server_) thread_ = std::thread([this] { exit_ = server_->run(); done_ = true; });
  }
  ~InProcessDaemon() { stop(); }

  void stop() {
    if (server_ && !done_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_; }
  daemon::ServerExit exit_reason() const { return exit_.load(); }

  RemoteOptions options(int rank = -1) const {
    RemoteOptions o;
    o.job_id = job_;
    o.socket_dir = dir_;
    o.rank = rank;
    o.start_daemon = false;
    o.connect_timeout_s = 10;
    return o;
  }
  std::unique_ptr<Engine> connect(int rank = -1) const {
    std::string err;
    auto e = connect_engine(options(rank), &err);
    EXPECT_TRUE(e) << err;
    return e;
  }

  FakeEngine& engine() { return engine_; }
  daemon::Server& server() { return *server_; }
  const std::string& job() const { return job_; }
  const std::string& dir() const { return dir_; }
  const std::string& socket() const { return socket_; }

 private:
  TempDir tmp_;
  std::string job_, dir_, socket_;
  FakeEngine engine_;
  std::unique_ptr<daemon::Server> server_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::atomic<daemon::ServerExit> exit_{daemon::ServerExit::kStopped};
};

}  // namespace simcore::testing
