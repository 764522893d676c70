// vgpu-netsim's binary trace, beside JSON lines: the same events with nothing to parse and no
// ids to look up, for traces of millions of events (a 1024-GPU ring all-reduce is 2.1 M lines,
// and reading them as JSON took half of a replay). Little-endian, 8-byte magic, then one record
// per event in submission order:
//   "VGPUTRC1"
//   per event: uint8 kind (0 flow, 1 task), 3 bytes 0, uint32 after_count,
//              int32 src (a task: its GPU), int32 dst (a task: 0), uint64 bytes (a task: 0),
//              float64 start_us, float64 duration_us (a flow: 0),      -- 40 bytes
//              after_count x uint64: indices (0-based) of earlier events that must finish first
// An event's id is its index: a replay prints {"id":<index>,...}. `vgpu-netsim --to-binary OUT
// trace.jsonl` converts a JSON-lines trace (labels are dropped).
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <vector>

#include "netsim_trace.h"

namespace simcore::netsim {

inline constexpr char kBinaryMagic[8] = {'V', 'G', 'P', 'U', 'T', 'R', 'C', '1'};

// True when the stream starts like a binary trace (its first byte; JSON lines start with '{',
// '#' or white space). Consumes nothing.
bool looks_binary(std::istream& in);

// Reads events one by one, checking each against the ones before it and the cluster (`gpus`).
class BinaryTraceReader {
 public:
  BinaryTraceReader(std::istream& in, int gpus) : in_(in), gpus_(gpus) {}
  // The next event (`line` = its index + 1, `id` left empty): false at the end or on an error
  // (then error() is set, with the event's number as its line).
  bool next(TraceLine& out);
  const std::optional<TraceError>& error() const { return error_; }
  size_t count() const { return count_; }

 private:
  bool fill(void* dst, size_t n);  // false: fewer than n bytes left
  bool fail(std::string message);

  std::istream& in_;
  int gpus_;
  size_t count_ = 0;
  bool started_ = false;
  std::optional<TraceError> error_;
  std::vector<char> buf_ = std::vector<char>(1 << 20);
  size_t begin_ = 0, end_ = 0;
};

// outline_trace() for a binary trace: what a replay can promise per block of `block` events.
TraceOutline outline_binary(std::istream& in, int gpus, size_t block);

// Appends one event in the binary format (`after` as indices of earlier events).
void write_binary_event(std::ostream& out, const TraceLine& event);

}  // namespace simcore::netsim
