// Kernels beside a collective's kernel on one GPU (timing/collective_overlap.h): hand-worked
// placements at rate 0.5 while the collective moves data (0.75 while it waits for its peers),
// whichever of the two is placed first.
#include "timing/collective_overlap.h"

#include <gtest/gtest.h>

#include <limits>

namespace vgpu::timing {
namespace {

TEST(CollectiveOverlap, AKernelPlacedAfterAWindowProgressesAtTheShareInsideIt) {
  CollectiveOverlap o(0.5);
  o.collective(0, 10, 10, 20);
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 12, 4), 20);   // 8 s of window for its 4 s of work
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 18, 4), 23);   // 1 s of work inside, 3 after
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 5, 3), 8);     // before the window: alone
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 8, 4), 14);    // 2 s alone, then 2 s of work in 4 s of window
  EXPECT_DOUBLE_EQ(o.kernel_finish(1, 12, 4), 16);   // another GPU: alone
  EXPECT_DOUBLE_EQ(o.debt(0), 0);
}

TEST(CollectiveOverlap, AWindowPlacedAfterKernelsLeavesTheirLostWorkToTheNextKernel) {
  CollectiveOverlap o(0.5);
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 0, 5), 5);
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 6, 3), 9);
  EXPECT_DOUBLE_EQ(o.kernel_finish(1, 0, 9), 9);  // another GPU's
  o.collective(0, 4, 4, 8);  // inside it: [4, 5] and [6, 8], 3 s busy, half of it lost
  EXPECT_DOUBLE_EQ(o.debt(0), 1.5);
  EXPECT_DOUBLE_EQ(o.debt(1), 0);
  double carried = -1;
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 20, 1, &carried), 22.5);  // paid by the next kernel
  EXPECT_DOUBLE_EQ(carried, 1.5) << "what it carried, told apart from its own work";
  EXPECT_DOUBLE_EQ(o.debt(0), 0);
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 30, 1, &carried), 31);
  EXPECT_DOUBLE_EQ(carried, 0);
}

// The sim backend's half (sim/exec/compute_beside_collectives.h): it asks where a kernel starts
// only when a window or a debt can touch it, and hands over the kernels it did not ask about
// once a window comes.
TEST(CollectiveOverlap, QuietAfterSaysWhenNoWindowOrDebtCanTouchAKernel) {
  CollectiveOverlap o(0.5);
  EXPECT_TRUE(o.quiet_after(0, 0));
  o.collective(0, 10, 10, 20);
  EXPECT_FALSE(o.quiet_after(0, 5));
  EXPECT_FALSE(o.quiet_after(0, 19.5));
  EXPECT_TRUE(o.quiet_after(0, 20));
  EXPECT_TRUE(o.quiet_after(1, 5));  // another GPU
  o.kernel_ran(1, 0, 4);
  o.collective(1, 2, 2, 6);  // a debt of 1 s: its next kernel is touched wherever it starts
  EXPECT_FALSE(o.quiet_after(1, 100));
  EXPECT_DOUBLE_EQ(o.kernel_finish(1, 100, 1), 102);
  EXPECT_TRUE(o.quiet_after(1, 100));
  CollectiveOverlap off(1, 1);
  off.collective(0, 10, 10, 20);
  EXPECT_TRUE(off.quiet_after(0, 5));
}

TEST(CollectiveOverlap, KernelsThatRanUntimedCountForALaterWindow) {
  CollectiveOverlap o(0.5);
  o.kernel_ran(0, 0, 5);
  o.kernel_ran(0, 6, 9);
  o.kernel_ran(0, 3, std::numeric_limits<double>::quiet_NaN());  // ignored
  o.collective(0, 4, 4, 8);  // as kernel_finish's intervals: [4, 5] and [6, 8] inside
  EXPECT_DOUBLE_EQ(o.debt(0), 1.5);
}

TEST(CollectiveOverlap, KernelsSideBySideCountTheirUnionOnce) {
  CollectiveOverlap o(0.5);
  o.kernel_finish(0, 0, 10);
  o.kernel_finish(0, 2, 6);  // [2, 8], beside the first on another stream
  o.collective(0, 1, 1, 3);
  EXPECT_DOUBLE_EQ(o.debt(0), 1.0);  // 2 s busy inside the window, not 3
}

TEST(CollectiveOverlap, OverlappingWindowsSlowAKernelOnce) {
  CollectiveOverlap o(0.5);
  o.collective(0, 10, 10, 14);
  o.collective(0, 12, 12, 16);  // another communicator's, beside the first
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 10, 3), 16);  // 6 s of windows' union for its 3 s
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 10, 4), 17);
}

TEST(CollectiveOverlap, ShareOneIsTheRuleOffAndBadInputsChangeNothing) {
  CollectiveOverlap off(1.0, 1.0);
  EXPECT_FALSE(off.enabled());
  off.collective(0, 0, 5, 10);
  EXPECT_DOUBLE_EQ(off.kernel_finish(0, 1, 2), 3);
  CollectiveOverlap o(0.5);
  o.collective(-1, 0, 0, 10);
  o.collective(CollectiveOverlap::kMaxDevices, 0, 0, 10);
  o.collective(0, 5, 5, 5);  // empty window
  o.collective(0, 5, 5, std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 1, 8), 9);
  EXPECT_DOUBLE_EQ(o.kernel_finish(-1, 1, 2), 3);
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 20, -1), 20);  // no duration: lasts nothing
  EXPECT_DOUBLE_EQ(CollectiveOverlap(std::numeric_limits<double>::quiet_NaN()).kernel_finish(0, 0, 1), 1);
}

TEST(CollectiveOverlap, WhileTheCollectiveWaitsForItsPeersKernelsRunAtTheWaitingRate) {
  CollectiveOverlap o(0.5, 0.75);
  o.collective(0, 10, 18, 20);  // waits 8 s, moves 2 s
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 10, 6), 18);   // 8 s at 0.75
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 14, 5), 21);   // 3 s of work in [14, 18], 1 in [18, 20], 1 after
  CollectiveOverlap later(0.5, 0.75);
  later.kernel_finish(0, 10, 10);  // [10, 20], placed first
  later.collective(0, 10, 18, 20);
  EXPECT_DOUBLE_EQ(later.debt(0), 0.25 * 8 + 0.5 * 2);
  CollectiveOverlap clamped(0.5, 0.75);
  clamped.collective(0, 10, 30, 20);  // its transfers' start past its end: waiting throughout
  EXPECT_DOUBLE_EQ(clamped.kernel_finish(0, 10, 7.5), 20);
}

TEST(CollectiveOverlap, WindowsFarBehindAreForgotten) {
  CollectiveOverlap o(0.5);
  o.collective(0, 0, 0, 1);
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 10, 1), 11);
  EXPECT_DOUBLE_EQ(o.kernel_finish(0, 0.5, 0.25), 0.75) << "forgotten once a kernel far after it was placed";
}

}  // namespace
}  // namespace vgpu::timing
