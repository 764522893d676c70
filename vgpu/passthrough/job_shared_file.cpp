#include "passthrough/job_shared_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace vgpu::pt {

void* map_job_shared_file(const std::string& path, size_t bytes, const char* what) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) {
    log::once(log::Level::warn, what, fmt::format("passthrough: cannot open {} ({}): no {}", path, std::strerror(errno), what));
    return nullptr;
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0 ||
      (static_cast<size_t>(st.st_size) != bytes && st.st_size != 0) ||
      // Allocated now (posix_fallocate, not ftruncate): a full /dev/shm then refuses the file
      // here instead of raising SIGBUS in the program at its first write.
      (st.st_size == 0 && posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0)) {
    log::once(log::Level::warn, what,
              fmt::format("passthrough: {} is not a private file of this user: no {}", path, what));
    ::close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace vgpu::pt
