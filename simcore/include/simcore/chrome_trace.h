// Chrome-trace / Perfetto JSON ("traceEvents", complete events with ph "X", times in us) of
// simulated work: the one trace format of every VGPU_TIMELINE, whichever backend wrote it (the
// sim backend's engine, the daemon, the passthrough's stream timelines). One process per GPU: its
// tasks on the lanes their submitters chose (thread or stream ids as given), the flows it sends
// on "net" lanes after them, packed greedily so that flows on one lane never overlap. A flow's
// args carry its destination, bytes, when its last byte left and its mean rate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace simcore {

struct TimelineEntry {
  bool flow = false;
  int32_t gpu = 0;  // task GPU or flow source
  int32_t dst = 0;
  int32_t lane = 0;
  uint64_t bytes = 0;
  double start = 0, transfer_end = 0, finish = 0;  // seconds
  // A task's issue time: the earliest its host thread let it start (the thread's clock plus the
  // launch latency), seconds; < 0 unknown. Written as "issued_us": a task that starts at its
  // issue time waited for its host, one that starts later waited for the GPU.
  double issue = -1;
  // A kernel's span that is not its own work: what earlier kernels of its GPU lost beside a
  // collective, booked on it (vgpu's timing/collective_overlap.h), seconds; written as
  // "carried_us" when positive.
  double carried = 0;
  std::string label;  // empty: a generated name
};

std::string chrome_trace_json(std::vector<TimelineEntry> entries);

// The "traceEvents" entries of several traces written by chrome_trace_json (one per process of
// a job), as one trace. Metadata entries repeated across traces are kept once. Returns false and
// leaves `out` alone when a text is not such a trace.
bool merge_chrome_traces(const std::vector<std::string>& traces, std::string* out);

// JSON string escaping (quotes included), shared with vgpu-netsim's output.
void append_json_string(std::string& out, const std::string& s);

}  // namespace simcore
