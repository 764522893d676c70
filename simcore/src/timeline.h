// Chrome-trace / Perfetto JSON ("traceEvents", complete events with ph "X", times in us) of
// simulated events. One process per GPU: its tasks on the lanes their submitters chose
// (thread ids as given), the flows it sends on "net" lanes after them, packed greedily so that
// flows on one lane never overlap. A flow's args carry its destination, bytes, when its last
// byte left and its mean rate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "simcore/engine.h"

namespace simcore::detail {

struct TimelineEntry {
  bool flow = false;
  int32_t gpu = 0;  // task GPU or flow source
  int32_t dst = 0;
  int32_t lane = 0;
  uint64_t bytes = 0;
  Time start = 0, transfer_end = 0, finish = 0;
  std::string label;  // empty: a generated name
};

std::string chrome_trace_json(std::vector<TimelineEntry> entries);

// JSON string escaping (quotes included), shared with vgpu-netsim's output.
void append_json_string(std::string& out, const std::string& s);

}  // namespace simcore::detail
