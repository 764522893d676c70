#include "protocol.h"

#include <cmath>
#include <type_traits>

#include "byte_io.h"

namespace simcore::wire {
namespace {

// --- payloads: one put/get pair per message, in the field order documented in protocol.h ------

void put_time(ByteWriter& w, Time t) {
  if (std::isnan(t)) w.fail();
  w.f64(t);
}
Time get_time(ByteReader& r) {
  const Time t = r.f64();
  if (std::isnan(t)) r.fail(DecodeError::kBadValue);
  return t;
}

void put(ByteWriter& w, const Hello& m) {
  w.str(m.job, kMaxJobBytes);
  w.i32(m.rank);
  w.str(m.token, kMaxTokenBytes);
}
void get(ByteReader& r, Hello& m) {
  m.job = r.str(kMaxJobBytes);
  m.rank = r.i32();
  m.token = r.str(kMaxTokenBytes);
}

void put_flow(ByteWriter& w, const FlowSpec& f) {
  w.i32(f.src_gpu);
  w.i32(f.dst_gpu);
  w.u64(f.bytes);
  put_time(w, f.not_before);
  w.u64_list(f.after, kMaxAfter);
  w.str(f.label, kMaxLabelBytes);
}
// Whether `n` items of at least `min_bytes` each, at most `cap`, can be what is left of the frame:
// a lying count is refused (kBadCount) before anything is allocated for it.
bool count_fits(ByteReader& r, uint64_t n, uint64_t cap, size_t min_bytes) {
  if (n <= cap && n * min_bytes <= r.remaining()) return true;
  r.fail(DecodeError::kBadCount);
  return false;
}

void get_flow(ByteReader& r, FlowSpec& f) {
  f.src_gpu = r.i32();
  f.dst_gpu = r.i32();
  f.bytes = r.u64();
  f.not_before = get_time(r);
  f.after = r.u64_list(kMaxAfter);
  f.label = r.str(kMaxLabelBytes);
}
// The fewest bytes one flow takes on the wire (empty `after` and label).
constexpr size_t kMinFlowBytes = 4 + 4 + 8 + 8 + 4 + 4;

void put(ByteWriter& w, const AddFlow& m) { put_flow(w, m.flow); }
void get(ByteReader& r, AddFlow& m) { get_flow(r, m.flow); }

void put(ByteWriter& w, const AddFlows& m) {
  if (m.flows.size() > kMaxFlowsPerCall) {
    w.fail();
    return;
  }
  w.u32(static_cast<uint32_t>(m.flows.size()));
  for (const FlowSpec& f : m.flows) put_flow(w, f);
}
void get(ByteReader& r, AddFlows& m) {
  const uint32_t n = r.u32();
  if (!r.ok()) return;
  if (!count_fits(r, n, kMaxFlowsPerCall, kMinFlowBytes)) return;
  m.flows.resize(n);
  for (FlowSpec& f : m.flows) {
    get_flow(r, f);
    if (!r.ok()) return;
  }
}

void put(ByteWriter& w, const EventsReply& m) { w.u64_list(m.ids, kMaxFlowsPerCall); }
void get(ByteReader& r, EventsReply& m) { m.ids = r.u64_list(kMaxFlowsPerCall); }

void put(ByteWriter& w, const ShareCollectives& m) {
  uint64_t flows = 0;
  for (const SharedItem& it : m.items) flows += it.flows.size();
  if (m.items.size() > kMaxFlowsPerCall || flows > kMaxFlowsPerCall) {
    w.fail();
    return;
  }
  w.i32(m.rank);
  w.u8(m.floor ? 1 : 0);
  put_time(w, m.floor.value_or(0));
  w.u32(static_cast<uint32_t>(m.items.size()));
  for (const SharedItem& it : m.items) {
    if (it.nranks > kMaxShareRanks || it.ranks.size() > it.nranks) {
      w.fail();
      return;
    }
    w.u64(it.comm);
    w.u64(it.seq);
    w.u32(it.nranks);
    w.u32(static_cast<uint32_t>(it.ranks.size()));
    for (int32_t r : it.ranks) {
      if (r < 0 || static_cast<uint32_t>(r) >= it.nranks) w.fail();
      w.i32(r);
    }
    w.u32(static_cast<uint32_t>(it.flows.size()));
    for (const FlowSpec& f : it.flows) put_flow(w, f);
  }
  w.u64_list(m.released, kMaxFlowsPerCall);
}
// The fewest bytes one item takes on the wire (no ranks, no flows).
constexpr size_t kMinItemBytes = 8 + 8 + 4 + 4 + 4;
void get(ByteReader& r, ShareCollectives& m) {
  m.rank = r.i32();
  const bool has_floor = r.flag();
  const Time floor = get_time(r);
  if (has_floor) m.floor = floor;
  const uint32_t n = r.u32();
  if (!r.ok()) return;
  if (!count_fits(r, n, kMaxFlowsPerCall, kMinItemBytes)) return;
  m.items.resize(n);
  uint64_t flows = 0;
  for (SharedItem& it : m.items) {
    it.comm = r.u64();
    it.seq = r.u64();
    it.nranks = r.u32();
    const uint32_t ranks = r.u32();
    if (!r.ok()) return;
    if (!count_fits(r, it.nranks, kMaxShareRanks, 0) || !count_fits(r, ranks, it.nranks, 4)) return;
    it.ranks.resize(ranks);
    for (int32_t& k : it.ranks) {
      k = r.i32();
      if (r.ok() && (k < 0 || static_cast<uint32_t>(k) >= it.nranks)) r.fail(DecodeError::kBadValue);
    }
    const uint32_t count = r.u32();
    if (!r.ok()) return;
    flows += count;  // the request's flows together, against one AddFlows's cap
    if (!count_fits(r, flows, kMaxFlowsPerCall, 0) || !count_fits(r, count, kMaxFlowsPerCall, kMinFlowBytes)) return;
    it.flows.resize(count);
    for (FlowSpec& f : it.flows) {
      get_flow(r, f);
      if (!r.ok()) return;
    }
  }
  m.released = r.u64_list(kMaxFlowsPerCall);
}

// One answer an item: u8 has, f64 finish (the engine's value as-is, like IntervalReply), u32 covered.
constexpr size_t kAnswerBytes = 1 + 8 + 4;
void put(ByteWriter& w, const SharedFinishes& m) {
  if (m.answers.size() > kMaxFlowsPerCall) {
    w.fail();
    return;
  }
  w.u32(m.registered);
  w.u32(static_cast<uint32_t>(m.answers.size()));
  for (const SharedAnswer& a : m.answers) {
    w.u8(a.finish ? 1 : 0);
    w.f64(a.finish.value_or(0));
    w.u32(a.covered);
  }
}
void get(ByteReader& r, SharedFinishes& m) {
  m.registered = r.u32();
  const uint32_t n = r.u32();
  if (!r.ok()) return;
  if (!count_fits(r, n, kMaxFlowsPerCall, kAnswerBytes)) return;
  m.answers.resize(n);
  for (SharedAnswer& a : m.answers) {
    const bool has = r.flag();
    const Time t = r.f64();
    if (has) a.finish = t;
    a.covered = r.u32();
  }
}

void put(ByteWriter& w, const AddTask& m) {
  w.i32(m.task.gpu);
  w.i32(m.task.lane);
  put_time(w, m.task.duration);
  put_time(w, m.task.not_before);
  w.u64_list(m.task.after, kMaxAfter);
  w.str(m.task.label, kMaxLabelBytes);
  put_time(w, m.task.carried);
}
void get(ByteReader& r, AddTask& m) {
  m.task.gpu = r.i32();
  m.task.lane = r.i32();
  m.task.duration = get_time(r);
  m.task.not_before = get_time(r);
  m.task.after = r.u64_list(kMaxAfter);
  m.task.label = r.str(kMaxLabelBytes);
  m.task.carried = get_time(r);
}

// Messages that carry one event id.
template <class M>
concept IdMessage = std::is_same_v<M, Query> || std::is_same_v<M, IsFinal> ||
                    std::is_same_v<M, WaitFinal> || std::is_same_v<M, EventReply>;
template <IdMessage M> void put(ByteWriter& w, const M& m) { w.u64(m.id); }
template <IdMessage M> void get(ByteReader& r, M& m) { m.id = r.u64(); }

// Messages that carry one rank.
template <class M>
concept RankMessage = std::is_same_v<M, RegisterRank> || std::is_same_v<M, UnregisterRank>;
template <RankMessage M> void put(ByteWriter& w, const M& m) { w.i32(m.rank); }
template <RankMessage M> void get(ByteReader& r, M& m) { m.rank = r.i32(); }

void put(ByteWriter& w, const SetRankFloor& m) {
  w.i32(m.rank);
  put_time(w, m.t);
}
void get(ByteReader& r, SetRankFloor& m) {
  m.rank = r.i32();
  m.t = get_time(r);
}

void put(ByteWriter& w, const TimelineRequest& m) {
  w.u64(m.offset);
  w.u32(m.max_bytes);
}
void get(ByteReader& r, TimelineRequest& m) {
  m.offset = r.u64();
  m.max_bytes = r.u32();
}

// Messages without a payload.
void put(ByteWriter& w, const WaitFinalForRank& m) {
  w.u64(m.id);
  w.i32(m.rank);
}
void get(ByteReader& r, WaitFinalForRank& m) {
  m.id = r.u64();
  m.rank = r.i32();
}

template <class M>
concept EmptyMessage =
    std::is_same_v<M, Shutdown> || std::is_same_v<M, Ack> || std::is_same_v<M, StatsRequest>;
template <EmptyMessage M> void put(ByteWriter&, const M&) {}
template <EmptyMessage M> void get(ByteReader&, M&) {}

void put(ByteWriter& w, const HelloReply& m) {
  w.str(m.job, kMaxJobBytes);
  w.u32(m.pid);
}
void get(ByteReader& r, HelloReply& m) {
  m.job = r.str(kMaxJobBytes);
  m.pid = r.u32();
}

// Replies carry engine results as they are: NaN is not refused here (it is the engine's answer).
void put(ByteWriter& w, const IntervalReply& m) {
  w.u8(m.interval ? 1 : 0);
  w.f64(m.interval ? m.interval->start : 0);
  w.f64(m.interval ? m.interval->finish : 0);
}
void get(ByteReader& r, IntervalReply& m) {
  const bool has = r.flag();
  Interval iv;
  iv.start = r.f64();
  iv.finish = r.f64();
  if (has) m.interval = iv;
}

void put(ByteWriter& w, const BoolReply& m) { w.u8(m.value ? 1 : 0); }
void get(ByteReader& r, BoolReply& m) { m.value = r.flag(); }

void put(ByteWriter& w, const TimelineReply& m) {
  if (m.offset > m.total || m.chunk.size() > m.total - m.offset) w.fail();
  w.u64(m.total);
  w.u64(m.offset);
  w.str(m.chunk, kMaxChunkBytes);
}
void get(ByteReader& r, TimelineReply& m) {
  m.total = r.u64();
  m.offset = r.u64();
  m.chunk = r.str(kMaxChunkBytes);
  if (r.ok() && (m.offset > m.total || m.chunk.size() > m.total - m.offset))
    r.fail(DecodeError::kBadValue);
}

// The counters in Engine::Stats declaration order, then the floor.
static_assert(sizeof(Engine::Stats) == 15 * sizeof(uint64_t),
              "Engine::Stats changed: update StatsReply here and in protocol.h");
template <class S, class F>
void each_counter(S& s, F&& f) {
  f(s.events_submitted);
  f(s.events_live);
  f(s.flow_segments);
  f(s.history_bytes);
  f(s.result_bytes);
  f(s.timeline_bytes);
  f(s.rollbacks);
  f(s.replayed_events);
  f(s.solves);
  f(s.solved_flows);
  f(s.group_members_apart);
  f(s.group_links);
  f(s.group_links_expanded);
  f(s.stale_items_dropped);
}
void put(ByteWriter& w, const StatsReply& m) {
  each_counter(m.stats, [&w](uint64_t v) { w.u64(v); });
  w.f64(m.stats.floor);
}
void get(ByteReader& r, StatsReply& m) {
  each_counter(m.stats, [&r](uint64_t& v) { v = r.u64(); });
  m.stats.floor = r.f64();
}

void put(ByteWriter& w, const ErrorReply& m) {
  w.u16(static_cast<uint16_t>(m.code));
  w.str(m.message, kMaxMessageBytes);
}
void get(ByteReader& r, ErrorReply& m) {
  m.code = static_cast<ErrorCode>(r.u16());
  m.message = r.str(kMaxMessageBytes);
}

// The type code → variant alternative table, walked at compile time.
template <size_t I = 0>
bool decode_body(MsgType type, ByteReader& r, Body& out) {
  if constexpr (I == std::variant_size_v<Body>) {
    return false;
  } else {
    using M = std::variant_alternative_t<I, Body>;
    if (M::kType != type) return decode_body<I + 1>(type, r, out);
    M m;
    get(r, m);
    out = std::move(m);
    return true;
  }
}

}  // namespace

MsgType type_of(const Body& body) {
  return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kType; }, body);
}

const char* name_of(MsgType t) {
  switch (t) {
    case MsgType::kHello: return "Hello";
    case MsgType::kAddFlow: return "AddFlow";
    case MsgType::kAddTask: return "AddTask";
    case MsgType::kQuery: return "Query";
    case MsgType::kIsFinal: return "IsFinal";
    case MsgType::kRegisterRank: return "RegisterRank";
    case MsgType::kSetRankFloor: return "SetRankFloor";
    case MsgType::kUnregisterRank: return "UnregisterRank";
    case MsgType::kWaitFinal: return "WaitFinal";
    case MsgType::kTimeline: return "Timeline";
    case MsgType::kShutdown: return "Shutdown";
    case MsgType::kWaitFinalForRank: return "WaitFinalForRank";
    case MsgType::kStats: return "Stats";
    case MsgType::kAddFlows: return "AddFlows";
    case MsgType::kShareCollectives: return "ShareCollectives";
    case MsgType::kHelloReply: return "HelloReply";
    case MsgType::kEventReply: return "EventReply";
    case MsgType::kIntervalReply: return "IntervalReply";
    case MsgType::kBoolReply: return "BoolReply";
    case MsgType::kAck: return "Ack";
    case MsgType::kTimelineReply: return "TimelineReply";
    case MsgType::kStatsReply: return "StatsReply";
    case MsgType::kEventsReply: return "EventsReply";
    case MsgType::kSharedFinishes: return "SharedFinishes";
    case MsgType::kError: return "Error";
  }
  return "unknown";
}

bool is_request(MsgType t) {
  return static_cast<uint16_t>(t) >= static_cast<uint16_t>(MsgType::kHello) &&
         static_cast<uint16_t>(t) <= static_cast<uint16_t>(MsgType::kShareCollectives);
}

bool append_frame(std::vector<uint8_t>& out, const Frame& frame) {
  const size_t start = out.size();
  ByteWriter w(out);
  w.u32(0);  // length, patched below
  w.u32(kMagic);
  w.u16(kVersion);
  w.u16(static_cast<uint16_t>(type_of(frame.body)));
  w.u64(frame.request_id);
  std::visit([&w](const auto& m) { put(w, m); }, frame.body);
  const size_t body = out.size() - start - kLengthBytes;
  if (!w.ok() || body > kMaxFrameBytes) {
    out.resize(start);
    return false;
  }
  w.patch_u32(start, static_cast<uint32_t>(body));
  return true;
}

const char* to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kNone: return "no error";
    case DecodeError::kTooShort: return "frame shorter than its header";
    case DecodeError::kTooLarge: return "frame length over the 16 MiB cap";
    case DecodeError::kBadMagic: return "bad magic (not a vgpud frame)";
    case DecodeError::kBadVersion: return "unsupported protocol version";
    case DecodeError::kUnknownType: return "unknown message type";
    case DecodeError::kTruncated: return "payload ends inside a field";
    case DecodeError::kBadCount: return "count or length over its cap or the bytes left";
    case DecodeError::kBadValue: return "field value out of range";
    case DecodeError::kTrailing: return "bytes left after the payload";
  }
  return "unknown decode error";
}

size_t split_frame(std::span<const uint8_t> buf, DecodeError* error) {
  *error = DecodeError::kNone;
  ByteReader r(buf);
  if (buf.size() < kLengthBytes) return 0;
  const uint32_t len = r.u32();
  if (len < kHeaderBytes) {
    *error = DecodeError::kTooShort;
    return 0;
  }
  if (len > kMaxFrameBytes) {
    *error = DecodeError::kTooLarge;
    return 0;
  }
  if (buf.size() >= kLengthBytes + 4 && r.u32() != kMagic) {
    *error = DecodeError::kBadMagic;
    return 0;
  }
  if (buf.size() < kLengthBytes + len) return 0;
  return kLengthBytes + len;
}

Decoded decode_frame(std::span<const uint8_t> frame) {
  Decoded d;
  ByteReader r(frame);
  const uint32_t len = r.u32();
  if (!r.ok() || len < kHeaderBytes || frame.size() < kLengthBytes + kHeaderBytes) {
    d.error = DecodeError::kTooShort;
    return d;
  }
  if (len > kMaxFrameBytes) {
    d.error = DecodeError::kTooLarge;
    return d;
  }
  if (frame.size() != kLengthBytes + len) {
    d.error = frame.size() < kLengthBytes + len ? DecodeError::kTruncated : DecodeError::kTrailing;
    return d;
  }
  const uint32_t magic = r.u32();
  d.version = r.u16();
  const auto type = static_cast<MsgType>(r.u16());
  d.request_id = r.u64();
  if (magic != kMagic) {
    d.error = DecodeError::kBadMagic;
    return d;
  }
  if (d.version != kVersion) {
    d.error = DecodeError::kBadVersion;
    return d;
  }
  Body body;
  if (!decode_body(type, r, body)) {
    d.error = DecodeError::kUnknownType;
    return d;
  }
  if (!r.ok()) {
    d.error = r.error();
    return d;
  }
  if (r.remaining() != 0) {
    d.error = DecodeError::kTrailing;
    return d;
  }
  d.frame = Frame{d.request_id, std::move(body)};
  return d;
}

}  // namespace simcore::wire
