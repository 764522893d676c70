// simcore benchmarks, each printed as a table with a ratio against a baseline measured in the
// same run:
//   ring      flow completions per second of a ring all-reduce over 1024 GPUs (128 nodes x 8,
//             leaf-spine) with the incremental solver, against a full re-solve of every flow in
//             flight at every change (the same solver in SolverMode::full_resolve);
//   rollback  the cost of one submission landing d events in the virtual past, against one
//             that lands after everything simulated (no rollback);
//   memory    history held after 10^6 flows from 16 ranks whose floors advance, against the
//             same submissions with no ranks (nothing can be reclaimed).
//
//   simcore-bench [ring|rollback|memory ...] [--quick]
// With no names, all three run. --quick shrinks every workload (a smoke test). Times are CPU
// seconds of this process.
#include <malloc.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "simcore/cluster_config.h"
#include "simcore/engine.h"

namespace {

using simcore::Engine;
using simcore::EngineOptions;
using simcore::EventId;
using simcore::FlowSpec;
using simcore::SolverMode;
using simcore::Time;
// CPU time of the process, not wall time: the figures should not depend on what else the
// machine runs (every benchmark here is single-threaded).
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
};

double seconds_since(double t0) { return Clock::now() - t0; }

simcore::ClusterSpec cluster(int nodes) {
  simcore::ClusterSpec c = simcore::default_cluster();
  c.nodes = nodes;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Ring all-reduce: 2(N-1) steps; in step s GPU i sends one chunk to GPU i+1 once it received
// the previous step's chunk from GPU i-1 and finished its own previous send.
struct RingResult {
  uint64_t flows = 0;
  double seconds = 0;
  double finish = 0;
  simcore::Engine::Stats stats;
};

// jitter > 0: each GPU's first send starts at a random time in [0, jitter) (ranks never start
// a collective at the same instant), which keeps changes from coinciding across nodes.
RingResult ring_allreduce(SolverMode mode, int nodes, int steps, uint64_t buffer_bytes,
                          double jitter) {
  EngineOptions o;
  o.solver = mode;
  o.record_timeline = false;
  const simcore::ClusterSpec c = cluster(nodes);
  auto engine = simcore::make_engine(c, o);
  const int n = c.total_gpus();
  const uint64_t chunk = buffer_bytes / static_cast<uint64_t>(n);
  const auto t0 = Clock::now();
  std::mt19937_64 rng(1);
  std::vector<EventId> prev(n, simcore::kNoEvent), cur(n);
  EventId last = simcore::kNoEvent;
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < n; ++i) {
      FlowSpec f;
      f.src_gpu = i;
      f.dst_gpu = (i + 1) % n;
      f.bytes = chunk;
      if (s == 0 && jitter > 0) f.not_before = jitter * static_cast<double>(rng() % 1000000) / 1e6;
      if (s > 0) f.after = {prev[(i + n - 1) % n], prev[i]};
      cur[i] = last = engine->add_flow(f);
    }
    std::swap(prev, cur);
  }
  RingResult r;
  r.finish = engine->query(last)->finish;  // simulates everything
  r.seconds = seconds_since(t0);
  r.flows = static_cast<uint64_t>(steps) * static_cast<uint64_t>(n);
  r.stats = engine->stats();
  return r;
}

void bench_ring(bool quick) {
  const int nodes = quick ? 16 : 128;
  const int n = nodes * 8;
  const int full_steps = 2 * (n - 1);
  const int baseline_steps = quick ? 16 : 64;
  const uint64_t buffer = uint64_t(1) << 30;
  std::printf("\n== ring all-reduce, %d GPUs (%d nodes x 8, leaf-spine, 32 nodes/leaf), %.0f MiB "
              "per GPU, %llu B chunks, %d steps in all\n", n, nodes, buffer / 1048576.0,
              static_cast<unsigned long long>(buffer / static_cast<uint64_t>(n)), full_steps);
  std::printf("%-44s %6s %9s %9s %12s %11s %8s\n", "solver", "steps", "flows", "CPU s",
              "flows/s", "solved/flow", "ratio");
  auto row = [](const std::string& name, int steps, const RingResult& r, double base_rate) {
    const double rate = r.flows / r.seconds;
    std::printf("%-44s %6d %9llu %9.3f %12.0f %11.1f %8.2f\n", name.c_str(), steps,
                static_cast<unsigned long long>(r.flows), r.seconds, rate,
                static_cast<double>(r.stats.solved_flows) / r.flows, rate / base_rate);
  };
  for (double jitter : {0.0, 20e-6}) {
    const std::string starts = jitter > 0 ? "starts within 20 us" : "aligned starts";
    const RingResult base = ring_allreduce(SolverMode::full_resolve, nodes, baseline_steps, buffer, jitter);
    const double base_rate = base.flows / base.seconds;
    row("full re-solve (baseline), " + starts, baseline_steps, base, base_rate);
    const RingResult inc = ring_allreduce(SolverMode::incremental, nodes, baseline_steps, buffer, jitter);
    row("incremental, " + starts, baseline_steps, inc, base_rate);
    const RingResult all = ring_allreduce(SolverMode::incremental, nodes, full_steps, buffer, jitter);
    row("incremental, " + starts + ", whole", full_steps, all, base_rate);
    std::printf("   same prefix answer: last finish %.9f s (full) vs %.9f s (incremental); the "
                "whole all-reduce takes %.6f s of virtual time\n", base.finish, inc.finish, all.finish);
  }
}

// ---------------------------------------------------------------------------------------------
// Rollback cost: a workload is simulated, then single flows arrive whose start lies d events
// (in start order) before the last start, as a slow rank's would. Their cost is the causal cone
// they re-simulate; the baseline is a flow arriving after everything (nothing to rewind).
//   dense:  1 MiB flows between random GPUs of 8 nodes x 8, one every 0.5 us: the NICs are
//           half loaded and nearly all flows in flight share links transitively, so a late
//           flow's cone is almost everything after it (the worst case).
//   sparse: 32 GPU pairs inside the nodes, each a chain of 1 MiB NVLink transfers back to
//           back (each after the previous one): a late flow delays the rest of its own pair's
//           chain, and nothing else.
struct Workload {
  const char* name;
  int events;
  bool dense;
};

void bench_rollback_on(const Workload& w, bool quick) {
  const simcore::ClusterSpec c = cluster(8);
  EngineOptions o;
  o.record_timeline = false;
  auto engine = simcore::make_engine(c, o);
  std::mt19937_64 rng(42);
  const int gpus = c.total_gpus();
  const double gap = 0.5e-6;
  const int events = quick ? w.events / 20 : w.events;
  auto random_flow = [&](Time not_before) {
    FlowSpec f;
    f.bytes = 1 << 20;
    f.not_before = w.dense ? not_before : 0;
    if (w.dense) {
      f.src_gpu = static_cast<int>(rng() % gpus);
      f.dst_gpu = static_cast<int>(rng() % gpus);
    } else {
      const int pair = static_cast<int>(rng() % (gpus / 2));
      f.src_gpu = 2 * pair;
      f.dst_gpu = 2 * pair + 1;
    }
    return f;
  };
  std::vector<EventId> chain(gpus / 2, simcore::kNoEvent);
  const double t0 = Clock::now();
  for (int i = 0; i < events; ++i) {
    FlowSpec f = random_flow(i * gap);
    if (!w.dense) {
      f.src_gpu = 2 * (i % (gpus / 2));  // the pairs take turns
      f.dst_gpu = f.src_gpu + 1;
      EventId& prev = chain[f.src_gpu / 2];
      if (prev != simcore::kNoEvent) f.after = {prev};
      prev = engine->add_flow(f);
    } else {
      engine->add_flow(f);
    }
  }
  engine->query(1);
  const double forward = seconds_since(t0);
  std::vector<Time> starts;
  for (EventId id = 1; id <= static_cast<EventId>(events); ++id) starts.push_back(engine->query(id)->start);
  std::sort(starts.begin(), starts.end());
  std::printf("\n-- %s: %d flows simulated forward in %.3f CPU s (%.2f us per flow)\n", w.name,
              events, forward, 1e6 * forward / events);
  std::printf("%-12s %12s %14s %14s %16s %10s\n", "depth d", "us back", "re-simulated",
              "us/rollback", "us/re-simulated", "ratio");
  auto measure = [&](int depth, int reps) {
    double total = 0;
    uint64_t replayed = 0;
    for (int r = 0; r < reps; ++r) {
      FlowSpec f = random_flow(0);
      // Appends go one second apart, after everything.
      f.not_before = depth == 0 ? starts.back() + 1.0 + r : starts[starts.size() - 1 - depth];
      const auto before = engine->stats().replayed_events;
      const double t = Clock::now();
      const EventId id = engine->add_flow(f);
      engine->query(id);
      total += seconds_since(t);
      replayed += engine->stats().replayed_events - before;
    }
    return std::make_pair(total / reps, static_cast<double>(replayed) / reps);
  };
  const auto [base_cost, base_replayed] = measure(0, 50);
  std::printf("%-12s %12s %14.0f %14.2f %16s %10.2f\n", "0 (append)", "-", base_replayed,
              base_cost * 1e6, "-", 1.0);
  for (int depth : {1, 10, 100, 1000, 10000, 100000}) {
    if (depth >= events) break;
    const int reps = depth >= 10000 ? 3 : depth >= 1000 ? 10 : 30;
    const auto [cost, replayed] = measure(depth, reps);
    std::printf("%-12d %12.1f %14.0f %14.2f %16.2f %10.1f\n", depth,
                (starts.back() - starts[starts.size() - 1 - depth]) * 1e6, replayed,
                cost * 1e6, replayed > 0 ? cost * 1e6 / replayed : 0.0, cost / base_cost);
  }
}

void bench_rollback(bool quick) {
  std::printf("\n== rollback cost: one flow arriving d events (in start order) before the last "
              "start, 64 GPUs\n");
  bench_rollback_on(Workload{"dense (random GPU pairs, one big component)", 20000, true}, quick);
  bench_rollback_on(Workload{"sparse (32 independent chains on NVLink)", 200000, false}, quick);
}

// ---------------------------------------------------------------------------------------------
// History memory: 16 ranks on 16 GPUs (2 nodes) submit 10^6 flows in round-robin. Rank r's
// k-th flow starts at k * 4.5 us plus up to 4 us of jitter (ranks that keep in step, as
// collectives make them), sometimes after another rank's last flow; every rank promises the
// start of its next flow after each submission and queries every 64th flow.
struct MemoryResult {
  double seconds = 0;
  Engine::Stats stats;
  uint64_t peak_live = 0;
  double heap_bytes = 0;  // malloc'd bytes held by the engine at the end (mallinfo2)
};

double heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd);  // small chunks + mmapped big ones
}

MemoryResult history_run(int flows, bool ranks) {
  constexpr int kRanks = 16;
  const simcore::ClusterSpec c = cluster(2);
  EngineOptions o;
  o.record_timeline = false;
  const double heap_before = heap_in_use();
  auto engine = simcore::make_engine(c, o);
  if (ranks)
    for (int r = 0; r < kRanks; ++r) engine->register_rank(r);
  std::mt19937_64 rng(7);
  auto start_of = [&](int k) { return k * 4.5e-6 + 1e-6 * static_cast<double>(rng() % 5); };
  std::vector<double> next(kRanks);
  for (int r = 0; r < kRanks; ++r) next[r] = start_of(0);
  std::vector<EventId> last(kRanks, simcore::kNoEvent);
  MemoryResult m;
  const auto t0 = Clock::now();
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
    if (i % 65536 == 0) m.peak_live = std::max(m.peak_live, engine->stats().events_live);
  }
  engine->query(last[0]);
  m.seconds = seconds_since(t0);
  m.stats = engine->stats();
  m.peak_live = std::max(m.peak_live, m.stats.events_live);
  m.heap_bytes = heap_in_use() - heap_before;
  return m;
}

void bench_memory(bool quick) {
  const int flows = quick ? 50000 : 1000000;
  std::printf("\n== history memory after %d flows (16 ranks on 2 nodes x 8 GPUs)\n", flows);
  std::printf("%-26s %8s %12s %10s %14s %8s %14s %14s\n", "", "CPU s", "live events",
              "segments", "history bytes", "ratio", "result bytes", "heap in use");
  auto row = [](const char* name, const MemoryResult& m, double base) {
    std::printf("%-26s %8.2f %12llu %10llu %14llu %8.5f %14llu %14.0f\n", name, m.seconds,
                static_cast<unsigned long long>(m.stats.events_live),
                static_cast<unsigned long long>(m.stats.flow_segments),
                static_cast<unsigned long long>(m.stats.history_bytes),
                m.stats.history_bytes / base,
                static_cast<unsigned long long>(m.stats.result_bytes), m.heap_bytes);
  };
  const MemoryResult floors = history_run(flows, true);
  const MemoryResult none = history_run(flows, false);
  row("no ranks (baseline)", none, static_cast<double>(none.stats.history_bytes));
  row("16 ranks, advancing floors", floors, static_cast<double>(none.stats.history_bytes));
  std::printf("with floors: at most %llu events live at once (sampled); floor reached %.6f s. "
              "History bytes: the engine's own count of what floors reclaim; result bytes: the 20 "
              "bytes per event kept for query(); heap in use: malloc's count, both together.\n",
              static_cast<unsigned long long>(floors.peak_live), floors.stats.floor);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "ring" || a == "rollback" || a == "memory") names.push_back(a);
    else {
      std::fprintf(stderr, "usage: simcore-bench [ring|rollback|memory ...] [--quick]\n");
      return 2;
    }
  }
  if (names.empty()) names = {"ring", "rollback", "memory"};
  for (const std::string& n : names) {
    const auto t0 = Clock::now();
    if (n == "ring") bench_ring(quick);
    if (n == "rollback") bench_rollback(quick);
    if (n == "memory") bench_memory(quick);
    std::printf("(%s: %.1f s)\n", n.c_str(), seconds_since(t0));
  }
  return 0;
}
