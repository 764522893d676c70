// Reading CUPTI's activity records, built by hand from the toolkit's own structs.
#include "activity_record.h"

#include <gtest/gtest.h>

#include <cstring>

namespace vgpu::cupti {
namespace {

const CUpti_Activity* as_activity(const void* r) { return static_cast<const CUpti_Activity*>(r); }

TEST(ActivityRecord, ConcurrentKernelIsATimedKernelOp) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1'000;
  k.end = 11'000;
  k.correlationId = 42;
  ParsedRecord p = parse_record(as_activity(&k), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.type, ParsedRecord::Type::op);
  EXPECT_EQ(p.kind, OpKind::kernel);
  EXPECT_EQ(p.correlation_id, 42u);
  EXPECT_EQ(p.start_ns, 1'000u);
  EXPECT_EQ(p.end_ns, 11'000u);

  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;  // the serializing kind reads the same
  EXPECT_EQ(parse_record(as_activity(&k), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).kind, OpKind::kernel);
}

TEST(ActivityRecord, AKernelRecordSaysWhereItRanAndWhatItWas) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 10;
  k.end = 20;
  k.correlationId = 5;
  k.contextId = 3;
  k.streamId = 13;
  k.name = "_Z4spinx";
  k.gridX = 4;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 128;
  k.blockY = 1;
  k.blockZ = 1;
  ParsedRecord p = parse_record(as_activity(&k), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.stream.context_id, 3u);
  EXPECT_EQ(p.stream.stream_id, 13u);
  EXPECT_EQ(p.shape.name_hash, kernel_name_hash("_Z4spinx"));
  EXPECT_EQ(p.shape.grid[0], 4u);
  EXPECT_EQ(p.shape.grid[1], 2u);
  EXPECT_EQ(p.shape.block[0], 128u);
  EXPECT_FALSE(p.graph_node);

  KernelShape launched;
  launched.name_hash = kernel_name_hash("_Z4spinx");
  launched.grid[0] = 4;
  launched.grid[1] = 2;
  launched.block[0] = 128;
  EXPECT_TRUE(launched.matches(p.shape));

  k.graphNodeId = 77;  // launched by a graph
  EXPECT_TRUE(parse_record(as_activity(&k), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).graph_node);
  k.graphNodeId = 0;
  k.name = nullptr;  // no name: matches any announced name
  EXPECT_EQ(parse_record(as_activity(&k), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).shape.name_hash, 0u);
}

TEST(ActivityRecord, CopiesAndMemsetsSayTheirStream) {
  CUpti_ActivityMemcpy6 c;
  std::memset(&c, 0, sizeof c);
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.contextId = 2;
  c.streamId = 21;
  ParsedRecord p = parse_record(as_activity(&c), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.stream.stream_id, 21u);
  EXPECT_EQ(p.stream.context_id, 2u);
  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.streamId = 22;
  EXPECT_EQ(parse_record(as_activity(&s), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).stream.stream_id, 22u);
}

TEST(ActivityRecord, MemcpyMemsetAndPeerCopy) {
  CUpti_ActivityMemcpy6 c;
  std::memset(&c, 0, sizeof c);
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.start = 5;
  c.end = 9;
  c.correlationId = 3;
  ParsedRecord p = parse_record(as_activity(&c), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.type, ParsedRecord::Type::op);
  EXPECT_EQ(p.kind, OpKind::memcpy);
  EXPECT_EQ(p.correlation_id, 3u);
  EXPECT_EQ(p.end_ns - p.start_ns, 4u);

  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.start = 100;
  s.end = 300;
  s.correlationId = 4;
  p = parse_record(as_activity(&s), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.kind, OpKind::memset);
  EXPECT_EQ(p.correlation_id, 4u);
  EXPECT_EQ(p.start_ns, 100u);
  EXPECT_EQ(p.end_ns, 300u);

  CUpti_ActivityMemcpyPtoP4 pp;
  std::memset(&pp, 0, sizeof pp);
  pp.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  pp.start = 10;
  pp.end = 20;
  pp.correlationId = 5;
  p = parse_record(as_activity(&pp), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.kind, OpKind::memcpy);
  EXPECT_EQ(p.correlation_id, 5u);
}

TEST(ActivityRecord, UnfinishedOpIsReportedUntimed) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 500;
  k.end = 0;  // a forced flush caught it running
  k.correlationId = 8;
  ParsedRecord p = parse_record(as_activity(&k), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.type, ParsedRecord::Type::op);
  EXPECT_EQ(p.start_ns, 0u);
  EXPECT_EQ(p.end_ns, 0u);
}

TEST(ActivityRecord, ExternalCorrelationOfOurKindIsATag) {
  CUpti_ActivityExternalCorrelation e;
  std::memset(&e, 0, sizeof e);
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  e.externalId = 0xfeedface12345678ull;
  e.correlationId = 77;
  ParsedRecord p = parse_record(as_activity(&e), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  EXPECT_EQ(p.type, ParsedRecord::Type::tag);
  EXPECT_EQ(p.correlation_id, 77u);
  EXPECT_EQ(p.tag, 0xfeedface12345678ull);

  // Another tool's kind (e.g. a profiler pushing CUSTOM1 or OpenACC ids) is not ours.
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
  EXPECT_EQ(parse_record(as_activity(&e), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).type,
            ParsedRecord::Type::ignored);
}

TEST(ActivityRecord, OtherKindsAndNullAreIgnored) {
  CUpti_ActivityAPI api;
  std::memset(&api, 0, sizeof api);
  api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  api.correlationId = 1;
  EXPECT_EQ(parse_record(as_activity(&api), CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).type,
            ParsedRecord::Type::ignored);
  EXPECT_EQ(parse_record(nullptr, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).type,
            ParsedRecord::Type::ignored);
}

}  // namespace
}  // namespace vgpu::cupti
