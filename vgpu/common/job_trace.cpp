// VGPU_TIMELINE's parts and their merge (see job_trace.h).
#include "job_trace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "log.h"

namespace vgpu::job_trace {

namespace {

bool write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every "<pid>.json" part in `dir`.
std::vector<std::string> read_parts(const std::string& dir) {
  std::vector<std::string> parts;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return parts;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 5 && name.ends_with(".json")) parts.push_back(read_file(dir + "/" + name));
  }
  ::closedir(d);
  return parts;
}

}  // namespace

bool write(const std::string& path, const std::string& job, const std::string& mine, const Merge& merge) {
  if (job.empty()) {
    if (write_file(path, mine)) return true;
    log::warn("VGPU_TIMELINE: cannot write {}", path);
    return false;
  }
  const std::string parts = path + ".parts." + job;
  ::mkdir(parts.c_str(), 0700);  // may exist: the job's other processes
  if (!write_file(parts + "/" + std::to_string(::getpid()) + ".json", mine)) {
    log::warn("VGPU_TIMELINE: cannot write a part into {}", parts);
    return false;
  }
  // One merger at a time: the last process to exit writes the whole job's trace.
  const int lock = ::open((parts + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string merged;
  const bool ok = merge(read_parts(parts), &merged) && write_file(path, merged);
  if (!ok) log::warn("VGPU_TIMELINE: cannot merge the job's parts into {}", path);
  if (lock >= 0) ::close(lock);  // releases the lock
  return ok;
}

}  // namespace vgpu::job_trace
