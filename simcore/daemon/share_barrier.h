// vgpud's side of ShareCollectives (protocol.h): rank processes of one job each place their own
// ranks' flows of a collective and need the collective's answer, the latest finish of every
// rank's flows, which no process can read alone (it knows its own flows' ids only). Each request
// is held here until every key (communicator, count of its shared collectives) it names is
// covered by all its ranks, over all connections; the reply then goes out from the event loop
// with the key's finish, computed once when the key is covered (every rank gets the same value),
// and the key's flows are released in the engine then.
//
// No connection waits behind a held reply (the loop goes on with its later requests): two
// processes whose groups hold two collectives in opposite orders both get answered.
//
// Bounds: a key not covered within `timeout_s` of real time (a rank that died, hangs, or lost
// vgpud) is answered from the flows placed so far, with a line in the log; the ranks that never
// came are then not waited for on that communicator again (one wait per communicator, not one
// per collective), until one of them places flows there again. A key answered keeps only its
// number (the last kDoneKept per communicator), so a rank arriving late is answered at once
// from its own flows rather than waiting for ranks that already left.
//
// An item without a key (a received message: it waits for nobody) is answered with the rest of
// its request, read when the request's keys are covered: a message sent in one NCCL group with a
// collective then counts every process's flows of that collective, placed by then (answered at
// once, it missed those another process had not sent yet: nccl_links_cross read the receive
// beside B as if alone once in a CI run). A request of such items only is answered at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "protocol.h"
#include "simcore/engine.h"

namespace simcore::daemon {

class ShareBarrier {
 public:
  using Clock = std::chrono::steady_clock;
  // `registered`: the ranks registered by every connection (the reply's count); may be null.
  ShareBarrier(Engine& engine, const uint32_t* registered, double timeout_s = wire::kShareTimeoutS);

  struct Ready {
    uint64_t client = 0;
    uint64_t request = 0;
    wire::SharedFinishes reply;
  };
  // Places the items' flows (one add_flows per item), moves `m.rank`'s floor when `may_floor`
  // (after the flows), and holds the request of `client` until its keys are covered.
  void submit(uint64_t client, uint64_t request, const wire::ShareCollectives& m, bool may_floor, Clock::time_point now);
  // The answers ready now: keys covered, or past their deadline at `now`.
  std::vector<Ready> take(Clock::time_point now);
  // When the earliest held key times out (nullopt: none held).
  std::optional<Clock::time_point> next_deadline() const;
  size_t held_requests() const { return held_.size(); }
  size_t open_keys() const { return keys_.size(); }

  static constexpr size_t kDoneKept = 4096;  // per communicator

 private:
  using Key = std::pair<uint64_t, uint64_t>;  // comm, seq
  struct KeyState {
    uint32_t nranks = 0;
    std::vector<bool> covered;
    uint32_t count = 0;  // covered ranks (placed, or not waited for)
    uint32_t placed = 0; // ranks that placed flows (the answer's `covered`)
    std::vector<EventId> ids;
    Clock::time_point deadline;
    std::vector<uint64_t> waiters;  // held requests
  };
  struct Slot {                // one item of a held request
    std::optional<Key> key;    // none: answered from its own flows (nranks 0, or its key is done)
    std::vector<EventId> ids;  // its own flows, when no key
    uint32_t covered = 0;
    std::optional<Time> finish;
    bool answered = false;
  };
  struct Held {
    uint64_t client = 0;
    uint64_t request = 0;
    std::vector<Slot> slots;
    size_t open = 0;  // slots whose key is not covered yet
  };

  std::optional<Time> latest(const std::vector<EventId>& ids) const;
  void close_key(const Key& key, bool timed_out);  // answers its waiters' slots, releases its flows
  // A request whose keys are all answered: its slots without a key answered now, from their own
  // flows, then queued to go out.
  void complete(uint64_t handle, Held& h);
  bool is_done(const Key& key) const;

  Engine& engine_;
  const uint32_t* registered_;
  const double timeout_s_;
  std::map<Key, KeyState> keys_;
  std::map<uint64_t, Held> held_;
  uint64_t next_held_ = 1;
  std::vector<uint64_t> ready_;  // held requests with every slot answered
  std::map<uint64_t, std::set<int32_t>> absent_;  // comm -> ranks not waited for
  std::map<uint64_t, std::pair<std::set<uint64_t>, std::deque<uint64_t>>> done_;  // comm -> answered seqs
};

}  // namespace simcore::daemon
