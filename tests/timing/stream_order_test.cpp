// The stream order both backends share (vgpu/timing/stream_order.h), alone: which ops a new op
// on a stream waits for. tests/timing/stream_rules_test.cpp checks the same rules through the
// driver API of each backend.
#include "timing/stream_order.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace vgpu::timing {
namespace {

using Order = StreamOrder<int>;  // ops named by number; 0: no op
constexpr int kCtx = 1, kOtherCtx = 2;
const void* ctx(int c) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(c) << 4); }
Order::Key key(int c, int s) { return {ctx(c), reinterpret_cast<const void*>(static_cast<uintptr_t>(s) << 4)}; }

// What a new op on `k` waits for, sorted (0s, the streams without an op yet, left out).
std::vector<int> preds(const Order& o, const Order::Key& k, StreamKind kind) {
  std::vector<int> out;
  o.for_each_predecessor(k, kind, [&out](int last, bool) {
    if (last != 0) out.push_back(last);
  });
  std::sort(out.begin(), out.end());
  return out;
}

TEST(StreamOrder, TheDefaultStreamBarrier) {
  EXPECT_TRUE(default_stream_barrier(StreamKind::legacy, StreamKind::blocking));
  EXPECT_TRUE(default_stream_barrier(StreamKind::blocking, StreamKind::legacy));
  EXPECT_FALSE(default_stream_barrier(StreamKind::blocking, StreamKind::blocking));
  EXPECT_FALSE(default_stream_barrier(StreamKind::legacy, StreamKind::non_blocking));
  EXPECT_FALSE(default_stream_barrier(StreamKind::non_blocking, StreamKind::legacy));
  EXPECT_FALSE(default_stream_barrier(StreamKind::non_blocking, StreamKind::blocking));
}

TEST(StreamOrder, StreamArgumentsNameTheDefaultStreams) {
  EXPECT_EQ(stream_arg(nullptr, false), StreamArg::legacy);
  EXPECT_EQ(stream_arg(nullptr, true), StreamArg::per_thread);  // a _ptsz/_ptds entry point
  EXPECT_EQ(stream_arg(CU_STREAM_LEGACY, true), StreamArg::legacy);
  EXPECT_EQ(stream_arg(CU_STREAM_PER_THREAD, false), StreamArg::per_thread);
  int stream;
  EXPECT_EQ(stream_arg(&stream, true), StreamArg::handle);
}

TEST(StreamOrder, ThePerThreadDefaultStreamIsBlocking) {
  EXPECT_EQ(stream_kind(StreamArg::legacy, false), StreamKind::legacy);
  EXPECT_EQ(stream_kind(StreamArg::per_thread, false), StreamKind::blocking);
  EXPECT_EQ(stream_kind(StreamArg::per_thread, true), StreamKind::blocking);  // flags are a handle's
  EXPECT_EQ(stream_kind(StreamArg::handle, false), StreamKind::blocking);
  EXPECT_EQ(stream_kind(StreamArg::handle, true), StreamKind::non_blocking);
}

TEST(StreamOrder, EachOpWaitsForThePreviousOpOfItsStream) {
  Order o;
  const auto a = key(kCtx, 1), b = key(kCtx, 2);
  EXPECT_EQ(preds(o, a, StreamKind::non_blocking), std::vector<int>{});
  o.stream(a, StreamKind::non_blocking).last = 1;
  o.stream(b, StreamKind::non_blocking).last = 2;
  EXPECT_EQ(preds(o, a, StreamKind::non_blocking), std::vector<int>{1});
  o.stream(a, StreamKind::non_blocking).last = 3;
  EXPECT_EQ(preds(o, a, StreamKind::non_blocking), std::vector<int>{3});
  EXPECT_EQ(preds(o, b, StreamKind::non_blocking), std::vector<int>{2});
}

TEST(StreamOrder, LegacyAndBlockingStreamsWaitForEachOther) {
  Order o;
  const auto legacy = key(kCtx, 0), blocking = key(kCtx, 1), per_thread = key(kCtx, 2),
             non_blocking = key(kCtx, 3), elsewhere = key(kOtherCtx, 1);
  o.stream(blocking, StreamKind::blocking).last = 1;
  o.stream(per_thread, StreamKind::blocking).last = 2;  // a per-thread default stream is blocking
  o.stream(non_blocking, StreamKind::non_blocking).last = 3;
  o.stream(elsewhere, StreamKind::blocking).last = 4;  // another context: no barrier
  EXPECT_EQ(preds(o, legacy, StreamKind::legacy), (std::vector<int>{1, 2}));
  o.stream(legacy, StreamKind::legacy).last = 5;
  EXPECT_EQ(preds(o, legacy, StreamKind::legacy), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(preds(o, blocking, StreamKind::blocking), (std::vector<int>{1, 5}));
  // Told apart: the op before on the same stream (the sim orders real effects by its queue).
  std::vector<int> own;
  o.for_each_predecessor(blocking, StreamKind::blocking, [&own](int last, bool same_stream) {
    if (same_stream) own.push_back(last);
  });
  EXPECT_EQ(own, std::vector<int>{1});
  EXPECT_EQ(preds(o, per_thread, StreamKind::blocking), (std::vector<int>{2, 5}));
  EXPECT_EQ(preds(o, non_blocking, StreamKind::non_blocking), std::vector<int>{3});
  EXPECT_EQ(preds(o, elsewhere, StreamKind::blocking), std::vector<int>{4});
  // A new blocking stream waits for the legacy stream from its first op on.
  EXPECT_EQ(preds(o, key(kCtx, 9), StreamKind::blocking), std::vector<int>{5});
}

TEST(StreamOrder, ForgottenStreamsAndContextsStartFresh) {
  Order o;
  const auto legacy = key(kCtx, 0), blocking = key(kCtx, 1);
  o.stream(legacy, StreamKind::legacy).last = 1;
  o.stream(blocking, StreamKind::blocking).last = 2;
  o.forget_stream(blocking);
  EXPECT_EQ(o.find(blocking), nullptr);
  EXPECT_EQ(preds(o, legacy, StreamKind::legacy), std::vector<int>{1});
  o.forget_stream(legacy);
  EXPECT_EQ(preds(o, blocking, StreamKind::blocking), std::vector<int>{});
  o.stream(legacy, StreamKind::legacy).last = 3;
  o.stream(key(kOtherCtx, 0), StreamKind::legacy).last = 4;
  o.forget_context(ctx(kCtx));
  EXPECT_EQ(preds(o, blocking, StreamKind::blocking), std::vector<int>{});
  int streams = 0;
  o.for_each([&streams](const Order::Key&, const Order::Entry&) { ++streams; });
  EXPECT_EQ(streams, 1);
}

// append() keeps the stream it appended to last (no lookup when the next append is to it again):
// a stream forgotten, destroyed or gone with its context and then appended to under the same key
// starts fresh, and a copy appends to its own entries.
TEST(StreamOrder, AppendingAgainFindsTheStreamAsItIsNow) {
  // What append() hands f for a new op on `k` (own stream's last op first, -1: none), then sets
  // the op `op` as the stream's last.
  auto append = [](Order& o, const Order::Key& k, int op) {
    int own = -1;
    o.append(k, StreamKind::non_blocking, [&own](const int& last, bool is_own) {
      if (is_own) own = last;
    }).last = op;
    return own;
  };
  Order o;
  const auto a = key(kCtx, 1), b = key(kCtx, 2);
  EXPECT_EQ(append(o, a, 1), -1);
  EXPECT_EQ(append(o, a, 2), 1);
  EXPECT_EQ(append(o, b, 3), -1);
  EXPECT_EQ(append(o, a, 4), 2);
  o.forget_stream(a);
  EXPECT_EQ(append(o, a, 5), -1);
  o.destroy_stream(a);
  EXPECT_EQ(append(o, a, 6), -1);
  o.forget_context(ctx(kCtx));
  EXPECT_EQ(append(o, a, 7), -1);
  EXPECT_EQ(append(o, b, 8), -1);
  Order copy = o;
  EXPECT_EQ(append(copy, b, 9), 8);
  EXPECT_EQ(append(o, b, 10), 8);  // the original's entry, not the copy's
  o = copy;
  EXPECT_EQ(append(o, b, 11), 9);
  EXPECT_EQ(append(copy, b, 12), 9);
}

TEST(StreamOrder, DestroyedBlockingStreamsStayInTheBarrierUntilTheLegacyStreamsNextOp) {
  Order o;
  const auto legacy = key(kCtx, 0), blocking = key(kCtx, 1), non_blocking = key(kCtx, 2), other = key(kCtx, 3);
  o.stream(blocking, StreamKind::blocking).last = 1;
  o.stream(non_blocking, StreamKind::non_blocking).last = 2;
  o.destroy_stream(blocking);
  o.destroy_stream(non_blocking);
  EXPECT_EQ(o.find(blocking), nullptr);
  // Its work still runs: the legacy stream's next op waits for it (not for the non-blocking one).
  EXPECT_EQ(preds(o, legacy, StreamKind::legacy), std::vector<int>{1});
  // A new stream under the same handle starts fresh; other blocking streams do not wait for it.
  EXPECT_EQ(preds(o, blocking, StreamKind::blocking), std::vector<int>{});
  EXPECT_EQ(preds(o, other, StreamKind::blocking), std::vector<int>{});
  // Once the legacy stream's op waited for it, it is that op's predecessor: it leaves.
  o.stream(legacy, StreamKind::legacy).last = 3;
  EXPECT_EQ(preds(o, legacy, StreamKind::legacy), std::vector<int>{3});
  // At most kRetiredKept of a context wait; the oldest leave first.
  for (int i = 0; i <= static_cast<int>(Order::kRetiredKept); ++i) {
    o.stream(key(kCtx, 100 + i), StreamKind::blocking).last = 100 + i;
    o.destroy_stream(key(kCtx, 100 + i));
  }
  const std::vector<int> waited = preds(o, legacy, StreamKind::legacy);
  EXPECT_EQ(waited.size(), Order::kRetiredKept + 1);  // and the legacy stream's own last op
  EXPECT_EQ(waited.front(), 3);
  EXPECT_EQ(waited[1], 101);
  // A context with only destroyed streams left keeps them until its legacy stream's next op.
  Order fresh;
  fresh.stream(blocking, StreamKind::blocking).last = 7;
  fresh.destroy_stream(blocking);
  EXPECT_EQ(preds(fresh, legacy, StreamKind::legacy), std::vector<int>{7});
  // Forgetting a context forgets them too.
  fresh.forget_context(ctx(kCtx));
  EXPECT_EQ(preds(fresh, legacy, StreamKind::legacy), std::vector<int>{});
}

}  // namespace
}  // namespace vgpu::timing
