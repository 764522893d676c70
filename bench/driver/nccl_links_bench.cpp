// What placing a collective's transfers on the fabric (vgpu/sim/exec/nccl_link_share.h) costs the
// engine, against a baseline in the same run: DDP's 25 MiB all-reduces over 64 GPUs (8 nodes of 8,
// one after another, as a step's buckets), submitted as the sim backend does (per rank an arrival,
// a kernel after every arrival, an end op after every kernel), without and then with the latency
// task and the ring's flows. Two shapes: one process driving all 64 ranks (64 flows a
// collective), and a process of one rank (torchrun: the flows into and out of its GPU, and an end
// op). Both rows must end
// at the same virtual time (the collective alone keeps the model's time; checked, exit 1 if
// not). Prints microseconds of wall time per collective, the events, and the ratio.
// Then the rows of a process that also places its ranks' flows in the job's vgpud (a daemon
// started for each row, over its Unix socket) and reads their finish there, its end waiting for a
// task at that time (nccl_shared_fabric.h), for a process of 1 rank and one of 8: "query" reads it
// as sim26 did (an add_flows, then a Query per own flow: 1 + ranks round trips a collective, and
// vgpud keeps everything), "share" as sim30 does (one ShareCollectives a collective: the flows
// placed, the answer read, the ids released and the process's floor moved in one request, and
// vgpud reclaims; here the process holds the communicator's only covering rank, so vgpud answers
// at once: the request's own cost, not the wait for other processes). Each alternated twice, the
// better of two; ratio against the same process's row without flows, and what vgpud keeps at the
// end (live events, result bytes).
//
//   build/bench/driver/nccl_links_bench [collectives]      (default 2000; --quick: 200)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <algorithm>
#include <string>
#include <vector>

#include <unistd.h>

#include "sim/exec/nccl_link_share.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"
#include "simcore/remote_engine.h"

using namespace simcore;

namespace {

struct Row {
  double us_per_collective = 0;
  double end = 0;
  uint64_t events = 0;
  Engine::Stats kept;  // the shared engine's, at the end
};

// How the shared rows read their answers.
enum class Read { query, share };
constexpr int kBenchRank = (1 << 20) + 0;

// `collectives` all-reduces of which this process drives ranks 0 .. local-1 of 64.
Row run(const ClusterSpec& cluster, int collectives, int local, bool with_flows, Engine* shared = nullptr,
        Read read = Read::query) {
  EngineOptions o;
  o.record_timeline = false;
  auto engine = make_engine(cluster, o);
  vgpu::NcclLinkShare links(cluster);
  const int n = 64;
  CollectiveCall call;
  call.op = CollectiveOp::all_reduce;
  call.bytes = 25u << 20;
  for (int i = 0; i < n; ++i) call.gpus.push_back(i);
  const double seconds = estimate_collective(cluster, call).seconds;
  const std::vector<CollectiveCall> calls{call};
  // Its ranks' ring transfers, and the one into its first rank's GPU (a process of one rank
  // places both of its GPU's: nccl_collectives.cpp).
  std::vector<int> ranks;
  for (int i = 0; i < local; ++i) ranks.push_back(i);
  if (local < n) ranks.push_back(n - 1);
  std::vector<EventId> last(local, kNoEvent);
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < collectives; ++c) {
    std::vector<EventId> arrivals(local), kernels(local);
    for (int r = 0; r < local; ++r) {
      TaskSpec a;
      a.gpu = r;
      if (last[r] != kNoEvent) a.after = {last[r]};
      arrivals[r] = engine->add_task(a);
    }
    for (int r = 0; r < local; ++r) {
      TaskSpec k;
      k.gpu = r;
      k.duration = seconds;
      k.after = arrivals;
      kernels[r] = engine->add_task(k);
    }
    std::vector<EventId> after(kernels);
    if (with_flows) {
      vgpu::NcclLinkShare::Start s;
      s.after.assign(arrivals.begin(), arrivals.end());
      const std::vector<uint64_t> flows = links.place(*engine, calls, ranks, s);
      after.insert(after.end(), flows.begin(), flows.end());
      if (shared != nullptr) {
        // As nccl_collectives.cpp: the rank's own flow there from the collective's start (here
        // the c-th model time: the collectives run back to back), its finish as a local task.
        const std::vector<int> own(ranks.begin(), ranks.begin() + local);
        std::vector<FlowSpec> flows = links.shared_flows(calls, own, c * seconds);
        std::optional<double> finish;
        if (flows.empty()) {
        } else if (read == Read::query) {
          std::vector<EventId> ids(flows.size(), kNoEvent);
          shared->add_flows(flows, ids);
          for (EventId id : ids)
            if (const auto at = shared->query(id)) finish = std::max(finish.value_or(0), at->finish);
        } else {
          // Nothing this process places later starts before this collective's start. The key
          // covered by this process alone (one rank of a one-rank key): answered at once.
          const SharedCollective one{1, static_cast<uint64_t>(c), 1, {0}, std::move(flows)};
          finish = share_collectives(*shared, {&one, 1}, kBenchRank, c * seconds, nullptr).front().finish;
        }
        if (finish) {
          TaskSpec t;
          t.gpu = 0;
          t.not_before = *finish;
          t.after = arrivals;
          after.push_back(engine->add_task(t));
        }
      }
    } else if (local == 1) {
      last[0] = kernels[0];  // a process of one GPU had no end op
      continue;
    }
    for (int r = 0; r < local; ++r) {
      TaskSpec e;
      e.gpu = r;
      e.after = after;
      last[r] = engine->add_task(e);
    }
  }
  Row row;
  row.end = engine->query(last[0])->finish;  // simulates what is left
  row.us_per_collective =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / collectives;
  row.events = engine->stats().events_submitted;
  if (shared != nullptr) row.kept = shared->stats();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  int collectives = 2000;
  if (argc > 1) collectives = std::strcmp(argv[1], "--quick") == 0 ? 200 : std::atoi(argv[1]);
  setenv("VGPU_NODES", "8", 1);
  setenv("VGPU_GPUS_PER_NODE", "8", 1);
  ConfigResult config = load_cluster_config();
  if (!config.ok()) {
    std::fprintf(stderr, "cluster configuration rejected\n");
    return 2;
  }
  int status = 0;
  std::printf("%-22s %14s %14s %10s %12s %12s\n", "ranks in the process", "without us", "with flows us", "ratio",
              "events w/o", "events with");
  for (int local : {64, 1}) {
    // Alternated, the better of two of each, so that a slow moment of a shared machine does not
    // land on one side only.
    Row without = run(*config.cluster, collectives, local, false);
    Row with = run(*config.cluster, collectives, local, true);
    const Row without2 = run(*config.cluster, collectives, local, false);
    const Row with2 = run(*config.cluster, collectives, local, true);
    if (without2.us_per_collective < without.us_per_collective) without = without2;
    if (with2.us_per_collective < with.us_per_collective) with = with2;
    std::printf("%-22d %14.2f %14.2f %10.2f %12llu %12llu\n", local, without.us_per_collective,
                with.us_per_collective, with.us_per_collective / without.us_per_collective,
                static_cast<unsigned long long>(without.events), static_cast<unsigned long long>(with.events));
    if (without.end != with.end) {
      std::printf("FAIL alone, the collectives end at %.9f s with flows, %.9f s without\n", with.end, without.end);
      status = 1;
    }
  }
  // The shared rows: a fresh vgpud each (what it keeps is the row's own).
  int row_id = 0;
  auto shared_row = [&](int local, Read read) -> std::optional<Row> {
    RemoteOptions ro;
    ro.job_id = "nccl-links-bench-" + std::to_string(getpid()) + "-" + std::to_string(row_id++);
    ro.socket_dir = "/tmp/vgpu-bench-" + std::to_string(getpid());
    ro.vgpud_path = VGPUD_PATH;
    std::string error;
    auto daemon = connect_engine(ro, &error);
    if (daemon == nullptr) {
      std::printf("FAIL no vgpud for the shared rows: %s\n", error.c_str());
      return std::nullopt;
    }
    if (read == Read::share) daemon->register_rank(kBenchRank);
    Row r = run(*config.cluster, collectives, local, true, daemon.get(), read);
    daemon.reset();
    shutdown_daemon(ro);
    return r;
  };
  std::printf("%-22s %14s %14s %10s %12s %12s\n", "ranks + vgpud", "without us", "shared us", "ratio",
              "vgpud live", "vgpud results");
  for (int local : {1, 8}) {
    std::optional<Row> best[2];
    Row base = run(*config.cluster, collectives, local, false);
    for (int pass = 0; pass < 2; ++pass)
      for (Read read : {Read::query, Read::share}) {
        const std::optional<Row> r = shared_row(local, read);
        if (!r) return 1;
        std::optional<Row>& b = best[static_cast<int>(read)];
        if (!b || r->us_per_collective < b->us_per_collective) b = r;
      }
    const Row base2 = run(*config.cluster, collectives, local, false);
    if (base2.us_per_collective < base.us_per_collective) base = base2;
    for (Read read : {Read::query, Read::share}) {
      const Row& r = *best[static_cast<int>(read)];
      const std::string name = std::to_string(local) + " + vgpud " + (read == Read::query ? "query" : "share");
      std::printf("%-22s %14.2f %14.2f %10.2f %12llu %12llu\n", name.c_str(), base.us_per_collective,
                  r.us_per_collective, r.us_per_collective / base.us_per_collective,
                  static_cast<unsigned long long>(r.kept.events_live),
                  static_cast<unsigned long long>(r.kept.result_bytes));
    }
    if (best[0]->end != best[1]->end) {
      std::printf("FAIL %d ranks: the shared rows end at %.9f s (query) and %.9f s (share)\n", local,
                  best[0]->end, best[1]->end);
      status = 1;
    }
  }
  return status;
}
