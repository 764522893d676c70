#include "passthrough/timeline_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/log.h"
#include "common/settings.h"
#include "passthrough/nccl_timing.h"

namespace vgpu::pt {

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

void write_at_exit() {
  try {
    if (TimelineWriter* w = TimelineWriter::get()) w->write();
  } catch (...) {
    // Never let an exit handler throw out of the host process.
  }
}

}  // namespace

TimelineWriter* TimelineWriter::get() {
  static TimelineWriter* writer = []() -> TimelineWriter* {
    const std::string path = settings::text(settings::Id::timeline);
    if (path.empty()) return nullptr;
    auto* w = new TimelineWriter(path, settings::text(settings::Id::job_id));  // lives until exit
    std::atexit(write_at_exit);
    return w;
  }();
  return writer;
}

TimelineWriter::TimelineWriter(std::string path, std::string job) : path_(std::move(path)) {
  if (!job.empty()) parts_dir_ = path_ + ".parts." + job;
}

void TimelineWriter::add(const TimedOp& op) {
  simcore::TimelineEntry e;
  e.lane = op.lane;
  e.start = op.start;
  e.finish = op.finish;
  e.transfer_end = op.finish;
  e.issue = op.issue;
  e.label = op.label.empty() ? (op.kernel ? "kernel" : "op") : op.label;
  e.gpu = op.device < 0 ? 0 : nccl_timing::global_gpu(op.device);  // the rank's GPU in the cluster
  std::lock_guard l(mu_);
  entries_.push_back(std::move(e));
}

void TimelineWriter::write() {
  std::string mine;
  {
    std::lock_guard l(mu_);
    mine = simcore::chrome_trace_json(entries_);
  }
  if (parts_dir_.empty()) {
    if (!write_file(path_, mine)) log::warn("VGPU_TIMELINE: cannot write {}", path_);
    return;
  }
  ::mkdir(parts_dir_.c_str(), 0700);  // may exist: the job's other processes
  if (!write_file(parts_dir_ + "/" + std::to_string(::getpid()) + ".json", mine)) {
    log::warn("VGPU_TIMELINE: cannot write a part into {}", parts_dir_);
    return;
  }
  // One merger at a time: the last process to exit writes the whole job's trace.
  const int lock = ::open((parts_dir_ + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string merged;
  if (!simcore::merge_chrome_traces(read_parts(parts_dir_), &merged) || !write_file(path_, merged))
    log::warn("VGPU_TIMELINE: cannot merge the job's parts into {}", path_);
  if (lock >= 0) ::close(lock);  // releases the lock
}

}  // namespace vgpu::pt
