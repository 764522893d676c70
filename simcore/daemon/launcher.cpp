#include "launcher.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "socket_io.h"

extern char** environ;

namespace simcore::daemon {
namespace {

bool executable(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string dir_of_this_library() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&find_vgpud), &info) == 0 || !info.dli_fname) return {};
  char resolved[PATH_MAX];
  if (!::realpath(info.dli_fname, resolved)) return {};
  std::string p(resolved);
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string(".") : p.substr(0, slash);
}

// Only async-signal-safe calls from here to exec (the host may be multithreaded).
[[noreturn]] void exec_in_grandchild(const char* exe, char* const* argv, int devnull, int log,
                                     int lock, int err_pipe) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Lift every descriptor we keep above the target slots first, so dup2 cannot clobber one.
  const int hi_null = fcntl(devnull, F_DUPFD, 10);
  const int hi_log = fcntl(log, F_DUPFD, 10);
  const int hi_lock = fcntl(lock, F_DUPFD, 10);
  const int hi_err = fcntl(err_pipe, F_DUPFD_CLOEXEC, 10);
  int e = 0;
  if (hi_null < 0 || hi_log < 0 || hi_lock < 0 || hi_err < 0 || dup2(hi_null, 0) < 0 ||
      dup2(hi_null, 1) < 0 || dup2(hi_log, 2) < 0 || dup2(hi_lock, 3) < 0) {
    e = errno;
  } else {
    if (close_range(4, static_cast<unsigned>(hi_err - 1), 0) != 0 ||
        close_range(static_cast<unsigned>(hi_err + 1), ~0U, 0) != 0) {
      for (int fd = 4; fd < 4096; ++fd)
        if (fd != hi_err) close(fd);
    }
    execve(exe, argv, environ);
    e = errno;
  }
  const int out = hi_err >= 0 ? hi_err : err_pipe;
  [[maybe_unused]] ssize_t n = write(out, &e, sizeof(e));
  _exit(127);
}

}  // namespace

std::string find_vgpud(const std::string& configured, std::string* error) {
  if (!configured.empty()) {
    if (executable(configured)) return configured;
    *error = fmt::format("VGPU_VGPUD names '{}', which is not an executable file", configured);
    return {};
  }
  const std::string here = dir_of_this_library();
  if (!here.empty()) {
    for (const std::string& c : {here + "/vgpud", here + "/../bin/vgpud"})
      if (executable(c)) return c;
  }
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest(path);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      const std::string c = fmt::format("{}/vgpud", dir.empty() ? "." : dir);
      if (executable(c)) return c;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  *error = "cannot find the vgpud binary: set VGPU_VGPUD to its path, or put it beside "
           "libcuda.so.1 or on PATH";
  return {};
}

bool spawn_detached(const std::string& exe, const std::vector<std::string>& args, int lock_fd,
                    const std::string& log_path, std::string* error) {
  // Everything the children need is prepared here, before fork.
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.push_back(exe);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!devnull) {
    *error = fmt::format("open /dev/null: {}", std::strerror(errno));
    return false;
  }
  const int log_fd = log ? log.get() : devnull.get();
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    *error = fmt::format("pipe: {}", std::strerror(errno));
    return false;
  }
  UniqueFd err_read(pipefd[0]), err_write(pipefd[1]);

  const pid_t child = ::fork();
  if (child < 0) {
    *error = fmt::format("fork: {}", std::strerror(errno));
    return false;
  }
  if (child == 0) {
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild < 0) {
      const int e = errno;
      [[maybe_unused]] ssize_t n = ::write(err_write.get(), &e, sizeof(e));
      ::_exit(1);
    }
    if (grandchild > 0) ::_exit(0);
    exec_in_grandchild(argv[0], argv.data(), devnull.get(), log_fd, lock_fd, err_write.get());
  }
  err_write.reset();
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_read.get(), &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    *error = fmt::format("cannot start '{}': {}", exe, std::strerror(exec_errno));
    return false;
  }
  return true;
}

std::string log_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes)
                                  ? size - static_cast<std::streamoff>(max_bytes)
                                  : 0;
  in.seekg(from);
  std::string s(static_cast<size_t>(size - from), '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  // Whole lines only: drop the partial first line of a cut tail.
  if (from > 0) {
    const size_t first = s.find('\n');
    if (first != std::string::npos) s.erase(0, first + 1);
  }
  return s;
}

}  // namespace simcore::daemon
