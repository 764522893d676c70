// The trace format of vgpu-netsim: JSON lines, one event each, in the order live ranks would
// submit them.
//   flow: {"id": "a", "src": 0, "dst": 9, "bytes": 1048576, "start_us": 0, "after": ["x"]}
//   task: {"id": "k", "gpu": 3, "duration_us": 12.5, "start_us": 0, "after": ["a"]}
// "id" is a string or an integer, unique in the file. GPUs are numbered globally, node by node.
// "start_us" (default 0) is the earliest virtual start in microseconds; "after" (default none)
// lists earlier lines' ids that must finish first; "label" (optional) names it in the timeline.
// Blank lines and lines starting with '#' are skipped. Any other key is an error (a typo is
// never silently ignored).
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <unordered_map>
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

// Reads a trace line by line, checking each line against the ones before it (ids, "after") and
// the cluster (`gpus` bounds the GPU numbers).
class TraceReader {
 public:
  explicit TraceReader(int gpus) : gpus_(gpus) {}
  // Reads lines until an event or the end: true and `out` filled, false at the end or on an
  // error (then error() is set).
  bool next(std::istream& in, TraceLine& out);
  const std::optional<TraceError>& error() const { return error_; }

 private:
  bool fail(std::string message);
  bool parse(const std::string& text, TraceLine& out);

  int gpus_;
  int line_ = 0;
  size_t count_ = 0;
  std::optional<TraceError> error_;
  std::unordered_map<std::string, size_t> ids_;  // id -> index of its line among events
};

}  // namespace simcore::netsim
