#include "passthrough/kernel_recording.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "common/settings.h"
#include "cupti_profiler/recorder.h"
#include "front/launch/kernel_time_db.h"
#include "passthrough/launch_policy.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"

namespace vgpu::pt {
namespace {

void checkpoint_kernel_dbs();  // below, with the other work done at exit

// The launch being bracketed on this thread (begin .. end).
struct Current {
  cupti::KernelLaunch launch;
  uint64_t tag = 0;
};
thread_local Current t_current;

class Recording final : public KernelRecording {
 public:
  Recording(std::unique_ptr<cupti::Recorder> recorder, std::string db_path)
      : recorder_(std::move(recorder)), db_path_(std::move(db_path)) {
    recorder_->set_sink([this](const cupti::Completed& c) { completed(c); });
  }

  bool begin(const LaunchSignature& sig, const Launch& launch) override {
    PassState* s = PassState::get();
    if (s == nullptr || launch.context == nullptr) return false;
    const int v = s->device_of(launch.context);
    KernelTimeDb* db = db_for(s->physical(v < 0 ? 0 : v));
    if (db == nullptr) return false;
    uint64_t tag;
    {
      std::lock_guard l(pending_mu_);
      tag = ++next_tag_;
      pending_.emplace(tag, Pending{sig, db});
    }
    cupti::KernelLaunch k;
    k.context = launch.context;
    k.stream = launch.stream;
    k.per_thread_default = launch.per_thread;
    k.name = launch.name;
    for (int i = 0; i < 3; ++i) {
      k.grid[i] = launch.shape.grid[static_cast<size_t>(i)];
      k.block[i] = launch.shape.block[static_cast<size_t>(i)];
    }
    recorder_->expect_kernel(k, tag);  // by stream order; the tag below is the fallback
    recorder_->begin_op(tag);
    t_current = {k, tag};
    return true;
  }

  void end(bool launched) override {
    recorder_->end_op();
    if (!launched) {
      recorder_->cancel_kernel(t_current.launch, t_current.tag);
      std::lock_guard l(pending_mu_);
      pending_.erase(t_current.tag);
    }
  }

  void forget_stream(CUcontext context, CUstream stream) override { recorder_->forget_stream(context, stream); }
  void forget_context(CUcontext context) override { recorder_->forget_context(context); }

  void flush() override {
    recorder_->flush();
    const cupti::RecorderStats st = recorder_->stats();
    size_t waiting;
    {
      std::lock_guard l(pending_mu_);
      waiting = pending_.size();
    }
    log::debug("kernel recording: {} launches tagged, {} ops delivered, {} ops waiting for a tag, {} untagged "
               "dropped, {} untimed, {} lost by CUPTI, {} buffers, {} launches still waiting; by stream order: "
               "{} matched, {} dropped, {} pending, {} unresolved, {} records unannounced, {} duplicates",
               next_tag_, st.delivered, st.pending, st.untagged_dropped, st.untimed, st.cupti_dropped, st.buffers,
               waiting, st.kernels_matched, st.expect_dropped, st.expect_pending, st.expect_unresolved,
               st.kernels_unannounced, st.duplicates);
  }

 private:
  struct Pending {
    LaunchSignature signature;
    KernelTimeDb* db;
  };

  KernelTimeDb* db_for(int physical) { return physical_kernel_db(physical); }

  void completed(const cupti::Completed& c) {
    log::trace("kernel recording: tag {} kind {} {} ns", c.tag, static_cast<int>(c.kind), c.end_ns - c.start_ns);
    if (c.kind != cupti::OpKind::kernel || c.end_ns <= c.start_ns) return;
    Pending p;
    {
      std::lock_guard l(pending_mu_);
      auto it = pending_.find(c.tag);
      if (it == pending_.end()) return;
      p = std::move(it->second);
      pending_.erase(it);
    }
    p.db->record(p.signature, c.end_ns - c.start_ns);
  }

  std::unique_ptr<cupti::Recorder> recorder_;
  std::string db_path_;
  std::mutex pending_mu_;
  uint64_t next_tag_ = 0;
  std::unordered_map<uint64_t, Pending> pending_;
};

Recording* make() {
  const std::string path = KernelTimeDb::path_from_environment();
  // VGPU_MEASURE=cupti: every executed launch; serialize: the same with CUPTI running kernels
  // one at a time (not for jobs whose ranks wait on each other inside kernels, as NCCL's do).
  const std::string m = settings::text(settings::Id::measure);
  const bool cupti = m == "cupti" || m == "serialize";
  if (path.empty() || !cupti) return nullptr;
  cupti::RecorderOptions options;
  options.serialize_kernels = m == "serialize";
  auto recorder = cupti::Recorder::start(options);
  if (!recorder) {
    log::always("vgpu passthrough: VGPU_KERNEL_DB is set but CUPTI could not be started; "
                "kernel durations are not recorded");
    return nullptr;
  }
  auto* r = new Recording(std::move(recorder), path);  // lives until exit; flushed there
  std::atexit([] {
    if (KernelRecording* k = KernelRecording::get()) k->flush();
    checkpoint_kernel_dbs();
  });
  log::info("passthrough: recording kernel durations into {}", path);
  return r;
}

}  // namespace

KernelTimeDb* physical_kernel_db(int physical) {
  static const std::string path = KernelTimeDb::path_from_environment();
  if (path.empty() || physical < 0) return nullptr;
  char name[256] = {};
  if (VGPU_REAL("cuDeviceGetName", CUresult (*)(char*, int, CUdevice))(name, sizeof name, physical) != CUDA_SUCCESS)
    return nullptr;
  KernelDatabases& dbs = Passthrough::get().kernel_dbs();
  std::lock_guard l(dbs.mu);
  auto& db = dbs.physical[name];
  if (!db) db = std::make_unique<KernelTimeDb>(path, name);
  return db.get();
}

namespace {

// At exit, after the last records: every database this process wrote holds them in its file
// itself (KernelTimeDb::checkpoint), not only in its write-ahead log.
void checkpoint_kernel_dbs() {
  KernelDatabases& dbs = Passthrough::get().kernel_dbs();
  std::lock_guard l(dbs.mu);
  for (auto& [name, db] : dbs.physical)
    if (db) db->checkpoint();
}

void record_groups_at_exit() {
  KernelDatabases& dbs = Passthrough::get().kernel_dbs();
  KernelTimeDb* db = nullptr;
  {
    std::lock_guard l(dbs.mu);
    if (dbs.physical.size() == 1) db = dbs.physical.begin()->second.get();
  }
  KernelDurations* d = Passthrough::get().durations_if_made();
  if (db != nullptr && d != nullptr) {
    const std::vector<SettledGroup> groups = d->export_groups();
    size_t unsettled = 0;
    for (const SettledGroup& g : groups) unsettled += !g.settled;
    if (db->record_groups(groups))
      log::debug("kernel-time database: {} settling groups recorded at exit ({} never settled)", groups.size(),
                 unsettled);
  }
  checkpoint_kernel_dbs();
}

}  // namespace

void record_measured(KernelTimeDb& db, const LaunchSignature& signature, std::optional<double> settled) {
  std::call_once(Passthrough::get().kernel_dbs().groups_at_exit, [] { std::atexit(record_groups_at_exit); });
  if (!settled) return;
  db.record(signature, static_cast<uint64_t>(*settled * 1e9 + 0.5), KernelTimeDb::Merge::least);
  if (std::optional<SettledGroup> g = KernelDurations::get().settled_group(signature)) {
    g->seconds = std::min(g->seconds, *settled);  // the group's launches take no more than the row's
    db.record_groups({&*g, 1});
  }
}

KernelRecording* KernelRecording::get() { return Passthrough::get().kernel_recording(); }

KernelRecording* KernelRecording::start() { return make(); }

}  // namespace vgpu::pt
