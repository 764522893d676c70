// The vgpud wire protocol: how rank processes talk to the per-job simulation daemon.
//
// One connection carries many requests at once (a client multiplexes its threads on it); every
// reply names the request it answers, and replies may come out of order (a wait_final is
// answered only once its event is final, while later requests are answered at once).
//
// Frame (all integers little-endian, fixed width; doubles are IEEE-754 binary64 bit patterns
// sent as u64):
//
//   u32 length        bytes that follow this field: header + payload, kHeaderBytes..kMaxFrameBytes
//   u32 magic         kMagic, the bytes "VGPD"
//   u16 version       kVersion; a peer that speaks another version gets an Error and is closed
//   u16 type          MsgType
//   u64 request_id    chosen by the client, echoed in the reply; 0 in unsolicited errors
//   ...payload        per type, below; it must be consumed exactly (no trailing bytes)
//
// Payload building blocks: str = u32 byte count + bytes (each string has its own cap);
// ids = u32 count + count × u64 (count <= kMaxAfter, and never more than the bytes left).
//
//   Requests                               Reply
//   Hello          str job, i32 rank,      HelloReply  str job, u32 daemon pid
//                  str token
//   AddFlow        i32 src, i32 dst,       EventReply  u64 id (0 = refused, kNoEvent)
//                  u64 bytes, f64 not_before, ids after, str label
//   AddFlows       u32 count, then count × EventsReply  ids: u32 count + count × u64, one per
//                  AddFlow's fields        flow in order (0 = refused); count <= kMaxFlowsPerCall
//                                          (Engine::add_flows: like flows become flow groups)
//   AddTask        i32 gpu, i32 lane,      EventReply
//                  f64 duration, f64 not_before, ids after, str label, f64 carried
//   Query          u64 id                  IntervalReply  u8 has (0|1), f64 start, f64 finish
//   IsFinal        u64 id                  BoolReply      u8 value (0|1)
//   RegisterRank   i32 rank                Ack            (empty)
//   SetRankFloor   i32 rank, f64 t         Ack
//   UnregisterRank i32 rank                Ack
//   WaitFinal      u64 id                  IntervalReply  (sent when final, or has=0 at shutdown)
//   WaitFinalForRank u64 id, i32 rank      IntervalReply  (likewise)
//   Timeline       u64 offset, u32 max     TimelineReply  u64 total, u64 offset, str chunk
//   Stats          (empty)                 StatsReply     13 × u64 (Engine::Stats counters in
//                                                         declaration order), f64 floor
//   Shutdown       (empty)                 Ack, then the daemon stops
//   ShareCollectives i32 rank,         SharedFinishes  u32 registered, u32 count, then count ×
//                  u8 has_floor, f64 floor,              (u8 has, f64 finish, u32 covered): one per
//                  u32 count, then count × item:         item, in order
//                  u64 comm, u64 seq, u32 nranks, u32 ranks, ranks × i32, u32 flows, flows ×
//                  AddFlow's fields, then u32 released,
//                  released × u64 id
//                  (a rank process's collectives of one NCCL group, one request: each item's flows
//                  are placed, as AddFlows; `rank`'s floor moves (with has_floor, a rank this
//                  connection registered; Engine::set_rank_floor) after them; the reply is held
//                  until every item's key (comm, seq) is covered: its ranks over all connections'
//                  items of that key make 0..nranks-1 (an item with nranks 0 waits for no rank;
//                  it is answered with its request's keyed items: share_barrier.h).
//                  Each answer: the latest finish of every flow of its key, all connections'
//                  (has=0 when none was placed), and how many of its ranks placed theirs. A key not covered
//                  within kShareTimeoutS (real time) is answered from what was placed then, with a
//                  line in vgpud's log; the ranks that never came are not waited for again on
//                  that comm. A key's flows are released once its answers went out. Caps: items
//                  and all items' flows <= kMaxFlowsPerCall, nranks <= kMaxShareRanks, each rank
//                  in 0..nranks-1. `released`: ids this connection will never name again
//                  (Engine::release), released after the items' flows are placed; at most
//                  kMaxFlowsPerCall.)
//   any request that fails                 Error          u16 code, str message
//
// Timeline JSON can exceed one frame: offset 0 takes a fresh snapshot (kept per connection),
// later offsets page through that snapshot, so a client reassembles one consistent document;
// `max` caps a page (0: kMaxChunkBytes).
//
// The daemon handles one connection's requests in the order they arrive, so fire-and-forget
// ordering holds (a SetRankFloor sent before an AddFlow is applied before it).
//
// Session rules: Hello first (with a matching job id and, over TCP, the job's token), then any
// request. Time values in requests must not be NaN. Anything malformed ends the connection with
// an Error frame; the daemon and other clients carry on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "simcore/engine.h"

namespace simcore::wire {

inline constexpr uint32_t kMagic = 0x44504756;   // 'V' 'G' 'P' 'D' in wire (little-endian) order
// 2: StatsReply carries group_members_apart; 3: AddFlows / EventsReply; 4: StatsReply carries
// group_links and group_links_expanded; 5: StatsReply carries stale_items_dropped; 6:
// FinishRelease / FinishesReply; 7: ShareCollectives / SharedFinishes replace them (a rank
// process's collectives placed, held until every rank of each placed its flows, answered, its
// floor moved, in one request: vgpu/sim/exec/nccl_shared_fabric.h); 8: ShareCollectives carries
// ids released (the NCCL plugin's transfers, read by Query, released once no later flow names
// them: nccl_plugin/core/flow_pins.h); 9: AddTask carries what the task carried (TaskSpec::carried,
// for the timeline).
inline constexpr uint16_t kVersion = 9;
inline constexpr size_t kLengthBytes = 4;        // the u32 length prefix
inline constexpr size_t kHeaderBytes = 16;       // magic + version + type + request id

// Caps: a decoder never allocates more than a frame's own size, and a frame is at most 16 MiB.
inline constexpr uint32_t kMaxFrameBytes = 16u << 20;
inline constexpr uint32_t kMaxAfter = 1u << 16;         // dependencies of one event
inline constexpr uint32_t kMaxFlowsPerCall = 1u << 16;  // flows of one AddFlows
inline constexpr uint32_t kMaxLabelBytes = 64u << 10;   // C++ kernel names can be long
inline constexpr uint32_t kMaxJobBytes = 256;
inline constexpr uint32_t kMaxTokenBytes = 1024;
inline constexpr uint32_t kMaxMessageBytes = 4096;      // error text
inline constexpr uint32_t kMaxChunkBytes = 8u << 20;    // timeline page
inline constexpr uint32_t kMaxShareRanks = 1u << 16;    // ranks of one ShareCollectives key
inline constexpr double kShareTimeoutS = 60;            // a key's wait for its other ranks

enum class MsgType : uint16_t {
  kHello = 1,
  kAddFlow = 2,
  kAddTask = 3,
  kQuery = 4,
  kIsFinal = 5,
  kRegisterRank = 6,
  kSetRankFloor = 7,
  kUnregisterRank = 8,
  kWaitFinal = 9,
  kTimeline = 10,
  kShutdown = 11,
  kWaitFinalForRank = 12,
  kStats = 13,
  kAddFlows = 14,
  kShareCollectives = 15,
  kHelloReply = 0x101,
  kEventReply = 0x102,
  kIntervalReply = 0x103,
  kBoolReply = 0x104,
  kAck = 0x105,
  kTimelineReply = 0x106,
  kStatsReply = 0x107,
  kEventsReply = 0x108,
  kSharedFinishes = 0x109,
  kError = 0x1ff,
};

enum class ErrorCode : uint16_t {
  kBadFrame = 1,       // could not be decoded
  kBadVersion = 2,
  kNotGreeted = 3,     // a request before Hello
  kWrongJob = 4,
  kBadToken = 5,
  kForbidden = 6,      // peer is another user
  kUnexpected = 7,     // a reply type sent as a request, a second Hello, ...
  kBadRequest = 8,     // well-formed but refused (e.g. timeline offset past the end)
  kOverloaded = 9,     // too many pending waits on this connection
  kInternal = 10,      // the engine threw
};

// --- messages: one struct per type; kType ties each to its code ---------------------------------
struct Hello { static constexpr MsgType kType = MsgType::kHello;
  std::string job; int32_t rank = -1; std::string token; };
struct AddFlow { static constexpr MsgType kType = MsgType::kAddFlow; FlowSpec flow; };
struct AddTask { static constexpr MsgType kType = MsgType::kAddTask; TaskSpec task; };
// Consecutive flows of one rank, submitted together (Engine::add_flows).
struct AddFlows { static constexpr MsgType kType = MsgType::kAddFlows; std::vector<FlowSpec> flows; };
struct Query { static constexpr MsgType kType = MsgType::kQuery; EventId id = 0; };
struct IsFinal { static constexpr MsgType kType = MsgType::kIsFinal; EventId id = 0; };
struct RegisterRank { static constexpr MsgType kType = MsgType::kRegisterRank; int32_t rank = 0; };
struct SetRankFloor { static constexpr MsgType kType = MsgType::kSetRankFloor;
  int32_t rank = 0; Time t = 0; };
struct UnregisterRank { static constexpr MsgType kType = MsgType::kUnregisterRank; int32_t rank = 0; };
struct WaitFinal { static constexpr MsgType kType = MsgType::kWaitFinal; EventId id = 0; };
struct TimelineRequest { static constexpr MsgType kType = MsgType::kTimeline;
  uint64_t offset = 0; uint32_t max_bytes = 0; };
struct Shutdown { static constexpr MsgType kType = MsgType::kShutdown; };
struct WaitFinalForRank { static constexpr MsgType kType = MsgType::kWaitFinalForRank;
  EventId id = 0; int32_t rank = 0; };
struct StatsRequest { static constexpr MsgType kType = MsgType::kStats; };

struct HelloReply { static constexpr MsgType kType = MsgType::kHelloReply;
  std::string job; uint32_t pid = 0; };
struct EventReply { static constexpr MsgType kType = MsgType::kEventReply; EventId id = 0; };
struct IntervalReply { static constexpr MsgType kType = MsgType::kIntervalReply;
  std::optional<Interval> interval; };
struct BoolReply { static constexpr MsgType kType = MsgType::kBoolReply; bool value = false; };
struct Ack { static constexpr MsgType kType = MsgType::kAck; };
struct TimelineReply { static constexpr MsgType kType = MsgType::kTimelineReply;
  uint64_t total = 0; uint64_t offset = 0; std::string chunk; };
struct StatsReply { static constexpr MsgType kType = MsgType::kStatsReply; Engine::Stats stats; };
struct EventsReply { static constexpr MsgType kType = MsgType::kEventsReply; std::vector<EventId> ids; };
// One collective's part of a ShareCollectives: its key, the ranks this connection places, their flows.
struct SharedItem {
  uint64_t comm = 0;
  uint64_t seq = 0;
  uint32_t nranks = 0;
  std::vector<int32_t> ranks;
  std::vector<FlowSpec> flows;
};
struct ShareCollectives { static constexpr MsgType kType = MsgType::kShareCollectives;
  int32_t rank = 0; std::optional<Time> floor; std::vector<SharedItem> items; std::vector<EventId> released; };
struct SharedAnswer {
  std::optional<Time> finish;  // the latest of every connection's flows of the key
  uint32_t covered = 0;        // the key's ranks that placed flows when it was answered
};
struct SharedFinishes { static constexpr MsgType kType = MsgType::kSharedFinishes;
  uint32_t registered = 0; std::vector<SharedAnswer> answers; };
struct ErrorReply { static constexpr MsgType kType = MsgType::kError;
  ErrorCode code = ErrorCode::kBadFrame; std::string message; };

using Body = std::variant<Hello, AddFlow, AddTask, Query, IsFinal, RegisterRank, SetRankFloor,
                          UnregisterRank, WaitFinal, TimelineRequest, Shutdown, WaitFinalForRank,
                          StatsRequest, HelloReply, EventReply, IntervalReply, BoolReply, Ack,
                          TimelineReply, StatsReply, ErrorReply, AddFlows, EventsReply,
                          ShareCollectives, SharedFinishes>;

struct Frame {
  uint64_t request_id = 0;
  Body body;
};

MsgType type_of(const Body& body);
bool is_request(MsgType t);
// The message's name as protocol.h writes it ("AddFlows"), for logs.
const char* name_of(MsgType t);

// --- encoding -------------------------------------------------------------------------------------
// Appends one whole frame (length prefix included) to `out`. Returns false, leaving `out` as it
// was, when the message breaks a cap (too many dependencies, an over-long string, NaN time in a
// request): the peer's decoder would refuse it anyway.
bool append_frame(std::vector<uint8_t>& out, const Frame& frame);

// --- decoding -------------------------------------------------------------------------------------
enum class DecodeError : uint8_t {
  kNone = 0,
  kTooShort,      // length below the header size
  kTooLarge,      // length above kMaxFrameBytes
  kBadMagic,
  kBadVersion,
  kUnknownType,
  kTruncated,     // payload ends inside a field
  kBadCount,      // a count or string length over its cap or over the bytes left
  kBadValue,      // a field out of its domain (NaN time, flag not 0/1, chunk past total)
  kTrailing,      // bytes left after the payload
};
const char* to_string(DecodeError e);

// Stream framing: looks only at the front of `buf`. Returns the size of the whole first frame
// once it is all there, 0 when more bytes are needed, or sets *error (then the stream is beyond
// repair: the length or magic is wrong). Checks the magic as soon as it has arrived, so garbage
// is refused without waiting for a bogus 16 MiB.
size_t split_frame(std::span<const uint8_t> buf, DecodeError* error);

struct Decoded {
  std::optional<Frame> frame;
  DecodeError error = DecodeError::kNone;
  uint64_t request_id = 0;   // valid whenever the header was readable, even on error
  uint16_t version = 0;      // likewise (for a precise version-mismatch message)
};
// Decodes exactly one whole frame, as delimited by split_frame.
Decoded decode_frame(std::span<const uint8_t> frame);

}  // namespace simcore::wire
