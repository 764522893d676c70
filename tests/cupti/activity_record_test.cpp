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
