#include "passthrough/timeline_writer.h"

#include <cstdlib>

#include "common/job_trace.h"
#include "common/log.h"
#include "common/settings.h"
#include "passthrough/nccl_timing.h"

namespace vgpu::pt {

namespace {

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

TimelineWriter::TimelineWriter(std::string path, std::string job)
    : path_(std::move(path)), job_(std::move(job)) {}

void TimelineWriter::add(const TimedOp& op) {
  simcore::TimelineEntry e;
  e.lane = op.lane;
  e.start = op.start;
  e.finish = op.finish;
  e.transfer_end = op.finish;
  e.issue = op.issue;
  e.carried = op.carried;
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
  job_trace::write(path_, job_, mine, simcore::merge_chrome_traces);
}

}  // namespace vgpu::pt
