// What one CUPTI activity record means to the recorder: a tag for a correlation id, a timed device
// op, or nothing of interest. Kept apart from the buffer handling so it can be fed hand-made
// records in tests.
#pragma once

#include "cupti_profiler/recorder.h"
#include "cupti_profiler/stream_order_matcher.h"

#include <cupti.h>

#include <cstdint>

namespace vgpu::cupti {

struct ParsedRecord {
  enum class Type { ignored, tag, op };
  Type type = Type::ignored;
  uint32_t correlation_id = 0;
  uint64_t tag = 0;  // Type::tag
  OpKind kind = OpKind::kernel;  // Type::op
  uint64_t start_ns = 0, end_ns = 0;  // Type::op; both 0 when CUPTI could not time it
  StreamKey stream;  // Type::op: CUPTI's context and stream ids (0 when the record has none)
  // Kernels only: what stream-order matching compares, and whether a graph launched it (graph
  // nodes are never announced launches).
  KernelShape shape;
  bool graph_node = false;
};

// Only external-correlation records of `tag_kind` count as tags (other tools may push other kinds).
ParsedRecord parse_record(const CUpti_Activity* record, CUpti_ExternalCorrelationKind tag_kind);

}  // namespace vgpu::cupti
