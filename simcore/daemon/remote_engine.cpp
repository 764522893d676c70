// The Engine that forwards every call to the job's vgpud (see remote_engine.h).
#include "simcore/remote_engine.h"

#include <algorithm>
#include <exception>
#include <type_traits>

#include <fmt/format.h>

#include "client_config.h"
#include "common/log.h"
#include "dial.h"
#include "rpc_channel.h"

namespace simcore {
namespace {

using namespace wire;
using daemon::ClientConfig;
using daemon::RpcChannel;

class RemoteEngine final : public Engine {
 public:
  RemoteEngine(daemon::UniqueFd fd, const ClientConfig& c) : channel_(std::move(fd), c.call_timeout_s) {}

  EventId add_flow(const FlowSpec& flow) override {
    const auto r = expect<EventReply>(AddFlow{flow}, "add_flow");
    return r ? r->id : kNoEvent;
  }
  // Consecutive flows in one AddFlows request (several when they exceed one frame), so that
  // the daemon's engine sees them in one add_flows() call, as an in-process caller's would be:
  // a ring step's like flows become flow groups there. Ids come back in call order.
  void add_flows(std::span<const FlowSpec> flows, std::span<EventId> ids) override {
    const size_t n = std::min(flows.size(), ids.size());
    // Half a frame of payload per request: room for the header and no cap to guess at.
    constexpr size_t kBudget = kMaxFrameBytes / 2;
    for (size_t from = 0; from < n;) {
      AddFlows call;
      size_t bytes = 0;
      while (from + call.flows.size() < n && call.flows.size() < kMaxFlowsPerCall) {
        const FlowSpec& f = flows[from + call.flows.size()];
        const size_t size = 32 + 8 * f.after.size() + f.label.size();
        if (!call.flows.empty() && bytes + size > kBudget) break;
        bytes += size;
        call.flows.push_back(f);
      }
      const size_t count = call.flows.size();
      const auto r = expect<EventsReply>(std::move(call), "add_flows");
      const bool ok = r && r->ids.size() == count;
      for (size_t k = 0; k < count; ++k) ids[from + k] = ok ? r->ids[k] : kNoEvent;
      from += count;
    }
  }
  EventId add_task(const TaskSpec& task) override {
    const auto r = expect<EventReply>(AddTask{task}, "add_task");
    return r ? r->id : kNoEvent;
  }
  std::optional<Interval> query(EventId id) const override {
    const auto r = expect<IntervalReply>(Query{id}, "query");
    return r ? r->interval : std::nullopt;
  }
  bool is_final(EventId id) const override {
    const auto r = expect<BoolReply>(IsFinal{id}, "is_final");
    return r && r->value;
  }
  void register_rank(int rank) override { expect<Ack>(RegisterRank{rank}, "register_rank"); }
  void set_rank_floor(int rank, Time t) override {
    expect<Ack>(SetRankFloor{rank, t}, "set_rank_floor");
  }
  void unregister_rank(int rank) override {
    expect<Ack>(UnregisterRank{rank}, "unregister_rank");
  }
  std::optional<Interval> wait_final(EventId id) override {
    const auto r = expect<IntervalReply>(WaitFinal{id}, "wait_final", /*wait_forever=*/true);
    return r ? r->interval : std::nullopt;
  }
  std::optional<Interval> wait_final_for_rank(EventId id, int rank) override {
    const auto r = expect<IntervalReply>(WaitFinalForRank{id, rank}, "wait_final_for_rank",
                                         /*wait_forever=*/true);
    return r ? r->interval : std::nullopt;
  }
  void shutdown() override { channel_.close("shut down by this client"); }
  std::string lost() const override { return channel_.alive() ? std::string() : channel_.why_dead(); }
  Stats stats() const override {
    const auto r = expect<StatsReply>(StatsRequest{}, "stats");
    return r ? r->stats : Stats{};
  }

  // One ShareCollectives (share_collectives in remote_engine.h), held by the daemon until
  // every rank of its keys is there (bounded there); nullopt when the call failed.
  std::optional<SharedFinishes> share(ShareCollectives request) {
    const size_t items = request.items.size();
    auto r = expect<SharedFinishes>(std::move(request), "share_collectives", /*wait_forever=*/true);
    if (r && r->answers.size() != items) return std::nullopt;
    return r;
  }

  std::string timeline_json() const override {
    std::string out;
    uint64_t total = 0;
    do {
      const auto page = expect<TimelineReply>(TimelineRequest{out.size(), 0}, "timeline_json");
      const bool consistent = page && page->offset == out.size() &&
                              (out.empty() || page->total == total) &&
                              (!page->chunk.empty() || page->total == out.size());
      if (!consistent) return {};
      total = page->total;
      out += page->chunk;
    } while (out.size() < total);
    return out;
  }

 private:
  // Sends one request and returns the reply if it has the expected type. Everything else (a
  // dropped connection, a timeout, an Error reply, an exception) is logged once per kind and
  // turned into nullopt, which each method maps to its own error value.
  template <class R>
  std::optional<R> expect(Body request, const char* what, bool wait_forever = false) const {
    try {
      std::optional<Body> reply = channel_.call(std::move(request), wait_forever);
      if (reply) {
        if (auto* r = std::get_if<R>(&*reply)) return std::move(*r);
        if (auto* e = std::get_if<ErrorReply>(&*reply))
          vgpu::log::once(vgpu::log::Level::warn, fmt::format("vgpud-err-{}", what),
                          fmt::format("vgpud refused {}: {}", what, e->message));
        else
          vgpu::log::once(vgpu::log::Level::warn, fmt::format("vgpud-type-{}", what),
                          fmt::format("vgpud answered {} with the wrong message type", what));
      } else {
        vgpu::log::once(vgpu::log::Level::warn, "vgpud-gone",
                        fmt::format("vgpud connection lost ({}); simulation calls now fail",
                                    channel_.why_dead()));
      }
    } catch (const std::exception& e) {
      vgpu::log::once(vgpu::log::Level::error, "vgpud-exc",
                      fmt::format("vgpud client: {} failed: {}", what, e.what()));
    } catch (...) {
    }
    return std::nullopt;
  }

  mutable RpcChannel channel_;
};

void set_error(std::string* out, const std::string& message) {
  if (out) *out = message;
}

}  // namespace

std::unique_ptr<Engine> connect_engine(const RemoteOptions& options, std::string* error) {
  try {
    ClientConfig c;
    std::string err;
    if (!daemon::resolve_client_config(options, &c, &err)) {
      vgpu::log::error("vgpud client: {}", err);
      set_error(error, err);
      return nullptr;
    }
    HelloReply hello;
    daemon::UniqueFd fd = daemon::dial(c, &hello, &err);
    if (!fd) {
      vgpu::log::error("vgpud client: {}", err);
      set_error(error, err);
      return nullptr;
    }
    vgpu::log::debug("vgpud client: rank {} connected to vgpud pid {} for job '{}'", c.rank,
                     hello.pid, hello.job);
    return std::make_unique<RemoteEngine>(std::move(fd), c);
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return nullptr;
  }
}

bool ensure_daemon(const RemoteOptions& options, std::string* error) {
  return connect_engine(options, error) != nullptr;
}

bool shutdown_daemon(const RemoteOptions& options, std::string* error) {
  try {
    RemoteOptions o = options;
    o.start_daemon = false;
    ClientConfig c;
    std::string err;
    if (!daemon::resolve_client_config(o, &c, &err)) {
      set_error(error, err);
      return false;
    }
    // Nobody listening means nothing to stop.
    if (c.tcp.empty()) {
      daemon::UniqueFd probe = daemon::connect_unix(c.paths.socket, &err);
      if (!probe) return true;
    }
    HelloReply hello;
    daemon::UniqueFd fd = daemon::dial(c, &hello, &err);
    if (!fd) {
      set_error(error, err);
      return false;
    }
    Frame reply;
    if (!daemon::exchange_once(fd.get(), Frame{2, Shutdown{}}, &reply, c.connect_timeout_s,
                               &err) ||
        !std::holds_alternative<Ack>(reply.body)) {
      set_error(error, err.empty() ? "vgpud did not acknowledge the shutdown" : err);
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return false;
  }
}

std::vector<SharedResult> share_collectives(Engine& engine, std::span<const SharedCollective> collectives, int rank,
                                            std::optional<Time> floor, uint32_t* registered,
                                            std::span<const EventId> released) {
  if (registered != nullptr) *registered = 0;
  std::vector<SharedResult> out(collectives.size());
  if (auto* remote = dynamic_cast<RemoteEngine*>(&engine)) {
    ShareCollectives call;
    call.rank = rank;
    call.floor = floor;
    call.items.reserve(collectives.size());
    for (const SharedCollective& c : collectives)
      call.items.push_back(SharedItem{c.comm, c.seq, c.nranks, c.ranks, c.flows});
    call.released.assign(released.begin(), released.end());
    std::optional<SharedFinishes> r = remote->share(std::move(call));
    if (!r) return out;
    if (registered != nullptr) *registered = r->registered;
    for (size_t i = 0; i < out.size(); ++i) out[i] = SharedResult{r->answers[i].finish, r->answers[i].covered};
    return out;
  }
  // In process: nobody else places flows here; each collective's answer is its own flows'.
  for (size_t i = 0; i < collectives.size(); ++i) {
    std::vector<EventId> ids(collectives[i].flows.size(), kNoEvent);
    engine.add_flows(collectives[i].flows, ids);
    std::erase(ids, kNoEvent);
    for (EventId id : ids)
      if (const std::optional<Interval> iv = engine.query(id))
        out[i].finish = std::max(out[i].finish.value_or(iv->finish), iv->finish);
    out[i].covered = static_cast<uint32_t>(collectives[i].ranks.size());
    engine.release(ids);
  }
  if (!released.empty()) engine.release(released);
  if (floor) engine.set_rank_floor(rank, *floor);
  return out;
}

std::string daemon_socket_path(const RemoteOptions& options) {
  ClientConfig c;
  std::string err;
  return daemon::resolve_client_config(options, &c, &err) ? c.paths.socket : std::string();
}

}  // namespace simcore
