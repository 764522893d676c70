// Kernel launches under the passthrough backend. Each launch is forwarded or skipped as the
// launch policy says (launch_policy.h), and placed on its stream's virtual timeline with its
// duration: the signature's settled duration, a measurement of this very launch, the
// kernel-time database's (policy none), or for NCCL's kernels the virtual finish of their
// transfers (nccl_timing.h). With VGPU_KERNEL_DB set, forwarded launches are also recorded into
// the database (kernel_recording.h).
#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "front/driver/cuda_api.h"
#include "common/log.h"
#include "front/launch/kernel_time_db.h"
#include "passthrough/kernel_recording.h"
#include "passthrough/launch_device.h"
#include "passthrough/launch_facts.h"
#include "passthrough/launch_policy.h"
#include "passthrough/measure_lock.h"
#include "passthrough/nccl_gate.h"
#include "passthrough/nccl_timing.h"
#include "passthrough/recent_keys.h"
#include "passthrough/timeline_writer.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/shared_durations.h"
#include "passthrough/thread_clock.h"
#include "passthrough/virtual_time.h"

using vgpu::KernelTimeDb;
using vgpu::LaunchShape;
using vgpu::LaunchSignature;
using namespace vgpu::pt;

namespace {

// The kernel-time database of the virtual GPU model, for launches that are replayed.
double replayed_seconds(int device, const LaunchSignature& sig) {
  PassState* s = PassState::get();
  const vgpu::Device* d = s ? s->device(device) : nullptr;
  if (d == nullptr) return vgpu::KernelTimeModel::kLaunchFloorS;
  const simcore::GpuModel& m = d->model();
  // Made on the first replayed launch, for the model of the first device that asks (every
  // virtual device of a cluster has the same model).
  KernelTimeDb& db = Passthrough::get().kernel_dbs().model.get(
      [&m] { return new KernelTimeDb(KernelTimeDb::path_from_environment(), m.name); });
  const vgpu::GpuFigures figures{m.memory_bw, m.fp32_flops, m.tf32_tensor_flops, m.bf16_tensor_flops};
  return vgpu::recorded_or_estimated(db, figures, sig);
}

Timing measured_timing() {
  Timing t;
  t.source = Timing::Source::measured;
  return t;
}

// What to do with one launch.
struct Plan {
  bool run = true;
  Timing timing = measured_timing();
  bool have_signature = false;
  LaunchSignature signature;
  // The function's first launch in its context: it may load the function, so its measurement
  // includes host work and takes no part in learning which bytes matter (launch_policy.h).
  // Heap-held, made only for a launch whose measurement is kept: the measurement callback
  // reads it after the plan was moved from.
  std::shared_ptr<bool> first;
};

// The work keys (signature_work_key) of the signatures whose exact keys a thread met: computing
// one hashes the signature's bytes once more, ~30 ns a launch with a long name.
using WorkKeys = std::unordered_map<uint64_t, uint64_t>;

// What a launching thread keeps from launch to launch, in one thread-local looked up once per
// launch and passed down (LaunchScratch says why).
struct LaunchThread {
  Plan plan;
  bool busy = false;  // `plan` is in use (a launch planned while another is on the same thread)
  LaunchScratch scratch;
  WorkKeys work_keys;
  RecentKeys keys;  // recent_keys.h
  LastLaunchDevice device;  // launch_device.h
  // The backend's parts every launch asks for, each made once and never destroyed
  // (passthrough.h): kept here once known, not looked up through the backend's root on every
  // launch (a static's guard and two calls each, ~80 instructions of a settled launch, issue 21).
  // (The virtual time is kept in the thread's call state: CallThread::virtual_time.)
  // (PassState::get() is an inline load already: not kept here.)
  KernelDurations* durations = nullptr;
  KernelRecording* recording = nullptr;
  bool recording_known = false;  // `recording` was asked for (it is made then, null or not)

  KernelDurations& kernel_durations() {
    if (durations == nullptr) durations = &KernelDurations::get();
    return *durations;
  }
  // Whether VGPU_TIMELINE is written (ops get labels) and VGPU_LAUNCH_POLICY, each fixed for the
  // process and asked once a thread: each was a static's guard on every launch, on cache lines
  // of their own that a framework's work evicts between launches (issue 21). -1: not asked yet.
  int8_t labels = -1;
  int8_t policy = -1;
  bool timeline_labels() {
    if (labels < 0) labels = TimelineWriter::get() != nullptr ? 1 : 0;
    return labels > 0;
  }
  LaunchPolicy process_policy() {
    if (policy < 0) policy = static_cast<int8_t>(launch_policy());
    return static_cast<LaunchPolicy>(policy);
  }
  KernelRecording* kernel_recording() {
    if (!recording_known) {
      recording = KernelRecording::get();
      recording_known = true;
    }
    return recording;
  }
};

// The work key of the signature whose exact key is `key`, remembered in `known` (the thread's).
uint64_t work_key_of(WorkKeys& known, uint64_t key, const LaunchSignature& signature) {
  if (auto it = known.find(key); it != known.end()) return it->second;
  if (known.size() >= 8192) known.clear();  // bounded: a long run meets many signatures
  return known[key] = signature_work_key(signature);
}

// Plans one launch into `p`, a plan used before or new: its signature's buffer is reused.
// `thread`: the calling thread's state (its scratch and work keys; not its plan, which may be busy).
void plan_for(Plan& p, LaunchThread& thread, CUfunction f, const LaunchShape& shape, void** params, void** extra,
              const StreamTarget& t) {
  p.run = true;
  p.timing.reset(Timing::Source::measured);  // in place: no Timing made and moved per launch
  p.have_signature = false;
  p.first.reset();
  p.timing.kernel = true;
  const FunctionFacts& facts = function_facts(f, thread.scratch);
  if (facts.ok && thread.timeline_labels()) p.timing.label = facts.name;
  if (facts.ok && facts.nccl) {
    // Always run (peers spin-wait on it); timed by its transfers when the vgpu plugin moves them.
    if (nccl_timing::plugin_present()) {
      p.timing.source = Timing::Source::nccl;
      p.timing.nccl_gpu = nccl_timing::global_gpu(t.device);
      p.timing.nccl = nccl_timing::attribute(p.timing.nccl_gpu);
    }
    return;
  }
  RecentSignatures::Derived* derived = nullptr;
  PassState* state = PassState::get();
  p.have_signature = launch_signature(state, f, facts, shape, params, extra, thread.scratch, &p.signature, &derived);
  const LaunchPolicy policy = thread.process_policy();
  if (policy == LaunchPolicy::none) {
    p.run = false;
    p.timing.source = Timing::Source::known;
    p.timing.seconds =
        p.have_signature ? replayed_seconds(t.device, p.signature) : vgpu::KernelTimeModel::kLaunchFloorS;
    return;
  }
  if (!p.have_signature) return;  // measured each time
  KernelDurations& durations = thread.kernel_durations();
  // The device's GPU, whether another virtual device shares it, and what the job's other
  // processes on that GPU settled (shared_durations.h: the smallest of them and this process's
  // own is the least disturbed measurement); fixed at cuInit, kept for the thread's last device.
  const LaunchDevice& device = thread.device.of(state, t.device, [state, &t] {
    LaunchDevice d;
    d.physical = state ? state->physical(t.device) : -1;
    d.shared = Passthrough::get().shared_durations().of(d.physical);
    d.shares_physical = state != nullptr && state->shares_physical(t.device);
    return d;
  });
  const int physical = device.physical;
  SharedDurations* shared = device.shared;
  // Also the key under which this process remembers what settled() answered: kept with the
  // signature while it is this very launch's again (recent_signatures.h), else the recent keys'.
  if (!derived->known) {
    derived->key = thread.keys.key(f, p.signature.bytes, SharedDurations::key_of);
    derived->known = true;
  }
  const uint64_t key = derived->key;
  // Where several virtual devices share the GPU, their ranks' exact signatures rarely meet (the
  // by-value bytes hold each process's stack garbage), and a signature one rank measured while
  // others' kernels held the GPU settles high (8 ranks of DDP on one H200: the LM head's GEMM
  // settled at 2.74 ms on one rank, 4.9-7.6 ms on five others). So every sample is also offered
  // under the launch's work key (signature_work_key), and a launch never takes more than the least
  // sample any rank took of the same work.
  // Kept with the signature as its key is, else the thread's table of work keys.
  uint64_t work = 0;
  if (shared != nullptr && device.shares_physical) {
    if (!derived->work_known) {
      derived->work = work_key_of(thread.work_keys, key, p.signature);
      derived->work_known = true;
    }
    work = derived->work;
  }
  auto least_of_job = [shared, key, work](double own) {
    double d = own;
    if (const std::optional<double> least = shared ? shared->smallest(key) : std::nullopt) d = std::min(d, *least);
    if (const std::optional<double> least = work != 0 ? shared->smallest(work) : std::nullopt) d = std::min(d, *least);
    return d;
  };
  // The launch runs (under `all`) and takes a duration known without measuring it (sets it in
  // `p`: no copy of the signature on this, the hottest path).
  auto known = [&p, policy](double seconds) {
    p.timing.source = Timing::Source::known;
    p.timing.seconds = seconds;
    p.run = policy == LaunchPolicy::all;
  };
  if (const std::optional<double> settled = durations.settled(p.signature, key)) {
    known(least_of_job(*settled));
    return;
  }
  // Not begun to be measured here: a duration known elsewhere is taken as it is (below, this
  // process's own samples settle it otherwise).
  const bool seen = durations.seen(p.signature);
  // Measured once per job, not once per rank: a signature another process of the job settled on
  // this physical GPU is taken from the shared table without measuring it here.
  if (shared != nullptr && !seen) {
    if (const std::optional<double> least = shared->smallest(key)) {
      durations.settle(p.signature, *least);
      known(*least);
      return;
    }
  }
  // The same where the ranks' exact signatures differ but their work is the same (work key): a
  // duration another rank settled for it is taken, also for a signature this process has begun
  // to measure (8 ranks of DDP on one H200 each measured 5-17 of their ~870 launches a step still
  // at step 15, every measurement taking the GPU alone; 2 ranks 2-3). Not settled here: a
  // signature whose bytes vary (stack garbage) would add a group per launch; the lookup is two
  // atomic reads of the shared table each launch instead.
  if (work != 0) {
    if (const std::optional<double> least = shared->smallest(SharedDurations::settled_work_key(work))) {
      durations.taken_from_job();  // counted so: not measured (the stats read 50-100 a step as measured)
      known(least_of_job(*least));
      return;
    }
  }
  // A duration the kernel-time database holds for this physical GPU is taken as it is, but only
  // for a signature this process has not begun to measure: its own samples settle as above (the
  // first sample of a signature includes the host's launch latency; taking it alone from the
  // database made a GPT-2 step 30% slow). Each settled duration (not each raw sample) goes to
  // the database, when one is configured and CUPTI is not recording instead (kernel_recording.h),
  // with its group (record_measured). Looked up here: exact rows only (the groups are the sim's;
  // settle() takes one signature, so a group's duration would make a group per launch).
  KernelTimeDb* physical_db = physical_kernel_db(physical);
  if (physical_db != nullptr && !seen) {
    if (const std::optional<uint64_t> ns = physical_db->lookup_exact(p.signature)) {
      const double seconds = static_cast<double>(*ns) * 1e-9;
      durations.settle(p.signature, seconds);
      known(seconds);
      return;
    }
  }
  KernelTimeDb* db = thread.kernel_recording() ? nullptr : physical_db;
  durations.measuring();
  p.first = std::make_shared<bool>(false);
  p.timing.on_measured = [&durations, db, shared, key, work, least_of_job, sig = p.signature,
                          first = p.first](double s) {
    double least = s;
    const std::optional<double> settled = durations.add_sample(sig, s, /*learn=*/!*first, &least);
    if (settled && shared != nullptr) {
      shared->offer(key, *settled);
      if (work != 0) shared->offer(SharedDurations::settled_work_key(work), *settled);
    }
    // Every sample bounds the work from above (contention, a time slice, loading a function at its
    // first launch in a context only add to it), so each caps what the job's launches of the same
    // work take, the first launch's too: 8 ranks of DDP on one H200 measured the optimizer's
    // first kernel after the last bucket's all-reduce in every step, each time behind the other
    // ranks' kernels (0.7-4.5 ms against 2.8 us alone), and only each rank's first launch of it,
    // left out here, had been taken with the GPU nearly free (17 us; 2026-11-29).
    if (work != 0) shared->offer(work, s);
    // The database gets what the launches of the signature take from now on: the settled
    // duration within what the job's ranks measured of the same work. A rank's own settled
    // duration can hold the other ranks' time slices (2 time-sliced ranks of GPT-2 DDP recorded a
    // GEMM at 7.03 ms whose work another rank measured at 6.66), and a replay of the database
    // would read them where this job's timeline did not.
    if (db != nullptr) record_measured(*db, sig, settled ? std::optional<double>(least_of_job(*settled)) : settled);
    // Which launches keep being measured, and why (their words against the family's earlier
    // ones): VGPU_LOG_LEVEL=debug, for the speed issue's "measured per step".
    if (vgpu::log::enabled(vgpu::log::Level::debug))
      vgpu::log::debug("vgpu: measured {:.2f} us (first {}, settled {}) {}", s * 1e6, *first, settled.has_value(), sig.hex());
    return least_of_job(std::min(s, settled ? *settled : least));
  };
}

// Whether `f` was launched in `ctx` before (and now it has been).
bool launched_before(CUcontext ctx, CUfunction f) {
  LaunchedFunctions& launched = Passthrough::get().launched();
  std::lock_guard l(launched.mu);
  return !launched.seen.insert({ctx, f}).second;
}

// Forwards (or skips) one launch and times it.
template <class Launch>
CUresult timed_launch(CUfunction f, const LaunchShape& shape, CUstream stream, bool per_thread, void** params,
                      void** extra, Launch launch) {
  CallThread& thread = thread_clock::detail::call_thread_with_clock();
  VirtualTime* vt = VirtualTime::of_thread(thread);
  if (vt == nullptr || f == nullptr) return launch();
  thread_clock::Pause pause(thread);  // as every timed call (timed_api.cpp): only the real driver's time is charged
  StreamTarget t;
  if (!vt->target(stream, per_thread, &t, thread.target) || vt->capturing(t)) return launch();
  // The thread's plan, reused launch after launch: its signature's buffer is allocated once, not
  // per launch (an allocation and a free were a tenth of a settled launch's own work). A launch
  // planned while another is on the same thread (none is known: the real driver calls no entry
  // point back) gets a plan of its own; the scratch is the thread's all the same (used only while
  // planning, which calls no entry point of vgpu's). Looked up (made, on the thread's first
  // launch) inside the Pause: its making is vgpu's work, not the program's (under TSan it was
  // long enough to skew the 4-thread VirtualTime test when made before the Pause).
  // Kept in the thread's call state once looked up (CallThread::launch): a thread-local that is
  // not constant-initialized is two lookups and a guard per use.
  if (thread.launch == nullptr) {
    thread_local LaunchThread t_launch;
    thread.launch = &t_launch;
  }
  LaunchThread& mine = *static_cast<LaunchThread*>(thread.launch);
  std::unique_ptr<Plan> own;  // (not a std::optional<Plan>: its emptiness cost ~25 instructions a launch)
  Plan& plan = mine.busy ? *(own = std::make_unique<Plan>()) : mine.plan;
  struct Release {
    bool* busy;
    ~Release() {
      if (busy != nullptr) *busy = false;
    }
  } release{mine.busy ? nullptr : &mine.busy};
  mine.busy = true;
  plan_for(plan, mine, f, shape, params, extra, t);
  VirtualTime::Bracket bracket;
  KernelRecording* rec = nullptr;
  // A launch measured now holds the physical GPU's measurement lock until it has run.
  MeasureLock* alone = nullptr;
  if (plan.run && plan.timing.source == Timing::Source::measured) {
    PassState* s = PassState::get();
    alone = MeasureLock::of(s ? s->physical(t.device) : -1);
    if (alone != nullptr && !alone->acquire()) alone = nullptr;
    if (alone != nullptr) pause.mark_blocking();  // it waits for its kernel
  }
  if (plan.run) {
    // Gated only once the function has run in this context before: the first launch of a
    // function may load it (lazy loading), and loading can wait for the context's streams,
    // one of which the gate holds shut until the launch returns: a deadlock (seen on an H200
    // with several virtual devices in one process).
    const bool measured = plan.timing.source == Timing::Source::measured;
    const bool first = measured && !launched_before(t.context, f);
    if (plan.first) *plan.first = first;
    bracket = vt->begin(t, plan.timing, /*gated=*/alone != nullptr && measured && !first);
    rec = plan.have_signature ? mine.kernel_recording() : nullptr;
    if (rec != nullptr &&
        !rec->begin(plan.signature, {t.context, stream, per_thread, function_facts(f, mine.scratch).name, shape}))
      rec = nullptr;
  }
  // An NCCL collective's kernel waits on the GPU for its communicator's other ranks (nccl_gate.h).
  const nccl_gate::Ticket held = plan.timing.source == Timing::Source::nccl
                                     ? nccl_gate::hold(plan.timing.nccl.launch, t.record_on)
                                     : nccl_gate::Ticket{};
  nccl_gate::arrive(held);
  const CUresult r = plan.run ? pause.real(vgpu::timing::DriverCall::launch, launch) : CUDA_SUCCESS;
  if (rec != nullptr) rec->end(r == CUDA_SUCCESS);
  OpRef op;
  if (r == CUDA_SUCCESS)
    op = vt->submit(t, std::move(plan.timing), bracket, /*keep_op=*/alone != nullptr, &pause);
  else
    vt->abandon(bracket);
  if (alone != nullptr) {
    vt->wait_measured(op, MeasureLock::kWaitSeconds);
    alone->release();
  }
  return r;
}

LaunchShape shape_of(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned shared) {
  return {{gx, gy, gz}, {bx, by, bz}, shared};
}

LaunchShape shape_of(const CUlaunchConfig* c) {
  return c ? shape_of(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                      c->sharedMemBytes)
           : LaunchShape{};
}

using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, CUstream, void**, void**);
using CooperativeFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, CUstream, void**);
using LaunchKernelExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);

// cuLaunchKernel's arguments, in one place: passed down and captured as one reference, not
// eleven (the stores, loads and stack arguments were ~50 instructions a launch, issue 21).
struct KernelArgs {
  CUfunction f;
  unsigned gx, gy, gz, bx, by, bz, shared;
  CUstream s;
  void** params;
  void** extra;
};

CUresult launch_kernel(LaunchKernelFn real, bool per_thread, const KernelArgs& a) {
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return timed_launch(a.f, shape_of(a.gx, a.gy, a.gz, a.bx, a.by, a.bz, a.shared), a.s, per_thread, a.params,
                      a.extra, [real, &a] {
                        return real(a.f, a.gx, a.gy, a.gz, a.bx, a.by, a.bz, a.shared, a.s, a.params, a.extra);
                      });
}

CUresult launch_cooperative(CooperativeFn real, bool per_thread, CUfunction f, unsigned gx, unsigned gy,
                            unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream s,
                            void** params) {
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return timed_launch(f, shape_of(gx, gy, gz, bx, by, bz, shared), s, per_thread, params, nullptr,
                      [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params); });
}

CUresult launch_kernel_ex(LaunchKernelExFn real, bool per_thread, const CUlaunchConfig* c, CUfunction f,
                          void** params, void** extra) {
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  if (c == nullptr) return real(c, f, params, extra);  // the real driver's error
  return timed_launch(f, shape_of(c), c->hStream, per_thread, params, extra,
                      [&] { return real(c, f, params, extra); });
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                            unsigned by, unsigned bz, unsigned shared, CUstream s,
                                            void** params, void** extra) {
  return launch_kernel(VGPU_REAL("cuLaunchKernel", LaunchKernelFn), false,
                       {f, gx, gy, gz, bx, by, bz, shared, s, params, extra});
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                 unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                                 CUstream s, void** params, void** extra) {
  return launch_kernel(VGPU_REAL("cuLaunchKernel_ptsz", LaunchKernelFn), true,
                       {f, gx, gy, gz, bx, by, bz, shared, s, params, extra});
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                       unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                                       CUstream s, void** params) {
  return launch_cooperative(VGPU_REAL("cuLaunchCooperativeKernel", CooperativeFn), false, f, gx, gy, gz, bx, by,
                            bz, shared, s, params);
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                            unsigned bx, unsigned by, unsigned bz,
                                                            unsigned shared, CUstream s, void** params) {
  return launch_cooperative(VGPU_REAL("cuLaunchCooperativeKernel_ptsz", CooperativeFn), true, f, gx, gy, gz, bx,
                            by, bz, shared, s, params);
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return launch_kernel_ex(VGPU_REAL("cuLaunchKernelEx", LaunchKernelExFn), false, c, f, params, extra);
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params,
                                                   void** extra) {
  return launch_kernel_ex(VGPU_REAL("cuLaunchKernelEx_ptsz", LaunchKernelExFn), true, c, f, params, extra);
}
