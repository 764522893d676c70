// One client connection's protocol state inside vgpud, apart from its socket: the Hello
// handshake, the ranks the client registered (so that they are unregistered when it goes), the
// timeline snapshot it is paging through, and the mapping of each request onto the engine.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "protocol.h"
#include "share_barrier.h"
#include "simcore/engine.h"

namespace simcore::daemon {

struct SessionPolicy {
  std::string job;            // the daemon's job id; a Hello must name the same
  std::string token;          // required in Hello when require_token
  bool require_token = false; // TCP connections
  uint32_t pid = 0;           // reported in HelloReply
  // The ranks every connection of the daemon has registered and not unregistered (FinishesReply
  // tells it: a rank process holds its floor back until every process of its job registered).
  // Owned by the server, which outlives its sessions; null: not counted (0 reported).
  uint32_t* registered = nullptr;
  // Where ShareCollectives requests are held until their keys are covered (share_barrier.h),
  // and this connection's tag there. Owned by the server; null: such requests are refused.
  ShareBarrier* share = nullptr;
  uint64_t client = 0;
};

class Session {
 public:
  Session(Engine& engine, SessionPolicy policy) : engine_(engine), policy_(std::move(policy)) {}

  enum class Next {
    kReply,          // send `reply`
    kWait,           // a wait_final (for `wait_rank` when `wait_for_rank`) on `wait_id` that is
                     // not final yet: run it off the loop, answer when it returns
    kReplyAndClose,  // send `reply` (an error), then drop the connection
    kReplyAndStop,   // send `reply`, then shut the daemon down
    kHeld,           // nothing now: the share barrier answers once the request's keys are covered
  };
  struct Outcome {
    Next next = Next::kReply;
    wire::Body reply = wire::Ack{};
    EventId wait_id = kNoEvent;
    int32_t wait_rank = -1;
    bool wait_for_rank = false;
  };

  // Handles one decoded request. Never throws: an engine exception becomes an Error reply.
  Outcome handle(const wire::Frame& request);

  // The connection is gone: unregister every rank it registered and did not unregister.
  void end();

  bool greeted() const { return greeted_; }
  int rank() const { return rank_; }
  const std::set<int32_t>& ranks() const { return ranks_; }

 private:
  Outcome dispatch(const wire::Body& body);
  Outcome hello(const wire::Hello& m);
  wire::TimelineReply timeline_page(const wire::TimelineRequest& m, bool* ok);
  void count_rank(int32_t rank, bool registered);

  Engine& engine_;
  SessionPolicy policy_;
  bool greeted_ = false;
  int32_t rank_ = -1;
  std::set<int32_t> ranks_;
  std::string timeline_;  // the snapshot taken at offset 0
};

Session::Outcome error_outcome(wire::ErrorCode code, std::string message,
                               Session::Next next = Session::Next::kReply);

}  // namespace simcore::daemon
