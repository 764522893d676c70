#include "netsim_binary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace simcore::netsim {
namespace {

struct Record {
  uint8_t kind;
  uint8_t reserved[3];
  uint32_t after_count;
  int32_t src;
  int32_t dst;
  uint64_t bytes;
  double start_us;
  double duration_us;
};
static_assert(sizeof(Record) == 40, "the format's record is 40 bytes");

// More than any real event waits for; a larger count is a corrupt file, not an allocation.
constexpr uint32_t kMaxAfter = 1u << 20;

}  // namespace

bool looks_binary(std::istream& in) {
  const auto c = in.peek();
  return c == kBinaryMagic[0];
}

bool BinaryTraceReader::fill(void* dst, size_t n) {
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    if (begin_ == end_) {
      in_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
      begin_ = 0;
      end_ = static_cast<size_t>(in_.gcount());
      if (end_ == 0) return false;
    }
    const size_t k = std::min(n, end_ - begin_);
    std::memcpy(out, buf_.data() + begin_, k);
    begin_ += k;
    out += k;
    n -= k;
  }
  return true;
}

bool BinaryTraceReader::fail(std::string message) {
  error_ = TraceError{static_cast<int>(std::min<size_t>(count_ + 1, std::numeric_limits<int>::max())),
                      std::move(message)};
  return false;
}

bool BinaryTraceReader::next(TraceLine& out) {
  if (error_) return false;
  if (!started_) {
    started_ = true;
    char magic[sizeof kBinaryMagic];
    if (!fill(magic, sizeof magic) || std::memcmp(magic, kBinaryMagic, sizeof magic) != 0)
      return fail("not a binary trace (it must start with VGPUTRC1)");
  }
  Record r;
  if (end_ - begin_ >= sizeof r) {  // nearly always: straight from the buffer
    std::memcpy(&r, buf_.data() + begin_, sizeof r);
    begin_ += sizeof r;
  } else {
    if (begin_ == end_ && in_.eof()) return false;
    if (!fill(&r, 1)) return false;  // the end, between events
    if (!fill(reinterpret_cast<char*>(&r) + 1, sizeof r - 1)) return fail("the file ends inside an event");
  }
  out.line = static_cast<int>(std::min<size_t>(count_ + 1, std::numeric_limits<int>::max()));
  out.id.clear();
  out.label.clear();
  out.after.clear();
  if (r.kind > 1) return fail("kind " + std::to_string(r.kind) + " is neither a flow (0) nor a task (1)");
  out.is_task = r.kind == 1;
  auto gpu_ok = [&](int32_t g) { return g >= 0 && g < gpus_; };
  if (!gpu_ok(r.src) || (!out.is_task && !gpu_ok(r.dst)))
    return fail("GPU " + std::to_string(gpu_ok(r.src) ? r.dst : r.src) + " is out of range: the cluster has " +
                std::to_string(gpus_) + " GPUs (0.." + std::to_string(gpus_ - 1) + ")");
  if (!std::isfinite(r.start_us) || r.start_us < 0) return fail("start_us must be a non-negative number");
  if (out.is_task && (!std::isfinite(r.duration_us) || r.duration_us < 0))
    return fail("duration_us must be a non-negative number");
  out.src = r.src;
  out.dst = out.is_task ? 0 : r.dst;
  out.bytes = out.is_task ? 0 : r.bytes;
  out.start_us = r.start_us;
  out.duration_us = out.is_task ? r.duration_us : 0;
  if (r.after_count > kMaxAfter) return fail("after_count " + std::to_string(r.after_count) + " is too large");
  for (uint32_t k = 0; k < r.after_count; ++k) {
    uint64_t dep;
    if (end_ - begin_ >= sizeof dep) {
      std::memcpy(&dep, buf_.data() + begin_, sizeof dep);
      begin_ += sizeof dep;
    } else if (!fill(&dep, sizeof dep)) {
      return fail("the file ends inside an event");
    }
    if (dep >= count_)
      return fail("after names event " + std::to_string(dep) + ", which is not an earlier one");
    out.after.push_back(static_cast<size_t>(dep));
  }
  ++count_;
  return true;
}

TraceOutline outline_binary(std::istream& in, int gpus, size_t block) {
  TraceOutlineBuilder outline(block);
  BinaryTraceReader reader(in, gpus);
  TraceLine e;
  while (reader.next(e))
    outline.add(e.start_us, !e.after.empty(),
                e.after.empty() ? SIZE_MAX : *std::min_element(e.after.begin(), e.after.end()));
  return outline.finish();
}

void write_binary_event(std::ostream& out, const TraceLine& e) {
  Record r{};
  r.kind = e.is_task ? 1 : 0;
  r.after_count = static_cast<uint32_t>(e.after.size());
  r.src = e.src;
  r.dst = e.is_task ? 0 : e.dst;
  r.bytes = e.is_task ? 0 : e.bytes;
  r.start_us = e.start_us;
  r.duration_us = e.is_task ? e.duration_us : 0;
  out.write(reinterpret_cast<const char*>(&r), sizeof r);
  for (size_t dep : e.after) {
    const uint64_t d = dep;
    out.write(reinterpret_cast<const char*>(&d), sizeof d);
  }
}

}  // namespace simcore::netsim
