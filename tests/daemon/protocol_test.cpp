// The vgpud wire protocol: every message round-trips; every kind of malformed input is refused
// with a clean error; a deterministic fuzz loop over mutated, truncated and random frames finds
// no crash (the sanitizer builds make "no crash" mean no UB and no wild allocation too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>

#include "protocol.h"
#include "protocol_samples.h"

namespace simcore::wire {
namespace {

using testing::encode;
using testing::sample_frames;

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

DecodeError decode_error(const std::vector<uint8_t>& b) { return decode_frame(b).error; }

TEST(Protocol, EveryMessageRoundTrips) {
  std::set<MsgType> types;
  for (const Frame& f : sample_frames()) {
    const std::vector<uint8_t> bytes = encode(f);
    ASSERT_FALSE(bytes.empty()) << static_cast<int>(type_of(f.body));
    DecodeError err;
    EXPECT_EQ(split_frame(bytes, &err), bytes.size());
    EXPECT_EQ(err, DecodeError::kNone);
    Decoded d = decode_frame(bytes);
    ASSERT_TRUE(d.frame) << to_string(d.error) << " type " << static_cast<int>(type_of(f.body));
    EXPECT_EQ(d.frame->request_id, f.request_id);
    EXPECT_EQ(d.frame->body.index(), f.body.index());
    EXPECT_EQ(encode(*d.frame), bytes);  // byte-identical: every field survived
    types.insert(type_of(f.body));
  }
  EXPECT_EQ(types.size(), std::variant_size_v<Body>) << "a message type has no sample";
}

TEST(Protocol, FieldValuesSurvive) {
  FlowSpec flow;
  flow.src_gpu = 5;
  flow.dst_gpu = 9;
  flow.bytes = 1 << 20;
  flow.not_before = 0.125;
  flow.after = {3, 4};
  flow.label = "x";
  Decoded d = decode_frame(encode({77, AddFlow{flow}}));
  ASSERT_TRUE(d.frame);
  const auto& got = std::get<AddFlow>(d.frame->body).flow;
  EXPECT_EQ(got.src_gpu, 5);
  EXPECT_EQ(got.dst_gpu, 9);
  EXPECT_EQ(got.bytes, 1u << 20);
  EXPECT_EQ(got.not_before, 0.125);
  EXPECT_EQ(got.after, (std::vector<EventId>{3, 4}));
  EXPECT_EQ(got.label, "x");

  // A task's, with what it carried (protocol 9: the timeline of a job of rank processes shows it).
  TaskSpec task;
  task.gpu = 3;
  task.lane = 2;
  task.duration = 4e-3;
  task.not_before = 0.25;
  task.after = {8};
  task.label = "k";
  task.carried = 1.5e-3;
  d = decode_frame(encode({78, AddTask{task}}));
  ASSERT_TRUE(d.frame);
  const TaskSpec& t = std::get<AddTask>(d.frame->body).task;
  EXPECT_EQ(t.gpu, 3);
  EXPECT_EQ(t.lane, 2);
  EXPECT_EQ(t.duration, 4e-3);
  EXPECT_EQ(t.not_before, 0.25);
  EXPECT_EQ(t.after, (std::vector<EventId>{8}));
  EXPECT_EQ(t.label, "k");
  EXPECT_EQ(t.carried, 1.5e-3);

  d = decode_frame(encode({1, IntervalReply{Interval{1.5, 2.5}}}));
  ASSERT_TRUE(d.frame);
  const auto& iv = std::get<IntervalReply>(d.frame->body).interval;
  ASSERT_TRUE(iv);
  EXPECT_EQ(iv->start, 1.5);
  EXPECT_EQ(iv->finish, 2.5);
  d = decode_frame(encode({1, IntervalReply{}}));
  ASSERT_TRUE(d.frame);
  EXPECT_FALSE(std::get<IntervalReply>(d.frame->body).interval);
}

TEST(Protocol, ShareCollectivesFieldsSurvive) {
  FlowSpec flow;
  flow.src_gpu = 1;
  flow.dst_gpu = 2;
  flow.bytes = 4096;
  flow.not_before = 0.125;
  Decoded d = decode_frame(encode({5, ShareCollectives{(1 << 20) + 7, 0.5,
                                                       {SharedItem{0xabcull, 41, 8, {2, 5}, {flow, flow}},
                                                        SharedItem{0xdefull, 3, 0, {}, {flow}}}}}));
  ASSERT_TRUE(d.frame) << to_string(d.error);
  const auto& m = std::get<ShareCollectives>(d.frame->body);
  EXPECT_EQ(m.rank, (1 << 20) + 7);
  ASSERT_TRUE(m.floor);
  EXPECT_EQ(*m.floor, 0.5);
  ASSERT_EQ(m.items.size(), 2u);
  EXPECT_EQ(m.items[0].comm, 0xabcull);
  EXPECT_EQ(m.items[0].seq, 41u);
  EXPECT_EQ(m.items[0].nranks, 8u);
  EXPECT_EQ(m.items[0].ranks, (std::vector<int32_t>{2, 5}));
  ASSERT_EQ(m.items[0].flows.size(), 2u);
  EXPECT_EQ(m.items[0].flows[1].bytes, 4096u);
  EXPECT_EQ(m.items[0].flows[1].not_before, 0.125);
  EXPECT_EQ(m.items[1].nranks, 0u);
  EXPECT_TRUE(m.items[1].ranks.empty());
  EXPECT_EQ(m.items[1].flows.size(), 1u);
  EXPECT_TRUE(is_request(MsgType::kShareCollectives));
  EXPECT_FALSE(is_request(MsgType::kSharedFinishes));
  d = decode_frame(encode({5, ShareCollectives{3, std::nullopt, {SharedItem{1, 0, 2, {1}, {}}}}}));
  ASSERT_TRUE(d.frame);
  EXPECT_FALSE(std::get<ShareCollectives>(d.frame->body).floor);
  EXPECT_TRUE(m.released.empty());
  // Ids released (protocol 8: the NCCL plugin's flows no buffer names any more).
  d = decode_frame(encode({7, ShareCollectives{(2 << 20) + 1, 1.5, {}, {4, 9, ~0ull}}}));
  ASSERT_TRUE(d.frame) << to_string(d.error);
  EXPECT_EQ(std::get<ShareCollectives>(d.frame->body).released, (std::vector<EventId>{4, 9, ~0ull}));

  d = decode_frame(encode({6, SharedFinishes{9, {{1.25, 8}, {std::nullopt, 3}}}}));
  ASSERT_TRUE(d.frame);
  const auto& r = std::get<SharedFinishes>(d.frame->body);
  EXPECT_EQ(r.registered, 9u);
  ASSERT_EQ(r.answers.size(), 2u);
  EXPECT_EQ(r.answers[0].finish, 1.25);
  EXPECT_EQ(r.answers[0].covered, 8u);
  EXPECT_FALSE(r.answers[1].finish);
  EXPECT_EQ(r.answers[1].covered, 3u);
}

TEST(Protocol, WireLayoutIsLittleEndianAsDocumented) {
  const std::vector<uint8_t> b = encode({0x0102030405060708ull, Query{0x1122334455667788ull}});
  ASSERT_EQ(b.size(), 4u + 16 + 8);
  EXPECT_EQ(b[0], 24);  // length
  EXPECT_EQ(b[1], 0);
  EXPECT_EQ(std::string(b.begin() + 4, b.begin() + 8), "VGPD");
  EXPECT_EQ(b[8], kVersion);
  EXPECT_EQ(b[10], static_cast<uint8_t>(MsgType::kQuery));
  EXPECT_EQ(b[12], 0x08);  // request id, low byte first
  EXPECT_EQ(b[19], 0x01);
  EXPECT_EQ(b[20], 0x88);  // event id
  EXPECT_EQ(b[27], 0x11);
}

TEST(Protocol, SplitFrameWaitsForWholeFramesAndSplitsAStream) {
  std::vector<uint8_t> stream;
  const auto samples = sample_frames();
  for (const Frame& f : samples) {
    auto b = encode(f);
    stream.insert(stream.end(), b.begin(), b.end());
  }
  // Every strict prefix of the first frame asks for more.
  const size_t first = encode(samples[0]).size();
  for (size_t n = 0; n < first; ++n) {
    DecodeError err;
    EXPECT_EQ(split_frame(std::span(stream).first(n), &err), 0u) << n;
    EXPECT_EQ(err, DecodeError::kNone) << n;
  }
  size_t off = 0, count = 0;
  while (off < stream.size()) {
    DecodeError err;
    const size_t n = split_frame(std::span(stream).subspan(off), &err);
    ASSERT_GT(n, 0u);
    ASSERT_TRUE(decode_frame(std::span(stream).subspan(off, n)).frame);
    off += n;
    ++count;
  }
  EXPECT_EQ(count, samples.size());
}

TEST(Protocol, RefusesBadLengthsAndHeaders) {
  DecodeError err;
  // A huge length is refused from the first 4 bytes, without waiting for the body.
  std::vector<uint8_t> b = {0xf0, 0xff, 0xff, 0xff};
  EXPECT_EQ(split_frame(b, &err), 0u);
  EXPECT_EQ(err, DecodeError::kTooLarge);
  b = {3, 0, 0, 0};
  split_frame(b, &err);
  EXPECT_EQ(err, DecodeError::kTooShort);
  // Garbage is refused as soon as its "magic" is visible.
  b = {20, 0, 0, 0, 'G', 'E', 'T', ' '};
  split_frame(b, &err);
  EXPECT_EQ(err, DecodeError::kBadMagic);

  const std::vector<uint8_t> good = encode({1, Query{1}});
  auto bad = good;
  bad[8] = static_cast<uint8_t>(kVersion + 1);  // another version
  Decoded d = decode_frame(bad);
  EXPECT_EQ(d.error, DecodeError::kBadVersion);
  EXPECT_EQ(d.version, kVersion + 1);
  EXPECT_EQ(d.request_id, 1u);
  bad = good;
  bad[10] = 0x77;  // type
  EXPECT_EQ(decode_error(bad), DecodeError::kUnknownType);
  bad = good;
  bad[10] = 0;
  EXPECT_EQ(decode_error(bad), DecodeError::kUnknownType);
  bad = good;
  bad.pop_back();  // frame shorter than its length says
  EXPECT_EQ(decode_error(bad), DecodeError::kTruncated);
  bad = good;
  put_u32(bad, 0, 16 + 4);  // the length leaves half of the id out
  bad.resize(4 + 16 + 4);
  EXPECT_EQ(decode_error(bad), DecodeError::kTruncated);
  bad = good;
  bad.push_back(0);
  put_u32(bad, 0, static_cast<uint32_t>(bad.size() - 4));  // a byte after the payload
  EXPECT_EQ(decode_error(bad), DecodeError::kTrailing);
  EXPECT_EQ(decode_error({}), DecodeError::kTooShort);
}

TEST(Protocol, RefusesLyingCountsWithoutAllocating) {
  FlowSpec flow;
  flow.after = {1};
  std::vector<uint8_t> b = encode({1, AddFlow{flow}});
  // The `after` count sits after src, dst, bytes, not_before: 4 + 16 + 4 + 4 + 8 + 8.
  const size_t count_at = 4 + 16 + 24;
  put_u32(b, count_at, 2);  // claims 2, carries 1 (+ the label's length field)
  EXPECT_EQ(decode_error(b), DecodeError::kBadCount);
  put_u32(b, count_at, kMaxAfter + 1);
  EXPECT_EQ(decode_error(b), DecodeError::kBadCount);
  put_u32(b, count_at, 0xffffffffu);
  EXPECT_EQ(decode_error(b), DecodeError::kBadCount);

  // AddFlows' flow count: over its cap, or more flows than the bytes left could hold.
  std::vector<uint8_t> many = encode({1, AddFlows{{flow, flow}}});
  put_u32(many, 4 + 16, 3);
  EXPECT_EQ(decode_error(many), DecodeError::kBadCount);
  put_u32(many, 4 + 16, kMaxFlowsPerCall + 1);
  EXPECT_EQ(decode_error(many), DecodeError::kBadCount);
  put_u32(many, 4 + 16, 1);  // one flow and another's bytes left over
  EXPECT_EQ(decode_error(many), DecodeError::kTrailing);

  // ShareCollectives: an item count over its cap or the bytes left; an item's nranks over its
  // cap, a rank count over nranks or the bytes left, a rank outside 0..nranks-1; a flow count
  // over the bytes left. Its fields: rank, has_floor, floor, then the item count at 4 + 16 + 13;
  // the first item's comm, seq, nranks, rank count, ranks, flow count after it.
  std::vector<uint8_t> sc = encode({1, ShareCollectives{5, 1.0, {SharedItem{9, 2, 4, {1, 3}, {flow}}}}});
  const size_t items_at = 4 + 16 + 4 + 1 + 8;
  const size_t nranks_at = items_at + 4 + 8 + 8, ranks_at = nranks_at + 4, flows_at = ranks_at + 4 + 8;
  std::vector<uint8_t> bad = sc;
  put_u32(bad, items_at, kMaxFlowsPerCall + 1);
  EXPECT_EQ(decode_error(bad), DecodeError::kBadCount);
  put_u32(bad, items_at, 0xffffffffu);
  EXPECT_EQ(decode_error(bad), DecodeError::kBadCount);
  bad = sc;
  put_u32(bad, items_at, 2);  // claims a second item the bytes cannot hold
  EXPECT_EQ(decode_error(bad), DecodeError::kTruncated);
  bad = sc;
  put_u32(bad, nranks_at, kMaxShareRanks + 1);
  EXPECT_EQ(decode_error(bad), DecodeError::kBadCount);
  bad = sc;
  put_u32(bad, nranks_at, 1);  // two ranks of a one-rank collective
  EXPECT_EQ(decode_error(bad), DecodeError::kBadCount);
  bad = sc;
  put_u32(bad, ranks_at, 0x7fffffffu);  // more ranks than bytes
  put_u32(bad, nranks_at, kMaxShareRanks);
  EXPECT_EQ(decode_error(bad), DecodeError::kBadCount);
  bad = sc;
  put_u32(bad, ranks_at + 8, 4);  // rank 4 of 4
  EXPECT_EQ(decode_error(bad), DecodeError::kBadValue);
  bad = sc;
  put_u32(bad, ranks_at + 4, 0xffffffffu);  // rank -1
  EXPECT_EQ(decode_error(bad), DecodeError::kBadValue);
  bad = sc;
  put_u32(bad, flows_at, 2);  // claims 2 flows, carries 1
  EXPECT_EQ(decode_error(bad), DecodeError::kBadCount);
  bad = sc;
  put_u32(bad, flows_at, kMaxFlowsPerCall + 1);
  EXPECT_EQ(decode_error(bad), DecodeError::kBadCount);
  // SharedFinishes: an answer count over the bytes left or its cap.
  std::vector<uint8_t> fin = encode({1, SharedFinishes{2, {{1.0, 1}, {2.0, 2}}}});
  put_u32(fin, 4 + 16 + 4, 3);
  EXPECT_EQ(decode_error(fin), DecodeError::kBadCount);
  put_u32(fin, 4 + 16 + 4, kMaxFlowsPerCall + 1);
  EXPECT_EQ(decode_error(fin), DecodeError::kBadCount);

  // A string length over its cap, and one past the bytes left.
  std::vector<uint8_t> h = encode({1, Hello{"j", 0, ""}});
  put_u32(h, 4 + 16, kMaxJobBytes + 1);
  EXPECT_EQ(decode_error(h), DecodeError::kBadCount);
  put_u32(h, 4 + 16, 200);
  EXPECT_EQ(decode_error(h), DecodeError::kTruncated);
}

TEST(Protocol, RefusesValuesOutOfDomain) {
  // NaN times in requests would poison the engine.
  std::vector<uint8_t> b = encode({1, SetRankFloor{0, 1.0}});
  const uint64_t nan = std::bit_cast<uint64_t>(std::nan(""));
  for (int i = 0; i < 8; ++i) b[4 + 16 + 4 + i] = static_cast<uint8_t>(nan >> (8 * i));
  EXPECT_EQ(decode_error(b), DecodeError::kBadValue);
  // ShareCollectives' floor is a time (no NaN) and its flag 0 or 1; so is each answer's flag.
  b = encode({1, ShareCollectives{1, 2.0, {SharedItem{1, 0, 2, {0}, {}}}}});
  std::vector<uint8_t> c = b;
  for (int i = 0; i < 8; ++i) c[4 + 16 + 4 + 1 + i] = static_cast<uint8_t>(nan >> (8 * i));
  EXPECT_EQ(decode_error(c), DecodeError::kBadValue);
  c = b;
  c[4 + 16 + 4] = 2;
  EXPECT_EQ(decode_error(c), DecodeError::kBadValue);
  c = encode({1, SharedFinishes{1, {{1.0, 1}}}});
  c[4 + 16 + 8] = 3;
  EXPECT_EQ(decode_error(c), DecodeError::kBadValue);
  // Flags are 0 or 1.
  b = encode({1, BoolReply{true}});
  b.back() = 2;
  EXPECT_EQ(decode_error(b), DecodeError::kBadValue);
  b = encode({1, IntervalReply{}});
  b[4 + 16] = 7;
  EXPECT_EQ(decode_error(b), DecodeError::kBadValue);
  // A timeline page cannot reach past the document it is part of.
  b = encode({1, TimelineReply{6, 4, "ab"}});
  b[4 + 16] = 5;  // total 5 < offset 4 + 2 bytes
  EXPECT_EQ(decode_error(b), DecodeError::kBadValue);
}

TEST(Protocol, EncoderRefusesWhatTheDecoderWould) {
  std::vector<uint8_t> out = {9, 9};
  FlowSpec flow;
  flow.after.assign(kMaxAfter + 1, 1);
  EXPECT_FALSE(append_frame(out, {1, AddFlow{flow}}));
  flow.after.clear();
  flow.label.assign(kMaxLabelBytes + 1, 'x');
  EXPECT_FALSE(append_frame(out, {1, AddFlow{flow}}));
  TaskSpec task;
  task.duration = std::nan("");
  EXPECT_FALSE(append_frame(out, {1, AddTask{task}}));
  EXPECT_FALSE(append_frame(out, {1, Hello{std::string(kMaxJobBytes + 1, 'j'), 0, ""}}));
  EXPECT_FALSE(append_frame(out, {1, TimelineReply{1, 0, "ab"}}));
  EXPECT_FALSE(append_frame(out, {1, AddFlows{std::vector<FlowSpec>(kMaxFlowsPerCall + 1)}}));
  EXPECT_FALSE(append_frame(out, {1, ShareCollectives{0, std::nullopt, {SharedItem{1, 0, 2, {2}, {}}}}}));  // rank 2 of 2
  EXPECT_FALSE(append_frame(out, {1, ShareCollectives{0, std::nullopt, {SharedItem{1, 0, 1, {0, 0}, {}}}}}));  // 2 of 1
  EXPECT_FALSE(append_frame(out, {1, ShareCollectives{0, std::nullopt, {SharedItem{1, 0, kMaxShareRanks + 1, {}, {}}}}}));
  EXPECT_FALSE(append_frame(out, {1, ShareCollectives{0, std::nan(""), {}}}));
  EXPECT_FALSE(append_frame(out, {1, ShareCollectives{0, std::nullopt,
                                                      {SharedItem{1, 0, 0, {}, std::vector<FlowSpec>(kMaxFlowsPerCall)},
                                                       SharedItem{1, 1, 0, {}, {FlowSpec{}}}}}}));  // flows over the cap
  EXPECT_FALSE(append_frame(out, {1, SharedFinishes{0, std::vector<SharedAnswer>(kMaxFlowsPerCall + 1)}}));
  EXPECT_EQ(out, (std::vector<uint8_t>{9, 9}));  // untouched
  // The largest legal label still goes.
  flow.label.assign(kMaxLabelBytes, 'x');
  EXPECT_TRUE(append_frame(out, {1, AddFlow{flow}}));
}

// Runs one input through everything a peer does with untrusted bytes. Decoded frames must
// re-encode to a fixed point (encode → decode → encode gives the same bytes).
void exercise(std::span<const uint8_t> input, size_t* decoded) {
  DecodeError err;
  const size_t n = split_frame(input, &err);
  ASSERT_LE(n, input.size());
  if (err != DecodeError::kNone) {
    ASSERT_EQ(n, 0u);
  }
  Decoded d = decode_frame(input);
  if (!d.frame) {
    ASSERT_NE(d.error, DecodeError::kNone);
    ASSERT_NE(std::string(to_string(d.error)), "");
    return;
  }
  ++*decoded;
  ASSERT_EQ(d.error, DecodeError::kNone);
  ASSERT_EQ(n, input.size());  // a decodable frame is exactly one split frame
  std::vector<uint8_t> once;
  ASSERT_TRUE(append_frame(once, *d.frame));
  Decoded again = decode_frame(once);
  ASSERT_TRUE(again.frame);
  std::vector<uint8_t> twice;
  ASSERT_TRUE(append_frame(twice, *again.frame));
  ASSERT_EQ(once, twice);
}

TEST(ProtocolFuzz, MutatedTruncatedAndRandomFramesFailCleanly) {
  std::mt19937_64 rng(0x76677064);  // fixed seed: failures reproduce
  std::vector<std::vector<uint8_t>> seeds;
  for (const Frame& f : sample_frames()) seeds.push_back(encode(f));
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  size_t decoded = 0;
  // VGPU_FUZZ_ROUNDS raises it for the fuzz phase of tests/run-all.
  const char* rounds_env = std::getenv("VGPU_FUZZ_ROUNDS");
  const long kRounds = rounds_env != nullptr && *rounds_env != '\0'
                           ? std::max(200000L, 100 * std::strtol(rounds_env, nullptr, 0))
                           : 200000L;
  for (long round = 0; round < kRounds; ++round) {
    std::vector<uint8_t> b = seeds[pick(seeds.size())];
    switch (round % 8) {
      case 0:  // flip a few bits
        for (int k = 0, m = 1 + pick(8); k < m; ++k) b[pick(b.size())] ^= 1u << pick(8);
        break;
      case 1:  // truncate
        b.resize(pick(b.size() + 1));
        break;
      case 2:  // random bytes appended (and sometimes the length fixed up to cover them)
        for (int k = 0, m = 1 + pick(64); k < m; ++k) b.push_back(static_cast<uint8_t>(rng()));
        if (rng() & 1) put_u32(b, 0, static_cast<uint32_t>(b.size() - 4));
        break;
      case 3:  // a lying u32 somewhere in the payload (counts and string lengths live there)
        if (b.size() >= 24) put_u32(b, 20 + pick(b.size() - 23), static_cast<uint32_t>(rng()));
        break;
      case 4:  // a random length prefix
        put_u32(b, 0, static_cast<uint32_t>(rng() >> (rng() % 32)));
        break;
      case 5:  // a random message type on a valid frame
        b[10] = static_cast<uint8_t>(rng());
        b[11] = static_cast<uint8_t>(pick(3));
        break;
      case 6: {  // pure noise, with the header sometimes intact
        b.assign(pick(96), 0);
        for (auto& x : b) x = static_cast<uint8_t>(rng());
        if (b.size() >= 20 && (rng() & 1)) {
          put_u32(b, 0, static_cast<uint32_t>(b.size() - 4));
          put_u32(b, 4, kMagic);
          b[8] = kVersion;
          b[9] = 0;
        }
        break;
      }
      default:  // splice two seeds
        if (b.size() > 20) {
          const auto& other = seeds[pick(seeds.size())];
          b.resize(20 + pick(b.size() - 20));
          if (other.size() > 20)
            b.insert(b.end(), other.begin() + 20 + pick(other.size() - 20), other.end());
        }
        break;
    }
    exercise(b, &decoded);
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "round " << round;
      return;
    }
  }
  // The mutations are not all fatal: some still decode, which exercises the encoder too.
  EXPECT_GT(decoded, 1000u);
  EXPECT_LT(decoded, static_cast<size_t>(kRounds));
}

}  // namespace
}  // namespace simcore::wire
