#include "front/launch/kernel_db_misses.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "common/log.h"
#include "common/settings.h"

namespace vgpu {

KernelDbMisses::KernelDbMisses() {
  path_ = settings::text(settings::Id::kernel_db_misses);
}

const char* KernelDbMisses::cause_name(SettlingSignatures::Uncovered why) {
  switch (why) {
    case SettlingSignatures::Uncovered::family: return "new-kernel";
    case SettlingSignatures::Uncovered::keyed_words: return "keyed-words";
    case SettlingSignatures::Uncovered::ranges: return "ranges";
  }
  return "new-kernel";
}

void KernelDbMisses::note(const LaunchSignature& signature, double seconds, std::string_view cause,
                          std::string_view detail) {
  if (!enabled()) return;
  std::lock_guard l(mu_);
  auto it = misses_.find(signature.bytes);
  if (it == misses_.end()) {
    if (misses_.size() >= kMaxSignatures) {
      ++dropped_;
      return;
    }
    it = misses_.emplace(signature.bytes, Miss{}).first;
    it->second.cause.assign(cause);
    if (!detail.empty()) it->second.cause.append(" ").append(detail);
  }
  ++it->second.launches;
  it->second.seconds = seconds;
}

bool KernelDbMisses::write() {
  if (!enabled()) return true;
  std::string text;
  {
    std::lock_guard l(mu_);
    if (written_) return true;
    written_ = true;
    for (const auto& [bytes, miss] : misses_) {
      LaunchSignature sig{bytes};
      std::string name;
      LaunchShape shape;
      decode_signature_header(sig, &name, &shape);
      text += fmt::format("{}\t{:.9f}\t{}\t{}x{}x{}\t{}x{}x{}\t{}\t{}\n", miss.launches, miss.seconds, name,
                          shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0], shape.block[1],
                          shape.block[2], sig.hex(), miss.cause);
    }
    if (dropped_ != 0) text += fmt::format("{}\t0\t(more signatures, not listed)\t-\t-\t-\t-\n", dropped_);
    uint64_t launches = 0;
    for (const auto& n : answered_) launches += n.load(std::memory_order_relaxed);
    const uint64_t collective = collective_.load(std::memory_order_relaxed);
    if (launches + collective != 0) {
      text += "#answered";
      for (KernelDbLevel level :
           {KernelDbLevel::exact, KernelDbLevel::group, KernelDbLevel::work_key, KernelDbLevel::family,
            KernelDbLevel::none})
        text += fmt::format("\t{}={}", kernel_db_level_name(level), counted(level));
      if (collective != 0) text += fmt::format("\tcollective={}", collective);
      text += "\n";
    }
  }
  if (text.empty()) return true;
  // One write with O_APPEND: lines of several processes do not interleave within a write.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    log::warn("VGPU_KERNEL_DB_MISSES={}: cannot open it", path_);
    return false;
  }
  const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  return n == static_cast<ssize_t>(text.size());
}

}  // namespace vgpu
