#include "activity_record.h"

namespace vgpu::cupti {
namespace {

// The fields read here (kind, start, end, correlationId, contextId, streamId, and for kernels
// grid, block, name, graphId, graphNodeId) sit at the same offsets in every version of these
// records since CUDA 11 (later versions only append; CUpti_ActivityKernel7 to 10 agree), so the
// newest struct of the headers reads records of any CUPTI 12 or 13 library. Fields appended in
// the newest version only (e.g. isDeviceLaunched) must not be read: an older library's record
// is shorter.
template <class R> ParsedRecord timed(const CUpti_Activity* record, OpKind kind) {
  const auto* r = reinterpret_cast<const R*>(record);
  ParsedRecord p;
  p.type = ParsedRecord::Type::op;
  p.correlation_id = r->correlationId;
  p.kind = kind;
  p.stream = {r->contextId, r->streamId};
  // An unfinished record (forced flush) may carry a start without an end: report it untimed.
  if (r->start != 0 && r->end >= r->start) {
    p.start_ns = r->start;
    p.end_ns = r->end;
  }
  return p;
}

}  // namespace

ParsedRecord parse_record(const CUpti_Activity* record, CUpti_ExternalCorrelationKind tag_kind) {
  if (!record) return {};
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      ParsedRecord p = timed<CUpti_ActivityKernel10>(record, OpKind::kernel);
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      // The name string is CUPTI's and outlives the buffer, but only its hash is kept anyway.
      p.shape.name_hash = k->name ? kernel_name_hash(k->name) : 0;
      const int32_t dims[6] = {k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ};
      for (int i = 0; i < 3; ++i) {
        p.shape.grid[i] = static_cast<uint32_t>(dims[i]);
        p.shape.block[i] = static_cast<uint32_t>(dims[3 + i]);
      }
      p.graph_node = k->graphId != 0 || k->graphNodeId != 0;
      return p;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return timed<CUpti_ActivityMemcpy6>(record, OpKind::memcpy);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return timed<CUpti_ActivityMemcpyPtoP4>(record, OpKind::memcpy);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return timed<CUpti_ActivityMemset4>(record, OpKind::memset);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* r = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (r->externalKind != tag_kind) return {};
      ParsedRecord p;
      p.type = ParsedRecord::Type::tag;
      p.correlation_id = r->correlationId;
      p.tag = r->externalId;
      return p;
    }
    default:
      return {};
  }
}

}  // namespace vgpu::cupti
