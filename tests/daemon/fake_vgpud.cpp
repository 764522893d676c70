// vgpud over the FakeEngine: the real daemon's command line and lifecycle (daemon_main.cpp),
// for the tests that need a daemon process before or apart from the real engine.
//   FAKE_VGPUD_STARTS=<file>  append this process's pid to <file> at start (counts starts)
//   FAKE_VGPUD_FAIL=<text>    refuse to create the engine, with <text> as the reason
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "daemon_main.h"
#include "fake_engine.h"

int main(int argc, char** argv) {
  if (const char* starts = std::getenv("FAKE_VGPUD_STARTS")) {
    const int fd = ::open(starts, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      const std::string line = std::to_string(::getpid()) + "\n";
      [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
      ::close(fd);
    }
  }
  return simcore::daemon::vgpud_main(
      argc, argv, [](std::string* error) -> std::unique_ptr<simcore::Engine> {
        if (const char* fail = std::getenv("FAKE_VGPUD_FAIL")) {
          *error = fail;
          return nullptr;
        }
        return std::make_unique<simcore::testing::FakeEngine>();
      });
}
