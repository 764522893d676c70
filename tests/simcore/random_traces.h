// Random small workloads for the rollback property tests: flows and tasks with random sizes,
// not_before times and dependencies, and a rank for each event so that rank-ordered submission
// can keep its floor promises.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "simcore/engine.h"

namespace simcore::testing {

struct TraceEvent {
  bool is_flow = true;
  int src = 0, dst = 0;  // a task runs on src
  uint64_t bytes = 0;
  Time duration = 0;
  Time not_before = 0;
  std::vector<int> after;  // indices of earlier events
  int rank = 0;            // per rank, not_before never decreases with the index
};

struct Trace {
  std::vector<TraceEvent> events;
  int ranks = 1;
};

// Times and sizes sit on coarse grids, so that many events start and end at the same instant
// (ties are where ordering bugs hide).
inline Trace random_trace(std::mt19937_64& rng, int gpus, int events, int ranks) {
  Trace t;
  t.ranks = ranks;
  std::vector<Time> clock(ranks, 0.0);
  std::uniform_int_distribution<int> gpu(0, gpus - 1), rank(0, ranks - 1), pct(0, 99);
  for (int i = 0; i < events; ++i) {
    TraceEvent e;
    e.rank = rank(rng);
    e.is_flow = pct(rng) < 80;
    e.src = gpu(rng);
    e.dst = pct(rng) < 10 ? e.src : gpu(rng);
    const int size_class = pct(rng);
    e.bytes = size_class < 8 ? 0 : (uint64_t(1) << 16) * (1 + rng() % 64);
    e.duration = 1e-6 * static_cast<double>(rng() % 50);
    clock[e.rank] += 1e-6 * static_cast<double>(rng() % 40);
    e.not_before = clock[e.rank];
    const int deps = i == 0 ? 0 : static_cast<int>(rng() % 3);
    for (int d = 0; d < deps; ++d) {
      const int j = static_cast<int>(rng() % i);
      if (std::find(e.after.begin(), e.after.end(), j) == e.after.end()) e.after.push_back(j);
    }
    t.events.push_back(std::move(e));
  }
  return t;
}

// Submits event `i` with its dependencies mapped to engine ids (which must all exist).
inline EventId submit(Engine& engine, const TraceEvent& e, const std::vector<EventId>& ids) {
  std::vector<EventId> after;
  for (int j : e.after) after.push_back(ids[j]);
  if (e.is_flow) {
    FlowSpec f;
    f.src_gpu = e.src;
    f.dst_gpu = e.dst;
    f.bytes = e.bytes;
    f.not_before = e.not_before;
    f.after = std::move(after);
    return engine.add_flow(f);
  }
  TaskSpec t;
  t.gpu = e.src;
  t.duration = e.duration;
  t.not_before = e.not_before;
  t.after = std::move(after);
  return engine.add_task(t);
}

inline bool same_time(Time a, Time b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)) + 1e-15;
}

}  // namespace simcore::testing
