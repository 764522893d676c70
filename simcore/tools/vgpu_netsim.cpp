// vgpu-netsim: replays a trace of flows (and tasks) on the simulated cluster and prints when
// each one starts and finishes. Lines are fed to the engine in file order, each simulated as it
// arrives, as live ranks would submit them: a line whose start lies in the virtual past of
// earlier lines makes the engine roll back, so the answer never depends on the file's order.
//
//   vgpu-netsim [--config cluster.toml] [--trace-out timeline.json] [--batch] [--stats]
//               [trace.jsonl | -]
//
// Output: one JSON line per event, in input order: {"id":"a","start_us":..,"finish_us":..}.
// Exit status: 0 success, 2 bad usage, configuration or trace (with "file:line: message" for
// the trace), 1 when a file cannot be read or written.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "netsim_trace.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"

namespace {

constexpr const char* kUsage =
    "usage: vgpu-netsim [--config cluster.toml] [--trace-out timeline.json] [--batch] [--stats]\n"
    "                   [trace.jsonl | -]\n"
    "Replays JSON-lines flows {\"id\",\"src\",\"dst\",\"bytes\",\"start_us\",\"after\"} (and tasks\n"
    "{\"id\",\"gpu\",\"duration_us\",...}) on the cluster (--config, else VGPU_CONFIG, else the\n"
    "embedded default; VGPU_NODES etc. apply) and prints each event's start_us and finish_us.\n"
    "  --trace-out F  write a Chrome-trace/Perfetto timeline to F\n"
    "  --batch        submit every line before simulating (no per-line rollback; faster)\n"
    "  --stats        print the engine's counters to stderr\n";

struct Options {
  std::string config, trace_out, input = "-";
  bool batch = false, stats = false;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "vgpu-netsim: %s\n%s", message.c_str(), kUsage);
  return 2;
}

// Ids come from parsed JSON, so they are valid UTF-8 and dump() cannot throw.
std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  bool have_input = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= argc) return false;
      dst = argv[++i];
      return true;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--config") {
      if (!value(opt.config)) return usage_error("--config needs a file");
    } else if (a == "--trace-out") {
      if (!value(opt.trace_out)) return usage_error("--trace-out needs a file");
    } else if (a == "--batch") {
      opt.batch = true;
    } else if (a == "--stats") {
      opt.stats = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error("unknown option " + a);
    } else if (have_input) {
      return usage_error("only one trace file, please");
    } else {
      opt.input = a;
      have_input = true;
    }
  }

  const simcore::ConfigResult config = opt.config.empty()
                                           ? simcore::load_cluster_config()
                                           : simcore::load_cluster_config_file(opt.config);
  if (!config.ok()) {
    std::fprintf(stderr, "vgpu-netsim: %s\n", config.error.to_string().c_str());
    return 2;
  }
  const simcore::ClusterSpec& cluster = *config.cluster;

  std::ifstream file;
  std::istream* in = &std::cin;
  const std::string name = opt.input == "-" ? "<stdin>" : opt.input;
  if (opt.input != "-") {
    file.open(opt.input);
    if (!file) {
      std::fprintf(stderr, "vgpu-netsim: cannot read %s: %s\n", opt.input.c_str(), std::strerror(errno));
      return 1;
    }
    in = &file;
  }

  auto engine = simcore::make_engine(cluster);
  simcore::netsim::TraceReader reader(cluster.total_gpus());
  std::vector<std::string> ids;
  std::vector<simcore::EventId> events;
  simcore::netsim::TraceLine line;
  while (reader.next(*in, line)) {
    std::vector<simcore::EventId> after;
    for (size_t k : line.after) after.push_back(events[k]);
    simcore::EventId id;
    if (line.is_task) {
      simcore::TaskSpec t;
      t.gpu = line.src;
      t.duration = line.duration_us * 1e-6;
      t.not_before = line.start_us * 1e-6;
      t.after = std::move(after);
      t.label = line.label.empty() ? line.id : line.label;
      id = engine->add_task(t);
    } else {
      simcore::FlowSpec f;
      f.src_gpu = line.src;
      f.dst_gpu = line.dst;
      f.bytes = line.bytes;
      f.not_before = line.start_us * 1e-6;
      f.after = std::move(after);
      f.label = line.label.empty() ? line.id : line.label;
      id = engine->add_flow(f);
    }
    if (id == simcore::kNoEvent) {
      std::fprintf(stderr, "%s:%d: the simulator refused this event\n", name.c_str(), line.line);
      return 2;
    }
    if (!opt.batch) engine->query(id);  // simulate it now, as a live rank's query would
    ids.push_back(line.id);
    events.push_back(id);
  }
  if (reader.error()) {
    std::fprintf(stderr, "%s:%d: %s\n", name.c_str(), reader.error()->line,
                 reader.error()->message.c_str());
    return 2;
  }
  if (in->bad()) {
    std::fprintf(stderr, "vgpu-netsim: error reading %s\n", name.c_str());
    return 1;
  }

  std::string out;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto iv = engine->query(events[i]);
    out += fmt::format("{{\"id\":{},\"start_us\":{:.6f},\"finish_us\":{:.6f}}}\n", json_string(ids[i]),
                       iv->start * 1e6, iv->finish * 1e6);
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);

  if (!opt.trace_out.empty()) {
    std::ofstream t(opt.trace_out, std::ios::binary);
    t << engine->timeline_json();
    if (!t) {
      std::fprintf(stderr, "vgpu-netsim: cannot write %s\n", opt.trace_out.c_str());
      return 1;
    }
  }
  if (opt.stats) {
    const auto s = engine->stats();
    std::fprintf(stderr,
                 "vgpu-netsim: %llu events, %llu rollbacks re-simulating %llu events, %llu max-min "
                 "fillings over %llu flows\n",
                 static_cast<unsigned long long>(s.events_submitted),
                 static_cast<unsigned long long>(s.rollbacks),
                 static_cast<unsigned long long>(s.replayed_events),
                 static_cast<unsigned long long>(s.solves),
                 static_cast<unsigned long long>(s.solved_flows));
  }
  return 0;
}
