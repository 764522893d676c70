// vgpu-netsim: replays a trace of flows (and tasks) on the simulated cluster and prints when
// each one starts and finishes. Lines are fed to the engine in file order and simulated as
// they arrive, as live ranks would submit them: a line whose start lies in the virtual past of
// earlier lines makes the engine roll back, so the answer never depends on the file's order.
// Consecutive flow lines go in one Engine::add_flows() call (like flows of one call, a
// collective's step, become flow groups: simcore/src/flow_group.h), simulated once the call is
// in; a call ends before a task, before a line that depends on a line of the call, and at
// kCallLines lines. --one-by-one submits and simulates each line alone (the same answers).
//
//   vgpu-netsim [--config cluster.toml] [--trace-out timeline.json] [--batch] [--one-by-one]
//               [--stats] [trace.jsonl | trace.bin | -]
//   vgpu-netsim --to-binary trace.bin [trace.jsonl | -]
//
// The trace is JSON lines (netsim_trace.h) or the binary format (netsim_binary.h: events by
// index, nothing to parse), told apart by its first byte.
// Output: one JSON line per event, in input order: {"id":"a","start_us":..,"finish_us":..}.
// A trace given as a regular file is read twice. The first pass (outline_trace) tells, for every block
// of lines, how early anything from there on can start: no earlier than the earliest start_us of
// the lines without dependencies, and, for the others, no earlier than the earliest current
// start among the events from their lowest dependency on. After each block the replay promises
// that floor, as a rank would (set_rank_floor), and the engine reclaims the history behind it:
// memory stays near the engine's 20 bytes of result per event plus the ids. From standard input
// (one pass) every event's history is kept. The outline also says which events no later line
// names (those below the lowest dependency of the lines still to come): once final, such an
// event's line is written and its id released to the engine, a call's worth at a time
// (Engine::release(span)), so the engine's table of ids stays a window, not the whole trace.
// Exit status: 0 success, 2 bad usage, configuration or trace (with "file:line: message" for
// the trace), 1 when a file cannot be read or written.
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <iterator>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fixed6.h"
#include "netsim_binary.h"
#include "netsim_trace.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"

namespace {

constexpr const char* kUsage =
    "usage: vgpu-netsim [--config cluster.toml] [--trace-out timeline.json] [--batch] [--one-by-one]\n"
    "                   [--stats] [trace.jsonl | trace.bin | -]\n"
    "       vgpu-netsim --to-binary trace.bin [trace.jsonl | -]\n"
    "Replays JSON-lines flows {\"id\",\"src\",\"dst\",\"bytes\",\"start_us\",\"after\"} (and tasks\n"
    "{\"id\",\"gpu\",\"duration_us\",...}) on the cluster (--config, else VGPU_CONFIG, else the\n"
    "embedded default; VGPU_NODES etc. apply) and prints each event's start_us and finish_us.\n"
    "  --trace-out F  write a Chrome-trace/Perfetto timeline to F\n"
    "  --batch        submit every line before simulating (no per-line rollback; faster)\n"
    "  --one-by-one   submit and simulate each flow line alone (consecutive flow lines\n"
    "                 otherwise go to the engine together; the answers are the same)\n"
    "  --stats        print the engine's counters to stderr\n"
    "  --to-binary F  write the trace in the binary format to F (ids become indices) and stop\n"
    "A binary trace (starts with VGPUTRC1) is replayed the same way; its ids are event indices.\n";

struct Options {
  std::string config, trace_out, to_binary, input = "-";
  bool batch = false, one_by_one = false, stats = false;
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "vgpu-netsim: %s\n%s", message.c_str(), kUsage);
  return 2;
}

// Ids come from parsed JSON, so they are valid UTF-8 and dump() cannot throw; most need no
// escaping at all.
void append_json_string(fmt::memory_buffer& out, std::string_view s) {
  for (unsigned char c : s) {
    if (c == '"' || c == '\\' || c < 0x20) {
      const std::string quoted = nlohmann::json(std::string(s)).dump();
      out.append(quoted.data(), quoted.data() + quoted.size());
      return;
    }
  }
  out.push_back('"');
  out.append(s.data(), s.data() + s.size());
  out.push_back('"');
}

// The engine id of every line. A fresh engine numbers events 1, 2, 3, ...: while it does, the
// table is two numbers; should it ever not, every id is stored.
class EventIds {
 public:
  void push_back(simcore::EventId id) {
    if (stored_.empty()) {
      if (count_ == 0) first_ = id;
      if (id == first_ + count_) {
        ++count_;
        return;
      }
      for (size_t k = 0; k < count_; ++k) stored_.push_back(first_ + k);
    }
    stored_.push_back(id);
    ++count_;
  }
  simcore::EventId operator[](size_t k) const { return stored_.empty() ? first_ + k : stored_[k]; }
  size_t size() const { return count_; }
  size_t memory_bytes() const { return stored_.capacity() * sizeof(simcore::EventId); }

 private:
  simcore::EventId first_ = 0;
  size_t count_ = 0;
  std::vector<simcore::EventId> stored_;
};

// --to-binary: the trace, read and checked as a replay would, in the binary format.
int write_binary_trace(std::istream& in, bool binary, int gpus, const std::string& name,
                       const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    std::fprintf(stderr, "vgpu-netsim: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  out.write(simcore::netsim::kBinaryMagic, sizeof simcore::netsim::kBinaryMagic);
  simcore::netsim::TraceReader reader(gpus);
  simcore::netsim::BinaryTraceReader binary_reader(in, gpus);
  simcore::netsim::LineSource source(in);
  simcore::netsim::TraceLine line;
  while (binary ? binary_reader.next(line) : reader.next(source, line))
    simcore::netsim::write_binary_event(out, line);
  const auto& error = binary ? binary_reader.error() : reader.error();
  if (error) {
    std::fprintf(stderr, "%s:%s%d: %s\n", name.c_str(), binary ? "event " : "", error->line,
                 error->message.c_str());
    return 2;
  }
  out.flush();
  if (in.bad() || !out) {
    std::fprintf(stderr, "vgpu-netsim: error converting %s to %s\n", name.c_str(), path.c_str());
    return 1;
  }
  return 0;
}

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
    } else if (a == "--to-binary") {
      if (!value(opt.to_binary)) return usage_error("--to-binary needs a file");
    } else if (a == "--batch") {
      opt.batch = true;
    } else if (a == "--one-by-one") {
      opt.one_by_one = true;
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
  const int gpus = cluster.total_gpus();
  const bool binary = simcore::netsim::looks_binary(*in);
  if (!opt.to_binary.empty()) return write_binary_trace(*in, binary, gpus, name, opt.to_binary);

  simcore::EngineOptions engine_options;
  engine_options.record_timeline = !opt.trace_out.empty();
  engine_options.huge_pages = true;
  auto engine = simcore::make_engine(cluster, engine_options);
  EventIds events;

  // Floors: a block's lines, and every later one, start no earlier than the outline says.
  constexpr size_t kBlock = 1024;
  simcore::netsim::TraceOutline outline;
  simcore::netsim::IdTable known;
  // Only a regular file can be read twice (a pipe named as a file cannot).
  struct stat input_stat {};
  const bool promise = opt.input != "-" && ::stat(opt.input.c_str(), &input_stat) == 0 &&
                       S_ISREG(input_stat.st_mode);
  if (promise) {
    std::ifstream first(opt.input, std::ios::binary);
    if (binary) {
      outline = simcore::netsim::outline_binary(first, gpus, kBlock);
    } else {
      outline = simcore::netsim::outline_trace(first, kBlock, known);
      known.shrink_to_fit();
    }
    engine->register_rank(0);
  }
  simcore::netsim::TraceReader reader(gpus, std::move(known));
  simcore::netsim::BinaryTraceReader binary_reader(*in, gpus);
  simcore::Time floor = 0;
  auto promise_floor = [&] {
    const size_t b = events.size() / kBlock;
    if (b >= outline.min_dependency.size()) return;
    simcore::Time f = outline.min_free_start_us[b] * 1e-6;
    const size_t from = outline.min_dependency[b];
    if (from < events.size()) {
      // Looking far back would cost more than the memory it frees: no promise this time.
      if (events.size() - from > 16 * kBlock) return;
      for (size_t i = from; i < events.size() && f > floor; ++i) f = std::min(f, engine->query(events[i])->start);
    }
    if (std::isfinite(f) && f > floor) {
      floor = f;
      engine->set_rank_floor(0, floor);
    }
  };

  // Output lines, in input order: line i once event i is final (or at the end).
  fmt::memory_buffer out;
  auto write_line = [&](size_t i, const simcore::Interval& iv) {
    // The line after its id is built in one buffer and appended once; write_fixed6 gives
    // {:.6f}'s digits (fixed6.h): two numbers per event are a sizeable part of a replay.
    char line_buf[2 * 400 + 64];
    char* p = line_buf;
    auto put = [&p](std::string_view text) {
      std::memcpy(p, text.data(), text.size());
      p += text.size();
    };
    if (binary) {
      put("{\"id\":");
      p = std::to_chars(p, p + 24, i).ptr;  // a binary trace's ids are its indices
    } else {
      out.append(std::string_view("{\"id\":"));
      append_json_string(out, reader.ids().id(i));
    }
    put(",\"start_us\":");
    p = simcore::netsim::write_fixed6(p, iv.start * 1e6);
    put(",\"finish_us\":");
    p = simcore::netsim::write_fixed6(p, iv.finish * 1e6);
    put("}\n");
    out.append(line_buf, p);
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  };
  // Lines written so far; ids released (no later line names them, their answers are final).
  size_t emitted = 0;
  uint64_t released = 0;
  std::vector<simcore::EventId> to_release;
  auto write_final = [&] {
    const size_t b = events.size() / kBlock;  // the block of the next line (no call is open)
    const size_t limit = std::min(events.size(), b < outline.min_dependency.size()
                                                     ? outline.min_dependency[b]
                                                     : size_t{0});
    to_release.clear();
    while (emitted < limit && engine->is_final(events[emitted])) {
      write_line(emitted, *engine->query(events[emitted]));
      to_release.push_back(events[emitted]);
      ++emitted;
    }
    if (!to_release.empty()) engine->release(std::span<const simcore::EventId>(to_release));
    released += to_release.size();
  };

  // The flow lines of the engine call being gathered: call[0 .. in_call), their line numbers.
  constexpr size_t kCallLines = 8192;
  std::vector<simcore::FlowSpec> call(kCallLines);
  std::vector<int> call_lines(kCallLines);
  std::vector<simcore::EventId> call_ids(kCallLines);
  size_t in_call = 0;
  size_t promised_blocks = 0;
  auto refused = [&](int line_number) {
    std::fprintf(stderr, "%s:%d: the simulator refused this event\n", name.c_str(), line_number);
    return false;
  };
  // After events were added: simulate them now, as a live rank's query would, and promise a
  // floor at each new block.
  auto added = [&](simcore::EventId last) {
    if (!opt.batch) engine->query(last);
    if (promise && events.size() / kBlock > promised_blocks) {
      promised_blocks = events.size() / kBlock;
      promise_floor();
    }
    if (promise && !opt.batch) write_final();
  };
  auto submit_call = [&] {
    if (in_call == 0) return true;
    engine->add_flows(std::span<const simcore::FlowSpec>(call.data(), in_call),
                      std::span<simcore::EventId>(call_ids.data(), in_call));
    for (size_t k = 0; k < in_call; ++k) {
      if (call_ids[k] == simcore::kNoEvent) return refused(call_lines[k]);
      events.push_back(call_ids[k]);
    }
    const simcore::EventId last = call_ids[in_call - 1];
    in_call = 0;
    added(last);
    return true;
  };

  simcore::netsim::LineSource source(*in);
  simcore::netsim::TraceLine line;
  std::vector<simcore::EventId> after;
  simcore::TaskSpec t;
  auto next_event = [&] { return binary ? binary_reader.next(line) : reader.next(source, line); };
  while (next_event()) {
    // Lines before this one that are not in the engine yet: the gathered call.
    const size_t line_index = events.size() + in_call;
    bool needs_call = line.is_task;
    for (size_t k : line.after) needs_call = needs_call || k >= events.size();
    if (needs_call && !submit_call()) return 2;
    after.clear();
    for (size_t k : line.after) after.push_back(events[k]);
    // Labels only matter to the timeline.
    // (A binary trace's events are named by their index.)
    if (binary && !opt.trace_out.empty()) line.id = std::to_string(line_index);
    const std::string& label = !opt.trace_out.empty() ? (line.label.empty() ? line.id : line.label) : line.label;
    if (line.is_task) {
      t.gpu = line.src;
      t.duration = line.duration_us * 1e-6;
      t.not_before = std::max(line.start_us * 1e-6, floor);  // it cannot start before anyway
      t.after.swap(after);
      t.label = label;
      const simcore::EventId id = engine->add_task(t);
      t.after.swap(after);
      if (id == simcore::kNoEvent) return refused(line.line), 2;
      events.push_back(id);
      added(id);
      continue;
    }
    simcore::FlowSpec& f = call[in_call];
    f.src_gpu = line.src;
    f.dst_gpu = line.dst;
    f.bytes = line.bytes;
    f.not_before = std::max(line.start_us * 1e-6, floor);
    f.after.swap(after);
    f.label = label;
    call_lines[in_call] = line.line;
    ++in_call;
    if ((opt.one_by_one || in_call == kCallLines) && !submit_call()) return 2;
  }
  if (!submit_call()) return 2;
  const auto& error = binary ? binary_reader.error() : reader.error();
  if (error) {
    std::fprintf(stderr, "%s:%s%d: %s\n", name.c_str(), binary ? "event " : "", error->line,
                 error->message.c_str());
    return 2;
  }
  if (in->bad()) {
    std::fprintf(stderr, "vgpu-netsim: error reading %s\n", name.c_str());
    return 1;
  }

  for (size_t i = emitted; i < events.size(); ++i) write_line(i, *engine->query(events[i]));
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
    const double n = std::max<double>(1, static_cast<double>(events.size()));
    const double engine_bytes = static_cast<double>(s.history_bytes + s.result_bytes + s.timeline_bytes);
    const double reader_bytes = static_cast<double>(reader.ids().memory_bytes() +
                                                    events.memory_bytes());
    std::fprintf(stderr,
                 "vgpu-netsim: %llu events, %llu rollbacks re-simulating %llu events, %llu max-min "
                 "fillings over %llu flows\n"
                 "vgpu-netsim: memory per event: %.1f bytes (engine %.1f: history %.1f, results %.1f, "
                 "timeline %.1f; ids and event table %.1f); %llu events live at the end; %llu "
                 "events released during the replay\n",
                 static_cast<unsigned long long>(s.events_submitted),
                 static_cast<unsigned long long>(s.rollbacks),
                 static_cast<unsigned long long>(s.replayed_events),
                 static_cast<unsigned long long>(s.solves),
                 static_cast<unsigned long long>(s.solved_flows), (engine_bytes + reader_bytes) / n,
                 engine_bytes / n, s.history_bytes / n, s.result_bytes / n, s.timeline_bytes / n,
                 reader_bytes / n, static_cast<unsigned long long>(s.events_live),
                 static_cast<unsigned long long>(released));
    // The peak of this program's own memory (VmHWM, Linux): a parent's getrusage() would also
    // count what the process held between fork and exec, i.e. the parent's resident set.
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmHWM:", 0) == 0)
        std::fprintf(stderr, "vgpu-netsim: peak resident set: %.0f bytes\n",
                     1024.0 * std::atof(line.c_str() + 6));
  }
  return 0;
}
