// Child processes for the daemon tests: started with posix_spawn (no fork of the threaded test
// process, which sanitizers dislike), with extra environment, stdout captured line by line.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace simcore::testing {

class Child {
 public:
  // Runs argv[0] (a path) with `env` ("NAME=value") added to this process's environment.
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string name = kv.substr(0, kv.find('='));
      bool overridden = false;
      for (const auto& x : env) overridden |= x.substr(0, x.find('=')) == name;
      if (!overridden) envs.push_back(kv);
    }
    envs.insert(envs.end(), env.begin(), env.end());
    std::vector<char*> cargv, cenv;
    std::vector<std::string> args = argv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (::posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), cenv.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    out_ = out[0];
  }
  ~Child() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      wait(10);
    }
    if (out_ >= 0) ::close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of stdout (without '\n'), or nullopt at EOF or after `limit_s`.
  std::optional<std::string> line(double limit_s = 20) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    for (;;) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      const double left =
          std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
      if (left <= 0 || out_ < 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
      char chunk[4096];
      const ssize_t k = ::read(out_, chunk, sizeof(chunk));
      if (k <= 0) {
        if (!buf_.empty()) {
          std::string l;
          l.swap(buf_);
          return l;
        }
        return std::nullopt;
      }
      buf_.append(chunk, static_cast<size_t>(k));
    }
  }

  // All remaining output, until EOF.
  std::string rest(double limit_s = 20) {
    std::string all;
    while (auto l = line(limit_s)) all += *l + "\n";
    return all;
  }

  // The wait status once it has exited, or nullopt after `limit_s`.
  std::optional<int> wait(double limit_s = 20) {
    if (status_) return status_;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    while (pid_ > 0) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = st;
        break;
      }
      if (r < 0 && errno != EINTR) break;
      if (std::chrono::steady_clock::now() >= end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return status_;
  }
  // True when it exited normally with status 0 within `limit_s`.
  bool succeeds(double limit_s = 20) {
    auto st = wait(limit_s);
    return st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
  std::optional<int> status_;
};

}  // namespace simcore::testing
