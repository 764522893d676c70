// The objects behind stream and event handles, shared by stream.cpp's scheduler, the
// timeline and capture. Every mutable field is guarded by StreamManager's one mutex.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "front/driver/cuda_api.h"
#include "simcore/engine.h"
#include "timing/stream_order.h"

namespace vgpu {

// One op of a stream: its real effect and its simcore event. The op owns its events: every
// holder of an event id (the stream's last op, a recorded event) holds the op, so when the last
// holder lets go the engine is told it may forget the ids (simcore Engine::release), and a run
// of 10^8 launches does not keep 20 bytes of engine results for each.
struct Op {
  std::function<void()> execute;
  std::function<bool()> ready;              // polled precondition (cuStreamWaitValue*)
  bool on_worker = false;                   // host function: never on the caller's thread
  std::vector<std::shared_ptr<Op>> waits;   // other streams' ops that must be done first
  simcore::EventId vid = simcore::kNoEvent;  // its point in virtual time
  simcore::EventId own_vid = simcore::kNoEvent;  // its own event when `vid` is a graph's end
  simcore::Engine* engine = nullptr;        // where its events live (the driver's: never destroyed)
  bool done = false;

  Op() = default;
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  ~Op() {
    if (engine == nullptr) return;
    if (vid != simcore::kNoEvent) engine->release(vid);
    if (own_vid != simcore::kNoEvent && own_vid != vid) engine->release(own_vid);
  }
};

// A stream's last op as the stream order (timing/stream_order.h) keeps it: the op (for the real
// order of effects) and its point in virtual time, which after a graph launch is the graph's end.
struct StreamLast {
  std::shared_ptr<Op> op;
  simcore::EventId vid = simcore::kNoEvent;
};

struct Stream;

// One stream capture: the graph it fills and the streams that joined it.
struct CaptureSession {
  CUgraph graph = nullptr;
  bool own_graph = true;  // false for cuStreamBeginCaptureToGraph
  std::weak_ptr<Stream> origin;
  std::vector<std::weak_ptr<Stream>> members;
  uint64_t id = 0;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  bool invalidated = false;
  bool ended = false;  // cuStreamEndCapture ran: events recorded in it no longer join it
};

struct Stream {
  enum class Role { user, legacy, per_thread };
  CUstream handle = nullptr;
  CUcontext ctx = nullptr;
  int device = 0;
  Role role = Role::user;
  unsigned int flags = 0;
  int priority = 0;
  unsigned long long id = 0;
  int lane = 0;  // simcore timeline lane

  std::deque<std::shared_ptr<Op>> queue;  // not yet done; the head may be running
  bool running = false;                   // an op of this stream is executing or scheduled
  bool destroyed = false;
  StreamLast last_when_destroyed;  // its last op once destroyed (the stream order forgot it)
  // The events of its last kLaunchQueueDepth ops (stream.cpp): a launch past that many waits,
  // in virtual time, for the oldest to finish, as a real driver's full launch queue blocks.
  std::deque<simcore::EventId> in_flight;
  std::map<int, CUstreamAttrValue> attrs;

  std::shared_ptr<CaptureSession> capture;
  std::vector<CUgraphNode> frontier;      // capture: what the next node depends on
  std::vector<CUgraphNode> frontier_out;  // what cuStreamGetCaptureInfo handed out

  // Its place in the default-stream barrier (timing/stream_order.h); its last op is kept by the
  // stream order, under order_key() (StreamManager's `order`).
  timing::StreamKind kind() const {
    const timing::StreamArg named = role == Role::legacy       ? timing::StreamArg::legacy
                                    : role == Role::per_thread ? timing::StreamArg::per_thread
                                                               : timing::StreamArg::handle;
    return timing::stream_kind(named, (flags & CU_STREAM_NON_BLOCKING) != 0);
  }
  // Blocking streams (the legacy default stream among them) synchronize with the legacy one.
  bool blocking() const { return kind() != timing::StreamKind::non_blocking; }
  timing::StreamOrder<StreamLast>::Key order_key() const { return {ctx, handle}; }
};

struct Event {
  CUevent handle = nullptr;
  unsigned int flags = 0;
  CUcontext ctx = nullptr;
  int device = 0;  // of its context: an event is recorded only on a stream of the same device
  bool recorded = false;
  std::shared_ptr<Op> op;
  simcore::EventId vid = simcore::kNoEvent;
  std::shared_ptr<CaptureSession> capture;  // recorded inside a capture
  std::vector<CUgraphNode> capture_nodes;
};

}  // namespace vgpu
