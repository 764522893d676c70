// The trace format of vgpu-netsim: JSON lines, one event each, in the order live ranks would
// submit them.
//   flow: {"id": "a", "src": 0, "dst": 9, "bytes": 1048576, "start_us": 0, "after": ["x"]}
//   task: {"id": "k", "gpu": 3, "duration_us": 12.5, "start_us": 0, "after": ["a"]}
// "id" is a string or an integer, unique in the file. GPUs are numbered globally, node by node.
// "start_us" (default 0) is the earliest virtual start in microseconds; "after" (default none)
// lists earlier lines' ids that must finish first; "label" (optional) names it in the timeline.
// Blank lines and lines starting with '#' are skipped. Any other key is an error (a typo is
// never silently ignored).
//
// Reading is the hot path of a replay (a 1024-GPU ring all-reduce is 2 million lines): lines
// come out of a large buffer, a hand-written scanner accepts the plain lines (no escapes, no
// duplicate keys, numbers in their usual forms) and anything else goes through nlohmann::json,
// which also words every error. Ids live back to back in one arena with an open-addressing
// index over them: about 14 bytes per event beside the id's own characters.
#pragma once

#include <algorithm>
#include <cstdint>
#include <istream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace simcore::netsim {

struct TraceLine {
  int line = 0;  // 1-based line number in the file
  std::string id;
  bool is_task = false;
  int src = 0, dst = 0;  // a task runs on src
  uint64_t bytes = 0;
  double duration_us = 0;
  double start_us = 0;
  std::vector<size_t> after;  // indices of earlier TraceLines
  std::string label;
};

struct TraceError {
  int line = 0;
  std::string message;
};

// Every id of a trace, by event index, and the index of an id.
class IdTable {
 public:
  // The index of `id`, or -1.
  int64_t find(std::string_view id) const;
  // Adds `id` as event size(); false (and nothing added) when it is already there or the ids
  // would pass 4 GiB.
  bool insert(std::string_view id);
  // Makes `index` the first one find() tries for its hash (a second reading of the trace).
  void note_recent(size_t index) { recent_[hash(id(index)) >> 48] = static_cast<uint32_t>(index + 1); }
  std::string_view id(size_t index) const {
    const size_t begin = index == 0 ? 0 : ends_[index - 1];
    return std::string_view(chars_).substr(begin, ends_[index] - begin);
  }
  size_t size() const { return ends_.size(); }
  void shrink_to_fit();
  size_t memory_bytes() const;

 private:
  static uint64_t hash(std::string_view s);
  void grow();
  void place(size_t index, uint64_t h);

  std::string chars_;            // every id, back to back
  std::vector<uint32_t> ends_;   // end of id k in chars_
  // Open addressing, linear probing: a slot holds an id's index, and its tag 0x80 | 7 bits of
  // the id's hash (0: empty), so that a probe rarely touches an id that is not the one wanted.
  std::vector<uint32_t> slots_;
  std::vector<uint8_t> tags_;
  // The last id added under each of 2^16 hash values (index + 1; 0: none), consulted first:
  // traces mostly wait on recent lines, and this stays in cache where the index does not.
  std::vector<uint32_t> recent_ = std::vector<uint32_t>(1 << 16, 0);
};

// Splits a stream into lines through a large buffer (std::getline's semantics: a last line
// without a newline counts, an empty tail does not).
class LineSource {
 public:
  explicit LineSource(std::istream& in) : in_(in) {}
  // The next line (without its newline), valid until the next call; false at the end.
  bool next(std::string_view& line);
  bool bad() const { return in_.bad(); }

 private:
  std::istream& in_;
  std::vector<char> buf_ = std::vector<char>(1 << 20);
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
};

// Reads a trace line by line, checking each line against the ones before it (ids, "after") and
// the cluster (`gpus` bounds the GPU numbers).
class TraceReader {
 public:
  explicit TraceReader(int gpus) : gpus_(gpus) {}
  // The ids of a first pass over the same trace (outline_trace): lines are checked against
  // them instead of being added (an id must sit at its line's index).
  TraceReader(int gpus, IdTable&& known) : gpus_(gpus), known_(known.size()), ids_(std::move(known)) {}
  // Reads lines until an event or the end: true and `out` filled, false at the end or on an
  // error (then error() is set).
  bool next(LineSource& in, TraceLine& out);
  const std::optional<TraceError>& error() const { return error_; }
  const IdTable& ids() const { return ids_; }
  IdTable& ids() { return ids_; }

 private:
  bool fail(std::string message);
  bool parse(std::string_view text, TraceLine& out);       // nlohmann::json: every case
  bool parse_fast(std::string_view text, TraceLine& out);  // plain lines; false: use parse()

  int64_t lookup(std::string_view id) const;  // an earlier event's index, or -1

  int gpus_;
  int line_ = 0;
  size_t count_ = 0;  // events read
  size_t known_ = 0;  // ids known from the first pass
  std::optional<TraceError> error_;
  IdTable ids_;
};

// A first pass over a trace for what a replay can promise, per block of `block` events (in file
// order), about the events of that block and every later one:
// - the earliest start_us among those without dependencies;
// - the lowest index among the dependencies of the others (each of which starts no earlier than
//   some event from that index on).
// It stops at the first line it cannot read (the replay stops there too); `ids` receives the
// ids of the lines before.
struct TraceOutline {
  std::vector<double> min_free_start_us;  // by block; one more entry: +infinity
  std::vector<size_t> min_dependency;     // by block; one more entry: SIZE_MAX
  size_t events = 0;                      // lines read
};
TraceOutline outline_trace(std::istream& in, size_t block, IdTable& ids);

// Builds a TraceOutline one event at a time, in trace order (both trace formats' readers; inline
// because the bench builds the binary reader without the JSON one).
class TraceOutlineBuilder {
 public:
  explicit TraceOutlineBuilder(size_t block) : block_(block) {}
  // An event starting at `start_us` when it has no dependencies, else after `lowest_dependency`.
  void add(double start_us, bool has_dependencies, size_t lowest_dependency) {
    if (events_ % block_ == 0) {
      free_min_.push_back(std::numeric_limits<double>::infinity());
      dep_min_.push_back(SIZE_MAX);
    }
    if (!has_dependencies) free_min_.back() = std::min(free_min_.back(), start_us);
    else dep_min_.back() = std::min(dep_min_.back(), lowest_dependency);
    ++events_;
  }
  TraceOutline finish() const {
    TraceOutline o;
    o.events = events_;
    o.min_free_start_us.assign(free_min_.size() + 1, std::numeric_limits<double>::infinity());
    o.min_dependency.assign(dep_min_.size() + 1, SIZE_MAX);
    for (size_t b = free_min_.size(); b-- > 0;) {
      o.min_free_start_us[b] = std::min(free_min_[b], o.min_free_start_us[b + 1]);
      o.min_dependency[b] = std::min(dep_min_[b], o.min_dependency[b + 1]);
    }
    return o;
  }

 private:
  size_t block_;
  size_t events_ = 0;
  std::vector<double> free_min_;
  std::vector<size_t> dep_min_;
};

}  // namespace simcore::netsim
