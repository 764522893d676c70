#include "session.h"

#include <algorithm>
#include <exception>
#include <type_traits>

#include <fmt/format.h>

#include "common/log.h"
#include "socket_io.h"

namespace simcore::daemon {

using namespace wire;

Session::Outcome error_outcome(ErrorCode code, std::string message, Session::Next next) {
  if (message.size() > kMaxMessageBytes) message.resize(kMaxMessageBytes);
  return {next, ErrorReply{code, std::move(message)}, kNoEvent};
}

Session::Outcome Session::handle(const Frame& request) {
  try {
    // Held, not answered now: the barrier needs the request's id to answer it later.
    if (const auto* m = std::get_if<ShareCollectives>(&request.body); m != nullptr && greeted_ && policy_.share) {
      // The floor only for a rank this connection registered (as SetRankFloor's callers do).
      policy_.share->submit(policy_.client, request.request_id, *m, ranks_.contains(m->rank),
                            ShareBarrier::Clock::now());
      return {Next::kHeld, Ack{}, kNoEvent};
    }
    return dispatch(request.body);
  } catch (const std::exception& e) {
    vgpu::log::error("vgpud: engine failed on a request from rank {}: {}", rank_, e.what());
    return error_outcome(ErrorCode::kInternal, fmt::format("engine error: {}", e.what()));
  } catch (...) {
    return error_outcome(ErrorCode::kInternal, "engine error");
  }
}

Session::Outcome Session::hello(const Hello& m) {
  if (greeted_)
    return error_outcome(ErrorCode::kUnexpected, "second Hello on one connection", Next::kReplyAndClose);
  if (m.job != policy_.job)
    return error_outcome(ErrorCode::kWrongJob,
                         fmt::format("this daemon serves job '{}', not '{}'", policy_.job, m.job),
                         Next::kReplyAndClose);
  if (policy_.require_token && (policy_.token.empty() || !constant_time_equal(m.token, policy_.token)))
    return error_outcome(ErrorCode::kBadToken, "wrong or missing job token", Next::kReplyAndClose);
  greeted_ = true;
  rank_ = m.rank;
  return {Next::kReply, HelloReply{policy_.job, policy_.pid}, kNoEvent};
}

TimelineReply Session::timeline_page(const TimelineRequest& m, bool* ok) {
  if (m.offset == 0) timeline_ = engine_.timeline_json();
  TimelineReply r;
  r.total = timeline_.size();
  r.offset = m.offset;
  *ok = m.offset <= timeline_.size();
  if (!*ok) return r;
  const uint64_t cap = m.max_bytes == 0 ? kMaxChunkBytes : std::min(m.max_bytes, kMaxChunkBytes);
  r.chunk = timeline_.substr(m.offset, std::min<uint64_t>(cap, timeline_.size() - m.offset));
  if (m.offset + r.chunk.size() == timeline_.size()) {
    // The last page went out: free the snapshot (timelines of long runs are large).
    std::string().swap(timeline_);
  }
  return r;
}

void Session::count_rank(int32_t rank, bool registered) {
  const bool changed = registered ? ranks_.insert(rank).second : ranks_.erase(rank) > 0;
  if (changed && policy_.registered != nullptr) *policy_.registered += registered ? 1 : -1;
}

Session::Outcome Session::dispatch(const Body& body) {
  if (const auto* h = std::get_if<Hello>(&body)) return hello(*h);
  if (!greeted_)
    return error_outcome(ErrorCode::kNotGreeted, "the first message must be Hello",
                         Next::kReplyAndClose);
  return std::visit(
      [this](const auto& m) -> Outcome {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, AddFlow>) {
          return {Next::kReply, EventReply{engine_.add_flow(m.flow)}, kNoEvent};
        } else if constexpr (std::is_same_v<M, AddFlows>) {
          // One call: the engine makes flow groups of its like flows (a ring step's).
          EventsReply reply;
          reply.ids.assign(m.flows.size(), kNoEvent);
          engine_.add_flows(m.flows, reply.ids);
          return {Next::kReply, std::move(reply), kNoEvent};
        } else if constexpr (std::is_same_v<M, AddTask>) {
          return {Next::kReply, EventReply{engine_.add_task(m.task)}, kNoEvent};
        } else if constexpr (std::is_same_v<M, Query>) {
          return {Next::kReply, IntervalReply{engine_.query(m.id)}, kNoEvent};
        } else if constexpr (std::is_same_v<M, IsFinal>) {
          return {Next::kReply, BoolReply{engine_.is_final(m.id)}, kNoEvent};
        } else if constexpr (std::is_same_v<M, RegisterRank>) {
          engine_.register_rank(m.rank);
          count_rank(m.rank, true);
          return {};
        } else if constexpr (std::is_same_v<M, SetRankFloor>) {
          engine_.set_rank_floor(m.rank, m.t);
          return {};
        } else if constexpr (std::is_same_v<M, UnregisterRank>) {
          engine_.unregister_rank(m.rank);
          count_rank(m.rank, false);
          return {};
        } else if constexpr (std::is_same_v<M, WaitFinal>) {
          // Unknown ids and events final already are answered now; the rest wait off the loop.
          const auto iv = engine_.query(m.id);
          if (!iv || engine_.is_final(m.id)) return {Next::kReply, IntervalReply{iv}, kNoEvent};
          return {Next::kWait, Ack{}, m.id, -1, false};
        } else if constexpr (std::is_same_v<M, WaitFinalForRank>) {
          if (!engine_.query(m.id)) return {Next::kReply, IntervalReply{}, kNoEvent};
          // Final already: the engine's call returns at once (and raises the rank's floor).
          if (engine_.is_final(m.id))
            return {Next::kReply, IntervalReply{engine_.wait_final_for_rank(m.id, m.rank)}, kNoEvent};
          return {Next::kWait, Ack{}, m.id, m.rank, true};
        } else if constexpr (std::is_same_v<M, ShareCollectives>) {
          return error_outcome(ErrorCode::kBadRequest, "ShareCollectives is not served here");
        } else if constexpr (std::is_same_v<M, StatsRequest>) {
          return {Next::kReply, StatsReply{engine_.stats()}, kNoEvent};
        } else if constexpr (std::is_same_v<M, TimelineRequest>) {
          bool ok = false;
          TimelineReply page = timeline_page(m, &ok);
          if (!ok)
            return error_outcome(ErrorCode::kBadRequest,
                                 fmt::format("timeline offset {} is past its end {}", m.offset,
                                             page.total));
          return {Next::kReply, std::move(page), kNoEvent};
        } else if constexpr (std::is_same_v<M, Shutdown>) {
          return {Next::kReplyAndStop, Ack{}, kNoEvent};
        } else {
          return error_outcome(ErrorCode::kUnexpected,
                               fmt::format("message type {:#x} is not a request",
                                           static_cast<unsigned>(M::kType)),
                               Next::kReplyAndClose);
        }
      },
      body);
}

void Session::end() {
  for (int32_t r : ranks_) {
    try {
      engine_.unregister_rank(r);
    } catch (...) {
      vgpu::log::error("vgpud: unregistering rank {} failed", r);
    }
  }
  if (!ranks_.empty())
    vgpu::log::info("vgpud: client (rank {}) left; unregistered {} rank(s)", rank_, ranks_.size());
  if (policy_.registered != nullptr) *policy_.registered -= static_cast<uint32_t>(ranks_.size());
  ranks_.clear();
}

}  // namespace simcore::daemon
