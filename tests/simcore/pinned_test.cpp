// A rollback's pinned flows (flow_solver.h, simulator.h): a clean flow moving beside a late flow
// goes on at its old rates until the solver cannot keep it. Hand-worked answers on one node
// (NVSwitch, B = 400 GB/s per GPU and direction, no latency): every rate below is B/2, B/3 or
// 2B/3, and 1 ms at B is 4e8 bytes.
#include <gtest/gtest.h>

#include "random_traces.h"
#include "simcore/engine.h"
#include "test_clusters.h"

namespace simcore {
namespace {

using testing::same_time;

constexpr uint64_t kMsAtB = 400000000;  // bytes moved in 1 ms at B
constexpr double kMs = 1e-3;

FlowSpec flow(int src, int dst, uint64_t bytes, Time not_before) {
  FlowSpec f;
  f.src_gpu = src, f.dst_gpu = dst, f.bytes = bytes, f.not_before = not_before;
  return f;
}

void expect_interval(Engine& e, EventId id, Time start, Time finish, const char* name) {
  const Interval got = *e.query(id);
  EXPECT_TRUE(same_time(got.start, start) && same_time(got.finish, finish))
      << name << ": got [" << got.start << ", " << got.finish << "] want [" << start << ", " << finish << "]";
}

// P (2->0) and Q (2->1) share GPU 2's up link from 0 at B/2: Q ends at 4 ms, P then alone at B
// until 6 ms. L (3->1) arrives late at 1 ms beside Q on GPU 1's down link: every rate stays B/2
// (both links are full with nobody faster), so Q is pinned at its old rate and P never joins.
// At Q's old transfer end (4 ms) Q leaves the solver and L, having moved 1.5 ms at B, speeds up
// to B: its last 0.5 ms at B end at 4.5 ms.
TEST(Pinned, APinnedFlowLeavesAtItsOldTransferEnd) {
  auto e = make_engine(testing::small_cluster(1, 8));
  const EventId p = e->add_flow(flow(2, 0, 4 * kMsAtB, 0));
  const EventId q = e->add_flow(flow(2, 1, 2 * kMsAtB, 0));
  e->query(p);
  const EventId l = e->add_flow(flow(3, 1, 2 * kMsAtB, 1 * kMs));
  expect_interval(*e, l, 1 * kMs, 4.5 * kMs, "L");
  expect_interval(*e, q, 0, 4 * kMs, "Q");
  expect_interval(*e, p, 0, 6 * kMs, "P");
  EXPECT_EQ(e->stats().rollbacks, 1u);
}

// As above, and M (4->1) arrives with L at 2 ms on GPU 1's down link: there Q, L and M get B/3
// each, and P on GPU 2's up link takes the 2B/3 Q leaves. Q, pinned at B/2 since 1 ms, must be
// unpinned when M takes its share of its bottleneck (it would outrun L and M there), and then P,
// whose bottleneck (GPU 2's up link) is no longer full, as well. Q: 4e8 bytes by 2 ms, 4e8 more
// at B/3 end at 5 ms; L: 2e8 by 2 ms, 4e8 at B/3 end at 5 ms; M: 4e8 at B/3 end at 5 ms; P: 4e8
// by 2 ms, 8e8 at 2B/3 by 5 ms, then alone at B for its last 4e8: 6 ms.
TEST(Pinned, APinnedFlowIsUnpinnedWhenAnotherTakesItsBottleneck) {
  auto e = make_engine(testing::small_cluster(1, 8));
  const EventId p = e->add_flow(flow(2, 0, 4 * kMsAtB, 0));
  const EventId q = e->add_flow(flow(2, 1, 2 * kMsAtB, 0));
  e->query(p);
  EXPECT_TRUE(same_time(e->query(q)->finish, 4 * kMs));  // before: Q at B/2 alone with P
  const EventId l = e->add_flow(flow(3, 1, 3 * kMsAtB / 2, 1 * kMs));
  const EventId m = e->add_flow(flow(4, 1, 1 * kMsAtB, 2 * kMs));
  expect_interval(*e, q, 0, 5 * kMs, "Q");
  expect_interval(*e, l, 1 * kMs, 5 * kMs, "L");
  expect_interval(*e, m, 2 * kMs, 5 * kMs, "M");
  expect_interval(*e, p, 0, 6 * kMs, "P");
}

// A pinned flow vouched for by a link without dirty work holds only while the old history
// there stays as it was. P (2->0) shares GPU 0's down link with U (3->0) and GPU 2's up link with
// V (2->5), all at B/2; U ends at 2 ms, and P stays at B/2 (GPU 2's up link). Late, at 1 ms, X1
// (6->5) and X2 (7->5) join V on GPU 5's down link: V drops to B/3 and P, pinned, is vouched for
// by GPU 0's down link (full with U, no dirty work there). At 2 ms U's end changes that link:
// P must be checked again and speed up to the 2B/3 V leaves it on GPU 2's up link, as the same
// flows in virtual-time order give.
TEST(Pinned, AFlowVouchedForByAnOldLinkIsCheckedWhenThatLinkChanges) {
  const ClusterSpec c = testing::small_cluster(1, 8);
  const std::vector<FlowSpec> flows = {flow(2, 0, 4 * kMsAtB, 0), flow(3, 0, 1 * kMsAtB, 0),
                                       flow(2, 5, 4 * kMsAtB, 0), flow(6, 5, 1 * kMsAtB, 1 * kMs),
                                       flow(7, 5, 1 * kMsAtB, 1 * kMs)};
  auto e = make_engine(c);
  std::vector<EventId> ids;
  for (int k = 0; k < 3; ++k) ids.push_back(e->add_flow(flows[k]));
  EXPECT_TRUE(same_time(e->query(ids[1])->finish, 2 * kMs));  // U, at B/2 beside P
  for (int k = 3; k < 5; ++k) ids.push_back(e->add_flow(flows[k]));
  auto ref = make_engine(c);
  std::vector<EventId> ref_ids;
  for (const FlowSpec& f : flows) ref_ids.push_back(ref->add_flow(f));
  // By hand: P moves 1 by 2 ms, 4/3 at 2B/3 until X1 and X2 end at 4 ms, its last 5/3 at B/2.
  expect_interval(*e, ids[0], 0, 22 * kMs / 3, "P");
  const char* names[] = {"P", "U", "V", "X1", "X2"};
  for (size_t k = 0; k < flows.size(); ++k) {
    const Interval want = *ref->query(ref_ids[k]);
    expect_interval(*e, ids[k], want.start, want.finish, names[k]);
  }
}

// The same traffic in every arrival order of the four flows gives the same intervals.
TEST(Pinned, AnyArrivalOrderOfThoseFlowsAgrees) {
  const std::vector<FlowSpec> flows = {flow(2, 0, 4 * kMsAtB, 0), flow(2, 1, 2 * kMsAtB, 0),
                                       flow(3, 1, 3 * kMsAtB / 2, 1 * kMs), flow(4, 1, 1 * kMsAtB, 2 * kMs)};
  const Time want_finish[] = {6 * kMs, 5 * kMs, 5 * kMs, 5 * kMs};
  std::vector<int> order = {0, 1, 2, 3};
  do {
    auto e = make_engine(testing::small_cluster(1, 8));
    EventId ids[4];
    for (int k : order) {
      ids[k] = e->add_flow(flows[k]);
      e->query(ids[k]);  // each arrival in a sweep of its own
    }
    for (int k = 0; k < 4; ++k)
      EXPECT_TRUE(same_time(e->query(ids[k])->finish, want_finish[k]))
          << "flow " << k << " in order " << order[0] << order[1] << order[2] << order[3] << ": "
          << e->query(ids[k])->finish;
  } while (std::next_permutation(order.begin(), order.end()));
}

}  // namespace
}  // namespace simcore
