// The argument-register trampolines (vgpu/front/export_tables/register_trampolines.h) on their own:
// a slot reached through one sees every argument as the caller passed it (integers, doubles,
// arguments on the stack), except a watched address in an integer register, which it sees
// rewritten; and the caller gets back exactly what the slot returned (both return registers, a
// double). With nothing watched, or nothing of the range passed, the rewrite is never called.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "front/export_tables/register_trampolines.h"

namespace {

std::array<uint64_t, 4> g_watched{};  // the watched range: its addresses stand for "stubs"
constexpr uintptr_t kRewritten = 0x5eed0000;
int g_rewrites = 0;

struct Seen {
  uintptr_t ints[6];
  double d0, d1;
  uintptr_t stack0, stack1, stack2;
} g_seen;

struct Pair {
  uint64_t a, b;  // returned in rax and rdx
};

// A slot of a signature the trampoline knows nothing of: six integers, two doubles (xmm0, xmm1),
// three arguments on the stack; returns in rax:rdx.
extern "C" Pair slot(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5, double d0,
                     double d1, uintptr_t s0, uintptr_t s1, uintptr_t s2) {
  g_seen = {{a0, a1, a2, a3, a4, a5}, d0, d1, s0, s1, s2};
  return {a0 ^ s2, static_cast<uint64_t>(d0 * 1000 + d1)};
}
using SlotFn = Pair (*)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, double, double, uintptr_t,
                        uintptr_t, uintptr_t);

extern "C" double float_slot(double x, uintptr_t p, float y) { return x * 2 + y + static_cast<double>(p & 1); }
using FloatFn = double (*)(double, uintptr_t, float);

void watch(bool on) {
  vgpu_trampoline_watch_base = reinterpret_cast<uintptr_t>(g_watched.data());
  vgpu_trampoline_watch_span = on ? sizeof(g_watched) : 0;
}

}  // namespace

// The test's rewrite: any watched address becomes kRewritten + its index.
extern "C" void vgpu_trampoline_rewrite(uintptr_t* regs) {
  ++g_rewrites;
  // As any C++ function may: the vector registers the slot's doubles are in are scratch.
  asm volatile("xorps %%xmm0, %%xmm0\n\txorps %%xmm1, %%xmm1\n\txorps %%xmm2, %%xmm2\n\txorps %%xmm7, %%xmm7" ::
                   : "xmm0", "xmm1", "xmm2", "xmm7");
  for (int i = 0; i < 6; ++i) {
    const uintptr_t off = regs[i] - vgpu_trampoline_watch_base;
    if (off < vgpu_trampoline_watch_span) regs[i] = kRewritten + off / sizeof(uint64_t);
  }
}

TEST(RegisterTrampolines, PassEverythingThroughWhenNothingWatchedIsPassed) {
  watch(true);
  g_rewrites = 0;
  const auto f = reinterpret_cast<SlotFn>(vgpu::darkapi::register_trampoline(0, reinterpret_cast<const void*>(&slot)));
  ASSERT_NE(f, nullptr);
  const Pair r = f(1, 2, 3, 4, 5, 6, 1.5, 0.25, 70, 80, 90);
  EXPECT_EQ(g_rewrites, 0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(g_seen.ints[i], static_cast<uintptr_t>(i + 1));
  EXPECT_EQ(g_seen.d0, 1.5);
  EXPECT_EQ(g_seen.d1, 0.25);
  EXPECT_EQ(g_seen.stack0, 70u);
  EXPECT_EQ(g_seen.stack1, 80u);
  EXPECT_EQ(g_seen.stack2, 90u);
  EXPECT_EQ(r.a, 1u ^ 90u);
  EXPECT_EQ(r.b, 1500u);
}

TEST(RegisterTrampolines, RewriteWatchedRegistersAndKeepTheRest) {
  watch(true);
  const auto f = reinterpret_cast<SlotFn>(vgpu::darkapi::register_trampoline(1, reinterpret_cast<const void*>(&slot)));
  const auto w = [](int i) { return reinterpret_cast<uintptr_t>(&g_watched[static_cast<size_t>(i)]); };
  for (int reg = 0; reg < 6; ++reg) {
    SCOPED_TRACE(reg);
    g_rewrites = 0;
    uintptr_t a[6] = {11, 12, 13, 14, 15, 16};
    a[reg] = w(reg % 4);
    const Pair r = f(a[0], a[1], a[2], a[3], a[4], a[5], 2.75, 1e-3, 0xaaaa, 0xbbbb, 0xcccc);
    EXPECT_EQ(g_rewrites, 1);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(g_seen.ints[i], i == reg ? kRewritten + static_cast<uintptr_t>(reg % 4) : a[i]);
    EXPECT_EQ(g_seen.d0, 2.75);  // xmm registers saved around the rewrite
    EXPECT_EQ(g_seen.d1, 1e-3);
    EXPECT_EQ(g_seen.stack0, 0xaaaau);  // the caller's stack arguments untouched
    EXPECT_EQ(g_seen.stack1, 0xbbbbu);
    EXPECT_EQ(g_seen.stack2, 0xccccu);
    EXPECT_EQ(r.a, g_seen.ints[0] ^ 0xccccu);  // both return registers come back
    EXPECT_EQ(r.b, 2750u);
  }
  // The address just past the range is not watched.
  g_rewrites = 0;
  f(reinterpret_cast<uintptr_t>(g_watched.data() + g_watched.size()), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  EXPECT_EQ(g_rewrites, 0);
}

TEST(RegisterTrampolines, ADoubleComesBackInXmm0) {
  watch(true);
  const auto f = reinterpret_cast<FloatFn>(vgpu::darkapi::register_trampoline(2, reinterpret_cast<const void*>(&float_slot)));
  g_rewrites = 0;
  EXPECT_EQ(f(3.25, reinterpret_cast<uintptr_t>(&g_watched[1]), 0.5f), 3.25 * 2 + 0.5 + 1);  // kRewritten + 1 is odd
  EXPECT_EQ(g_rewrites, 1);
  EXPECT_EQ(f(3.25, 2, 0.5f), 7.0);
}

TEST(RegisterTrampolines, NothingWatchedBeforeARangeIsSet) {
  watch(false);
  g_rewrites = 0;
  const auto f = reinterpret_cast<SlotFn>(vgpu::darkapi::register_trampoline(3, reinterpret_cast<const void*>(&slot)));
  f(reinterpret_cast<uintptr_t>(&g_watched[0]), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  EXPECT_EQ(g_rewrites, 0);
  EXPECT_EQ(g_seen.ints[0], reinterpret_cast<uintptr_t>(&g_watched[0]));
  EXPECT_EQ(vgpu::darkapi::register_trampoline(vgpu::darkapi::kRegisterTrampolines, nullptr), nullptr);
}
