// simcore benchmarks on Google Benchmark. Every ratio is against a baseline measured in the same
// run, in the same benchmark, and is reported as a counter beside the times it comes from:
//   ring_vs_full_resolve/{aligned,spread}  the first steps of a ring all-reduce (1 GiB, 1024 GPUs
//       = 128 nodes x 8, leaf-spine), in the engine and in full_resolve_baseline.h (max-min
//       re-solved from scratch over every running flow at every instant); ratio = baseline CPU
//       time / engine CPU time on the same flows, max_rel_diff = how far their finishes differ.
//       aligned: every GPU starts the collective at t = 0 (synchronous training); spread: each
//       GPU's first send starts at a random time within 20 us.
//   ring_vs_full_resolve/{aligned,spread}_whole  the same over the whole ring all-reduce (2046
//       steps, 2.1 M flows), all submitted before one query; spread_whole's baseline takes
//       about 70 CPU s on the 2-core build machine. The engine runs as inside a job's process
//       (no huge pages); aligned_whole_own_process runs it as vgpu-netsim and vgpud do
//       (EngineOptions::huge_pages), vgpu-netsim being where a whole trace is submitted before
//       its first query.
//     The engine takes each step in one Engine::add_flows() call (like flows become flow groups,
//     simcore/src/flow_group.h); the same flows through add_flow() one by one give
//     one_by_one_s, ratio_one_by_one and one_by_one_diff. B/flow: the engine's history and
//     results per flow (Engine::Stats), each way; apart/flow: group members that left their
//     group to start at an instant of their own.
//   ring_allreduce/gpus:N  a whole ring all-reduce of 1 GiB over N GPUs (2 N (N-1) flows) in the
//       engine, submitted step by step (one add_flows() call a step) by one rank that promises,
//       after each step, the earliest start of the step it just submitted (history behind it is
//       reclaimed); solved/flow: flows given a rate by the solver (0 while groups stay whole);
//       apart/flow: group members that left their group to start at an instant of their own;
//       ring_allreduce_one_by_one/gpus:1024: the same with one add_flow() per flow;
//       ns_per_flow, and for N = 1024 the same run's ratio to 0.5 s (4096: to 5 s);
//       skew_steps: the widest spread of one step's starts over the GPUs, in mean step
//       durations (the ring drifts apart in virtual time, and the events live behind the floor
//       grow with it: live_events); result_B/flow and history_B/flow: what the engine holds at
//       the end (Engine::Stats: the ids' table, kept whole by a caller that never releases, and
//       the history not reclaimed yet), per flow; host_probe_ms: a fixed piece of work timed
//       just before (host_probe_ms(): which of its speeds the machine ran at). The engine runs
//       as vgpud and vgpu-netsim run it (own_process = 1: EngineOptions::huge_pages);
//       ring_allreduce_in_process/gpus:4096: the same as an engine inside a job's process runs it
//       (no huge pages: own_process = 0).
//   ring_allreduce_exponent  fits ns_per_flow ~ N^e over the ring_allreduce runs of this
//       process (128..4096 GPUs): per_flow_exponent e (0: the cost of a flow does not grow with
//       the cluster), whole_ring_exponent 2 + e; large_exponent: the same fit over 1024 GPUs
//       and more; 4096_over_1024: ns_per_flow at 4096 GPUs over that at 1024.
//   rollback/depth:d  one flow arriving d events (in start order) before the last start of dense
//       64-GPU traffic (1 MiB flows between random GPUs of 8 nodes x 8, one every 0.5 us, all
//       in one component); ratio to a flow arriving after everything (no rollback);
//       us_vs_100us = the rollback's time over 100 us; solves / solved_flows = the max-min
//       fillings one rollback runs and the flows they give a rate (solved_flows / solves: the
//       mean size of a filling); stale_dropped = the stale queue items (transfer ends queued
//       again earlier) one rollback drops in bulk; forward_us_per_flow = simulating the dense
//       traffic itself (in order, no rollback) per flow.
//   memory/flows:N  history held after N flows from 16 ranks whose floors advance (2 nodes);
//       ratio to the same flows with no ranks (nothing reclaimable) at 10^6 flows.
//   netsim_ring/gpus:N  the built vgpu-netsim on the trace of a whole 1 GiB ring all-reduce over N
//       GPUs (JSON lines, as NCCL's ranks would emit it), read from the file (two passes, floors
//       promised) and from standard input (one pass, everything kept): CPU seconds, peak memory
//       per flow (the tool's own VmHWM, --stats) and the engine's and reader's own count (--stats) per flow;
//       bin_*: the same trace in the binary format (simcore/tools/netsim_binary.h) from the
//       file, whose CPU seconds are s_vs_1s (the target: below 1); bin_one_by_one_cpu_s: the
//       same with --one-by-one (each line submitted alone, no flow groups), and the ratio.
//
//   simcore-bench [--quick] [Google Benchmark flags, e.g. --benchmark_filter=ring]
// --quick shrinks every workload (the smoke run of `meson test --benchmark`). Times are CPU
// seconds of this process (every benchmark here is single-threaded), so other load on the
// machine moves them little.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "full_resolve_baseline.h"
#include "netsim_binary.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"
#include "simcore/topology.h"

namespace {

using simcore::Engine;
using simcore::EngineOptions;
using simcore::EventId;
using simcore::FlowSpec;
using simcore::Time;
using simcore::bench::BaselineEvent;

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The process's minor page faults so far: pages first touched (~14 us each on this container)
// and pages brought in by MADV_POPULATE_WRITE (~0.8 us each), which the kernel counts alike.
double page_faults_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
}

// The machine's speed right now: CPU ms of a fixed piece of work like the engine's (dependent
// loads over 32 MB, past the caches, and integer arithmetic). The build container's host runs
// at two speeds ~1.7x apart from minute to minute (a 4096-GPU ring read 4.8 and 7.4 s three
// minutes apart, 2026-11-29); this says which one a run met, so that runs compare.
double host_probe_ms() {
  static std::vector<uint32_t> next = [] {
    std::vector<uint32_t> v(size_t{8} << 20);  // a random cycle over 8 M entries
    std::vector<uint32_t> order(v.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937 rng(7);
    std::shuffle(order.begin() + 1, order.end(), rng);
    for (size_t i = 0; i < order.size(); ++i) v[order[i]] = order[(i + 1) % order.size()];
    return v;
  }();
  const double t0 = cpu_now();
  uint32_t at = 0;
  uint64_t h = 1;
  for (int i = 0; i < 2'000'000; ++i) {
    at = next[at];
    h = h * 6364136223846793005ull + at;
  }
  benchmark::DoNotOptimize(h);
  return 1e3 * (cpu_now() - t0);
}

simcore::ClusterSpec cluster_of_gpus(int gpus) {
  simcore::ClusterSpec c = simcore::default_cluster();
  c.gpus_per_node = 8;
  c.nodes = std::max(1, gpus / 8);
  return c;
}

constexpr uint64_t kGiB = uint64_t(1) << 30;

// Ring all-reduce: 2(N-1) steps; in step s GPU i sends one chunk to GPU i+1 once it received
// the previous step's chunk from GPU i-1 and finished its own previous send. Event index:
// s * N + i. jitter > 0: each GPU's first send starts at a random time in [0, jitter).
std::vector<BaselineEvent> ring_events(int n, int steps, uint64_t buffer, double jitter) {
  std::vector<BaselineEvent> out;
  out.reserve(static_cast<size_t>(steps) * n);
  std::mt19937_64 rng(1);
  const uint64_t chunk = buffer / static_cast<uint64_t>(n);
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < n; ++i) {
      BaselineEvent e;
      e.src = i;
      e.dst = (i + 1) % n;
      e.bytes = chunk;
      if (s == 0 && jitter > 0) e.not_before = jitter * static_cast<double>(rng() % 1000000) / 1e6;
      if (s > 0) {
        const uint32_t base = static_cast<uint32_t>((s - 1) * n);
        e.after = {base + static_cast<uint32_t>((i + n - 1) % n), base + static_cast<uint32_t>(i)};
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

// All events submitted, then one query per event: the engine simulates them in one sweep.
// batch = 0: one add_flow() per event; else add_flows() of `batch` events at a time (a ring
// step: its like flows become flow groups).
std::vector<simcore::Interval> engine_run(const simcore::ClusterSpec& c,
                                          const std::vector<BaselineEvent>& events,
                                          Engine::Stats* stats, size_t batch = 0,
                                          bool own_process = false) {
  EngineOptions o;
  o.record_timeline = false;
  o.huge_pages = own_process;
  auto engine = simcore::make_engine(c, o);
  std::vector<EventId> ids(events.size());
  std::vector<FlowSpec> flows(std::max<size_t>(batch, 1));
  for (size_t from = 0; from < events.size();) {
    const size_t count = batch == 0 ? 1 : std::min(batch, events.size() - from);
    for (size_t j = 0; j < count; ++j) {
      const BaselineEvent& e = events[from + j];
      FlowSpec& f = flows[j];
      f.src_gpu = e.src;
      f.dst_gpu = e.dst;
      f.bytes = e.bytes;
      f.not_before = e.not_before;
      f.after.clear();
      for (uint32_t d : e.after) f.after.push_back(ids[d]);
    }
    if (batch == 0) ids[from] = engine->add_flow(flows[0]);
    else engine->add_flows(std::span<const FlowSpec>(flows.data(), count), std::span<EventId>(&ids[from], count));
    from += count;
  }
  std::vector<simcore::Interval> out(events.size());
  for (size_t k = events.size(); k-- > 0;) out[k] = *engine->query(ids[k]);
  if (stats) *stats = engine->stats();
  return out;
}

void ring_vs_full_resolve(benchmark::State& state, bool quick, double jitter, bool whole, bool own_process) {
  const int n = quick ? 128 : 1024;
  const int steps = whole ? 2 * (n - 1) : quick ? 16 : 64;
  const simcore::ClusterSpec c = cluster_of_gpus(n);
  const auto events = ring_events(n, steps, kGiB, jitter);
  const simcore::Topology topology(c);
  for (auto _ : state) {
    double t0 = cpu_now();
    const auto base = simcore::bench::full_resolve_simulate(topology, events);
    const double base_s = cpu_now() - t0;
    Engine::Stats stats, single_stats;
    t0 = cpu_now();
    const double faults0 = page_faults_now();
    const auto got = engine_run(c, events, &stats, static_cast<size_t>(n), own_process);
    const double engine_s = cpu_now() - t0;
    const double engine_faults = page_faults_now() - faults0;
    t0 = cpu_now();
    const auto single = engine_run(c, events, &single_stats, 0, own_process);
    const double single_s = cpu_now() - t0;
    state.SetIterationTime(engine_s);
    double diff = 0, single_diff = 0;
    for (size_t k = 0; k < events.size(); ++k) {
      const double want = base.intervals[k].finish;
      diff = std::max(diff, std::abs(got[k].finish - want) / std::max(1e-30, want));
      diff = std::max(diff, std::abs(got[k].start - base.intervals[k].start) / std::max(1e-30, want));
      single_diff = std::max(single_diff, std::abs(single[k].finish - want) / std::max(1e-30, want));
    }
    state.counters["own_process"] = own_process;  // 1: the engine as vgpu-netsim runs it (huge pages)
    state.counters["gpus"] = n;
    state.counters["steps"] = steps;
    state.counters["flows"] = static_cast<double>(events.size());
    state.counters["baseline_s"] = base_s;
    state.counters["engine_s"] = engine_s;
    state.counters["engine_faults"] = engine_faults;
    state.counters["ratio"] = base_s / engine_s;
    state.counters["max_rel_diff"] = diff;
    state.counters["B/flow"] = static_cast<double>(stats.history_bytes + stats.result_bytes) / events.size();
    state.counters["one_by_one_B/flow"] =
        static_cast<double>(single_stats.history_bytes + single_stats.result_bytes) / events.size();
    state.counters["one_by_one_s"] = single_s;
    state.counters["ratio_one_by_one"] = base_s / single_s;
    state.counters["one_by_one_diff"] = single_diff;
    state.counters["base_solved/flow"] = static_cast<double>(base.solved_flows) / events.size();
    state.counters["solved/flow"] = static_cast<double>(stats.solved_flows) / events.size();
    state.counters["apart/flow"] = static_cast<double>(stats.group_members_apart) / events.size();
    // Dependency links between groups (flow_group.h), per flow; and those turned back into edges.
    state.counters["links/flow"] = static_cast<double>(stats.group_links) / events.size();
    state.counters["links_expanded"] = static_cast<double>(stats.group_links_expanded);
  }
}

// ---------------------------------------------------------------------------------------------
// Whole ring all-reduce at scale, as a rank would submit it: one step at a time, then a floor.

struct RingScaling {
  std::map<int, double> ns_per_flow;  // by GPU count, from this process's runs
  std::map<int, double> finish;       // the ring's virtual finish, by GPU count
};

struct RingRun {
  bool grouped = true;  // one add_flows() a step, else one add_flow() a flow
  // Once a step is submitted, the ids of the step before are released (Engine::release():
  // nothing names them again), as a rank that promises floors can do; the id table then stays
  // a few chunks long instead of 6 bytes per flow for the whole run. The answers are the same
  // (`same_finish` against the run that keeps them, when it ran first).
  bool release = false;
  // The engine as vgpud and vgpu-netsim run it (EngineOptions::huge_pages), else as in a
  // process of the job (the sim backend's, the NCCL plugin's).
  bool own_process = true;
};

void ring_allreduce(benchmark::State& state, RingScaling* scaling, RingRun run) {
  const bool grouped = run.grouped, release = run.release;
  const int n = static_cast<int>(state.range(0));
  const simcore::ClusterSpec c = cluster_of_gpus(n);
  const uint64_t chunk = kGiB / static_cast<uint64_t>(n);
  const int steps = 2 * (n - 1);
  for (auto _ : state) {
    EngineOptions o;
    o.record_timeline = false;
    o.huge_pages = run.own_process;
    const double probe = host_probe_ms();
    const double t0 = cpu_now();
    auto engine = simcore::make_engine(c, o);
    engine->register_rank(0);
    std::vector<EventId> prev(n, simcore::kNoEvent), cur(n);
    std::vector<FlowSpec> step(n);
    Time floor = 0, max_skew = 0;
    for (int s = 0; s < steps; ++s) {
      for (int i = 0; i < n; ++i) {
        FlowSpec& f = step[i];
        f.bytes = chunk;
        f.src_gpu = i;
        f.dst_gpu = (i + 1) % n;
        f.not_before = floor;
        f.after.clear();
        if (s > 0) f.after = {prev[(i + n - 1) % n], prev[i]};
        if (!grouped) cur[i] = engine->add_flow(f);
      }
      if (grouped) engine->add_flows(step, cur);
      // Nothing submitted later starts before the earliest start of this step.
      floor = engine->query(cur[0])->start;
      Time latest = floor;
      for (int i = 1; i < n; ++i) {
        const Time t = engine->query(cur[i])->start;
        floor = std::min(floor, t);
        latest = std::max(latest, t);
      }
      max_skew = std::max(max_skew, latest - floor);
      engine->set_rank_floor(0, floor);
      if (release && s > 0) engine->release(std::span<const EventId>(prev));
      std::swap(prev, cur);
    }
    const Time finish = engine->query(prev[n - 1])->finish;
    const auto stats = engine->stats();
    const double seconds = cpu_now() - t0;
    state.SetIterationTime(seconds);
    const double flows = static_cast<double>(steps) * n;
    if (scaling && !release && run.own_process) {
      scaling->ns_per_flow[n] = 1e9 * seconds / flows;
      scaling->finish[n] = finish;
    }
    if (scaling && (release || !run.own_process) && scaling->finish.count(n))
      state.counters["same_finish"] = scaling->finish[n] == finish ? 1 : 0;
    state.counters["flows"] = flows;
    state.counters["engine_s"] = seconds;
    state.counters["host_probe_ms"] = probe;
    state.counters["own_process"] = run.own_process ? 1 : 0;
    state.counters["ns_per_flow"] = 1e9 * seconds / flows;
    state.counters["solved/flow"] = static_cast<double>(stats.solved_flows) / flows;
    state.counters["apart/flow"] = static_cast<double>(stats.group_members_apart) / flows;
    state.counters["links/flow"] = static_cast<double>(stats.group_links) / flows;
    state.counters["virtual_ms"] = 1e3 * finish;
    // What the engine holds at the end, per flow: the ids' table (slots, group handles; all
    // of it kept by a caller that never releases) and the history not yet reclaimed.
    state.counters["result_B/flow"] = static_cast<double>(stats.result_bytes) / flows;
    state.counters["history_B/flow"] = static_cast<double>(stats.history_bytes) / flows;
    state.counters["live_events"] = static_cast<double>(stats.events_live);
    // How far apart in virtual time the GPUs' starts of one step lie, in mean steps.
    state.counters["skew_steps"] = max_skew / (finish / steps);
    if (n == 1024) state.counters["s_vs_0.5s"] = seconds / 0.5;
    if (n == 4096) state.counters["s_vs_5s"] = seconds / 5.0;
  }
}

void ring_allreduce_exponent(benchmark::State& state, const RingScaling& scaling) {
  for (auto _ : state) {
    // Least squares of log(ns_per_flow) against log(N), over the sizes from `from` GPUs on.
    const auto fit = [&](int from, double& sizes) {
      double sx = 0, sy = 0, sxx = 0, sxy = 0, k = 0;
      for (const auto& [n, ns] : scaling.ns_per_flow) {
        if (n < from) continue;
        const double x = std::log(n), y = std::log(ns);
        sx += x, sy += y, sxx += x * x, sxy += x * y, k += 1;
      }
      sizes = k;
      return k >= 2 ? (k * sxy - sx * sy) / (k * sxx - sx * sx) : NAN;
    };
    double k = 0, large_sizes = 0;
    const double e = fit(0, k);
    state.SetIterationTime(1e-9);
    // Where the growth is: the sizes whose working set no longer stays cached (1024 GPUs on),
    // and the ratio the README quotes.
    state.counters["large_exponent"] = fit(1024, large_sizes);
    const auto& m = scaling.ns_per_flow;
    if (m.count(1024) && m.count(4096)) state.counters["4096_over_1024"] = m.at(4096) / m.at(1024);
    state.counters["sizes"] = k;
    state.counters["min_gpus"] = scaling.ns_per_flow.empty() ? 0 : scaling.ns_per_flow.begin()->first;
    state.counters["max_gpus"] = scaling.ns_per_flow.empty() ? 0 : scaling.ns_per_flow.rbegin()->first;
    state.counters["per_flow_exponent"] = e;
    state.counters["whole_ring_exponent"] = 2 + e;
  }
}

// ---------------------------------------------------------------------------------------------
// Rollback cost on dense traffic.

struct DenseTraffic {
  std::unique_ptr<Engine> engine;
  std::vector<Time> starts;  // sorted
  std::mt19937_64 rng{42};
  int gpus = 0;
  double forward_s = 0;  // CPU seconds of simulating the traffic the first time (in order)

  explicit DenseTraffic(int events) {
    const simcore::ClusterSpec c = cluster_of_gpus(64);
    gpus = c.total_gpus();
    EngineOptions o;
    o.record_timeline = false;
    engine = simcore::make_engine(c, o);
    const double t0 = cpu_now();
    for (int i = 0; i < events; ++i) engine->add_flow(random_flow(i * 0.5e-6));
    for (EventId id = 1; id <= static_cast<EventId>(events); ++id)
      starts.push_back(engine->query(id)->start);
    forward_s = cpu_now() - t0;
    std::sort(starts.begin(), starts.end());
  }
  FlowSpec random_flow(Time not_before) {
    FlowSpec f;
    f.bytes = 1 << 20;
    f.not_before = not_before;
    f.src_gpu = static_cast<int>(rng() % gpus);
    f.dst_gpu = static_cast<int>(rng() % gpus);
    return f;
  }
  struct Late {
    double seconds = 0;       // mean CPU seconds of one late flow
    double replayed = 0;      // mean events re-simulated
    double solves = 0;        // mean max-min fillings run
    double solved_flows = 0;  // mean flows given a rate by them
    double dropped = 0;       // mean stale queue items dropped in bulk
  };
  // One late flow `depth` starts back (0: after all), averaged over reps.
  Late late_flow(int depth, int reps) {
    double total = 0;
    uint64_t replayed = 0, solves = 0, solved = 0, dropped = 0;
    for (int r = 0; r < reps; ++r) {
      FlowSpec f = random_flow(0);
      f.not_before = depth == 0 ? starts.back() + 1.0 + r : starts[starts.size() - 1 - depth];
      const auto before = engine->stats();
      const double t = cpu_now();
      const EventId id = engine->add_flow(f);
      engine->query(id);
      total += cpu_now() - t;
      const auto after = engine->stats();
      replayed += after.replayed_events - before.replayed_events;
      solves += after.solves - before.solves;
      solved += after.solved_flows - before.solved_flows;
      dropped += after.stale_items_dropped - before.stale_items_dropped;
    }
    const double n = reps;
    return {total / n, static_cast<double>(replayed) / n, static_cast<double>(solves) / n,
            static_cast<double>(solved) / n, static_cast<double>(dropped) / n};
  }
};

void rollback(benchmark::State& state, bool quick) {
  const int depth = static_cast<int>(state.range(0));
  DenseTraffic traffic(quick ? 2000 : 20000);
  for (auto _ : state) {
    const double append_s = traffic.late_flow(0, 50).seconds;
    const DenseTraffic::Late late = traffic.late_flow(depth, depth >= 1000 ? 10 : 30);
    const double late_s = late.seconds, replayed = late.replayed;
    state.SetIterationTime(late_s);
    state.counters["forward_us_per_flow"] = 1e6 * traffic.forward_s / traffic.starts.size();
    state.counters["solves"] = late.solves;
    state.counters["solved_flows"] = late.solved_flows;
    state.counters["stale_dropped"] = late.dropped;
    state.counters["us_per_rollback"] = 1e6 * late_s;
    state.counters["us_vs_100us"] = 1e6 * late_s / 100.0;  // the target: below 1
    state.counters["us_per_append"] = 1e6 * append_s;
    state.counters["ratio"] = late_s / append_s;
    state.counters["re_simulated"] = replayed;
    state.counters["us_back"] =
        1e6 * (traffic.starts.back() - traffic.starts[traffic.starts.size() - 1 - depth]);
  }
}

// ---------------------------------------------------------------------------------------------
// History memory with and without floors: 16 ranks on 16 GPUs (2 nodes) submit flows in
// round-robin; rank r's k-th flow starts at k * 4.5 us plus up to 4 us of jitter, sometimes after
// another rank's last flow; every rank promises the start of its next flow after each submission
// and queries every 64th flow.

struct MemoryResult {
  Engine::Stats stats;
  uint64_t peak_live = 0;
  uint64_t peak_history = 0;
};

MemoryResult history_run(int flows, bool ranks) {
  constexpr int kRanks = 16;
  const simcore::ClusterSpec c = cluster_of_gpus(16);
  EngineOptions o;
  o.record_timeline = false;
  auto engine = simcore::make_engine(c, o);
  if (ranks)
    for (int r = 0; r < kRanks; ++r) engine->register_rank(r);
  std::mt19937_64 rng(7);
  auto start_of = [&](int k) { return k * 4.5e-6 + 1e-6 * static_cast<double>(rng() % 5); };
  std::vector<double> next(kRanks);
  for (int r = 0; r < kRanks; ++r) next[r] = start_of(0);
  std::vector<EventId> last(kRanks, simcore::kNoEvent);
  MemoryResult m;
  for (int i = 0; i < flows; ++i) {
    const int r = i % kRanks;
    const int k = i / kRanks;
    FlowSpec f;
    f.src_gpu = r;
    f.dst_gpu = static_cast<int>(rng() % kRanks);
    f.bytes = 128 << 10;
    f.not_before = next[r];
    const EventId other = last[rng() % kRanks];
    if (other != simcore::kNoEvent && rng() % 4 == 0) f.after = {other};
    last[r] = engine->add_flow(f);
    next[r] = start_of(k + 1);
    if (ranks) engine->set_rank_floor(r, next[r]);
    if (i % 64 == 63) engine->query(last[r]);
    if (i % 65536 == 65535) {
      const auto s = engine->stats();
      m.peak_live = std::max(m.peak_live, s.events_live);
      m.peak_history = std::max(m.peak_history, s.history_bytes);
    }
  }
  engine->query(last[0]);
  m.stats = engine->stats();
  m.peak_live = std::max(m.peak_live, m.stats.events_live);
  m.peak_history = std::max(m.peak_history, m.stats.history_bytes);
  return m;
}

void memory(benchmark::State& state, bool quick) {
  const int flows = static_cast<int>(state.range(0));
  const int base_flows = quick ? 50000 : 1000000;
  for (auto _ : state) {
    const double t0 = cpu_now();
    const MemoryResult floors = history_run(flows, true);
    state.SetIterationTime(cpu_now() - t0);
    const MemoryResult none = history_run(std::min(flows, base_flows), false);
    state.counters["peak_live_events"] = static_cast<double>(floors.peak_live);
    state.counters["peak_history_bytes"] = static_cast<double>(floors.peak_history);
    state.counters["history_bytes"] = static_cast<double>(floors.stats.history_bytes);
    state.counters["result_B/flow"] = static_cast<double>(floors.stats.result_bytes) / flows;
    state.counters["no_floor_bytes"] = static_cast<double>(none.stats.history_bytes);
    state.counters["ratio"] = static_cast<double>(floors.peak_history) /
                              static_cast<double>(none.stats.history_bytes);
  }
}

// ---------------------------------------------------------------------------------------------
// vgpu-netsim end to end.

#ifdef VGPU_NETSIM_PATH
struct ChildRun {
  double cpu_s = 0, wall_s = 0, max_rss_bytes = 0;
  int status = -1;
  std::string err;
};

// Runs vgpu-netsim on `trace` (or, with from_stdin, on its standard input) for a cluster of
// `nodes` default nodes, output discarded.
// `option`: one more vgpu-netsim option (e.g. "--one-by-one"), or none.
ChildRun run_netsim(const std::string& trace, int nodes, bool from_stdin, const char* option = nullptr) {
  const std::string err_path = trace + ".err";
  ChildRun r;
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open("/dev/null", O_WRONLY);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    if (from_stdin) dup2(open(trace.c_str(), O_RDONLY), 0);
    for (const char* v : {"VGPU_CONFIG", "VGPU_GPUS_PER_NODE", "VGPU_DEVICE_COUNT", "VGPU_GPU_MODEL"})
      unsetenv(v);
    setenv("VGPU_NODES", std::to_string(nodes).c_str(), 1);
    const char* input = from_stdin ? "-" : trace.c_str();
    if (option) execl(VGPU_NETSIM_PATH, VGPU_NETSIM_PATH, "--stats", option, input, nullptr);
    else execl(VGPU_NETSIM_PATH, VGPU_NETSIM_PATH, "--stats", input, nullptr);
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.cpu_s = ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec + ru.ru_stime.tv_sec + 1e-6 * ru.ru_stime.tv_usec;
  r.wall_s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  r.max_rss_bytes = 1024.0 * static_cast<double>(ru.ru_maxrss);
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  // ru_maxrss of a forked child includes this process's resident set at the fork (the pages it
  // held until exec): vgpu-netsim --stats reports its own peak, which is what is wanted.
  const size_t at = r.err.find("peak resident set: ");
  if (at != std::string::npos) r.max_rss_bytes = std::atof(r.err.c_str() + at + 19);
  return r;
}

double stat_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  return at == std::string::npos ? NAN : std::atof(text.c_str() + at + key.size());
}

void netsim_ring(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int steps = 2 * (n - 1);
  const uint64_t chunk = kGiB / static_cast<uint64_t>(n);
  char path[] = "/tmp/simcore_bench_ring_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    state.SkipWithError("cannot create a temporary trace");
    return;
  }
  {
    FILE* f = fdopen(fd, "w");
    char line[256];
    for (int s = 0; s < steps; ++s) {
      for (int i = 0; i < n; ++i) {
        int len;
        if (s == 0)
          len = std::snprintf(line, sizeof line, "{\"id\":\"s%d_g%d\",\"src\":%d,\"dst\":%d,\"bytes\":%llu}\n",
                              s, i, i, (i + 1) % n, static_cast<unsigned long long>(chunk));
        else
          len = std::snprintf(line, sizeof line,
                              "{\"id\":\"s%d_g%d\",\"src\":%d,\"dst\":%d,\"bytes\":%llu,\"after\":[\"s%d_g%d\",\"s%d_g%d\"]}\n",
                              s, i, i, (i + 1) % n, static_cast<unsigned long long>(chunk), s - 1,
                              (i + n - 1) % n, s - 1, i);
        std::fwrite(line, 1, static_cast<size_t>(len), f);
      }
    }
    std::fclose(f);
  }
  const std::string bin_path = std::string(path) + ".bin";
  {
    std::ofstream bin(bin_path, std::ios::binary);
    bin.write(simcore::netsim::kBinaryMagic, sizeof simcore::netsim::kBinaryMagic);
    simcore::netsim::TraceLine e;
    e.bytes = chunk;
    for (int s = 0; s < steps; ++s) {
      for (int i = 0; i < n; ++i) {
        e.src = i;
        e.dst = (i + 1) % n;
        e.after.clear();
        if (s > 0) e.after = {static_cast<size_t>((s - 1) * n + (i + n - 1) % n), static_cast<size_t>((s - 1) * n + i)};
        simcore::netsim::write_binary_event(bin, e);
      }
    }
  }
  const double flows = static_cast<double>(steps) * n;
  for (auto _ : state) {
    const ChildRun file = run_netsim(path, std::max(1, n / 8), false);
    const ChildRun piped = run_netsim(path, std::max(1, n / 8), true);
    const ChildRun bin = run_netsim(bin_path, std::max(1, n / 8), false);
    const ChildRun bin_alone = run_netsim(bin_path, std::max(1, n / 8), false, "--one-by-one");
    if (file.status != 0 || piped.status != 0 || bin.status != 0 || bin_alone.status != 0) {
      state.SkipWithError(("vgpu-netsim failed: " + file.err + piped.err + bin.err + bin_alone.err).c_str());
      break;
    }
    state.SetIterationTime(file.cpu_s);
    state.counters["flows"] = flows;
    state.counters["cpu_s"] = file.cpu_s;
    state.counters["wall_s"] = file.wall_s;
    state.counters["bin_cpu_s"] = bin.cpu_s;
    state.counters["bin_rss_B/flow"] = bin.max_rss_bytes / flows;
    state.counters["s_vs_1s"] = bin.cpu_s;
    // The same replay with each line submitted alone (no flow groups), in the same run.
    state.counters["bin_one_by_one_cpu_s"] = bin_alone.cpu_s;
    state.counters["bin_ratio_one_by_one"] = bin_alone.cpu_s / bin.cpu_s;
    state.counters["rss_B/flow"] = file.max_rss_bytes / flows;
    state.counters["counted_B/flow"] = stat_after(file.err, "memory per event: ");
    state.counters["stdin_cpu_s"] = piped.cpu_s;
    state.counters["stdin_rss_B/flow"] = piped.max_rss_bytes / flows;
    state.counters["rss_ratio"] = file.max_rss_bytes / piped.max_rss_bytes;
  }
  std::remove(path);
  std::remove(bin_path.c_str());
}
#endif

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else args.push_back(argv[i]);
  }
  int count = static_cast<int>(args.size());
  RingScaling scaling;

  auto once = [](benchmark::internal::Benchmark* b) {
    b->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  once(benchmark::RegisterBenchmark("ring_vs_full_resolve/aligned", ring_vs_full_resolve, quick, 0.0, false, false));
  once(benchmark::RegisterBenchmark("ring_vs_full_resolve/spread", ring_vs_full_resolve, quick, 20e-6, false, false));
  once(benchmark::RegisterBenchmark("ring_vs_full_resolve/aligned_whole", ring_vs_full_resolve, quick, 0.0, true, false));
  once(benchmark::RegisterBenchmark("ring_vs_full_resolve/aligned_whole_own_process", ring_vs_full_resolve, quick, 0.0,
                                    true, true));
  once(benchmark::RegisterBenchmark("ring_vs_full_resolve/spread_whole", ring_vs_full_resolve, quick, 20e-6, true, false));
  auto* ring = benchmark::RegisterBenchmark("ring_allreduce", [&scaling](benchmark::State& s) {
    ring_allreduce(s, &scaling, RingRun{});
  });
  ring->ArgName("gpus");
  for (int n : quick ? std::vector<int>{64, 128} : std::vector<int>{128, 256, 512, 1024, 2048, 4096})
    ring->Arg(n);
  once(ring);
  auto* ring_single = benchmark::RegisterBenchmark("ring_allreduce_one_by_one", [](benchmark::State& s) {
    ring_allreduce(s, nullptr, RingRun{.grouped = false});
  });
  ring_single->ArgName("gpus")->Arg(quick ? 128 : 1024);
  once(ring_single);
  auto* ring_released = benchmark::RegisterBenchmark("ring_allreduce_released", [&scaling](benchmark::State& s) {
    ring_allreduce(s, &scaling, RingRun{.release = true});
  });
  ring_released->ArgName("gpus");
  for (int n : quick ? std::vector<int>{128} : std::vector<int>{1024, 4096}) ring_released->Arg(n);
  once(ring_released);
  auto* ring_in_process = benchmark::RegisterBenchmark("ring_allreduce_in_process", [&scaling](benchmark::State& s) {
    ring_allreduce(s, &scaling, RingRun{.own_process = false});
  });
  ring_in_process->ArgName("gpus")->Arg(quick ? 128 : 4096);
  once(ring_in_process);
  once(benchmark::RegisterBenchmark("ring_allreduce_exponent", [&scaling](benchmark::State& s) {
    ring_allreduce_exponent(s, scaling);
  }));
  auto* rb = benchmark::RegisterBenchmark("rollback", rollback, quick);
  rb->ArgName("depth")->Arg(1)->Arg(10)->Arg(100);
  if (!quick) rb->Arg(1000);
  once(rb);
  auto* mem = benchmark::RegisterBenchmark("memory", memory, quick);
  mem->ArgName("flows");
  if (quick) mem->Arg(50000);
  else mem->Arg(1000000)->Arg(10000000);
  once(mem);
#ifdef VGPU_NETSIM_PATH
  auto* ns = benchmark::RegisterBenchmark("netsim_ring", netsim_ring);
  ns->ArgName("gpus")->Arg(quick ? 64 : 1024);
  once(ns);
#endif

  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
