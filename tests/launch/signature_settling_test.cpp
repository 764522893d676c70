// Launch signatures that settle although stack garbage in a by-value struct makes every launch's
// bytes new, while a size inside the struct still keys (front/launch/signature_settling.h).
// The passthrough's use of it (measure until settled, then take the settled duration) is played
// here with a duration per launch chosen by the test.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "garbage_launch.h"
#include "front/launch/launch_signature.h"
#include "front/launch/signature_settling.h"

namespace vgpu {
namespace {

using test_launch::Args;
using test_launch::signature_of;

// One launch as the passthrough does it: the settled duration, else a measurement.
struct Launcher {
  SettlingSignatures table{3};
  int measured = 0;
  std::optional<double> launch(const LaunchSignature& s, double real_seconds) {
    if (std::optional<double> d = table.settled(s)) return d;
    ++measured;
    table.add_sample(s, real_seconds);
    return std::nullopt;
  }
};

Args garbage_args(std::mt19937& rng, uint32_t n) {
  Args a{};
  a.n = n;
  a.dims = 1;
  for (uint32_t& w : a.tail) w = static_cast<uint32_t>(rng());
  return a;
}

// 2 us per 1000 elements, plus a host launch latency on the function's first launch.
double duration_of(uint32_t n) { return 2e-6 * n / 1000.0; }

TEST(SignatureSettling, StructGarbageSettlesAfterAFewLaunches) {
  std::mt19937 rng(21);
  Launcher l;
  std::set<std::string> distinct;
  int settled_late = 0;
  for (int i = 0; i < 40; ++i) {
    const LaunchSignature s = signature_of(garbage_args(rng, 4096));
    distinct.insert(s.bytes);
    const double real = duration_of(4096) * (1 + 0.01 * (i % 3)) + (i == 0 ? 20e-6 : 0);
    const std::optional<double> d = l.launch(s, real);
    if (i >= 20) {
      settled_late += d.has_value();
      if (d) {
        EXPECT_NEAR(*d, duration_of(4096), 0.02 * duration_of(4096));
      }
    }
  }
  EXPECT_EQ(distinct.size(), 40u) << "the garbage must make every signature new";
  EXPECT_EQ(settled_late, 20) << "launches 20..39 all take the settled duration";
  EXPECT_LE(l.measured, 8);
  EXPECT_EQ(l.table.groups(), 2u) << "the first launch (with its latency), then one settled group";
}

TEST(SignatureSettling, SizeInsideTheStructStillKeys) {
  std::mt19937 rng(7);
  Launcher l;
  for (int i = 0; i < 12; ++i) l.launch(signature_of(garbage_args(rng, 1000)), duration_of(1000));
  ASSERT_TRUE(l.table.settled(signature_of(garbage_args(rng, 1000))).has_value());
  // Another size, same kernel, grid, block and garbage: measured, then settled on its own.
  EXPECT_FALSE(l.table.settled(signature_of(garbage_args(rng, 8000))).has_value());
  const int before = l.measured;
  for (int i = 0; i < 12; ++i) l.launch(signature_of(garbage_args(rng, 8000)), duration_of(8000));
  EXPECT_GE(l.measured - before, 2) << "measured until two agree (one fewer than the 3 wanted)";
  const std::optional<double> big = l.table.settled(signature_of(garbage_args(rng, 8000)));
  const std::optional<double> small = l.table.settled(signature_of(garbage_args(rng, 1000)));
  ASSERT_TRUE(big && small);
  EXPECT_NEAR(*big, duration_of(8000), 1e-9);
  EXPECT_NEAR(*small, duration_of(1000), 1e-9);
  // The size word differed alone with durations 8x apart: it keys for good.
  const std::vector<size_t> free = l.table.free_words(signature_of(garbage_args(rng, 1000)));
  EXPECT_EQ(std::count(free.begin(), free.end(), size_t{0}), 0) << "word 0 (n) must stay keyed";
  EXPECT_EQ(free.size(), 10u) << "the tail's ten words are free";
}

// Latency-bound launches of 1000 and 1001 elements take the same time, so the size stops
// keying; 10^6 elements must still be measured, not taken from the small ones.
TEST(SignatureSettling, AFreedSizeDoesNotReachSizesNeverMeasured) {
  Launcher l;
  auto flat = [](uint32_t n) { return n <= 4096 ? 3e-6 : duration_of(n); };
  for (int i = 0; i < 12; ++i) {
    const uint32_t n = 1000 + (i % 2);
    Args a{};
    a.n = n;
    l.launch(signature_of(a), flat(n));
  }
  Args small{};
  small.n = 1000;
  ASSERT_TRUE(l.table.settled(signature_of(small)).has_value());
  EXPECT_EQ(l.table.free_words(signature_of(small)), std::vector<size_t>{0}) << "n stopped keying";
  Args big{};
  big.n = 1'000'000;
  EXPECT_FALSE(l.table.settled(signature_of(big)).has_value()) << "never measured: no duration";
  for (int i = 0; i < 5; ++i) l.launch(signature_of(big), flat(big.n));
  const std::optional<double> d = l.table.settled(signature_of(big));
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(*d, flat(big.n), 1e-9);
  EXPECT_NEAR(*l.table.settled(signature_of(small)), 3e-6, 1e-12);
}

// A counter that changes on every launch without changing the work (a philox offset) is
// measured each time it has doubled its span, not on every launch.
TEST(SignatureSettling, ACounterIsMeasuredLogarithmicallyOften) {
  Launcher l;
  Args a{};
  a.n = 4096;
  for (uint32_t i = 0; i < 2000; ++i) {
    a.dims = 100 + 4 * i;  // the counter
    l.launch(signature_of(a), duration_of(4096));
  }
  EXPECT_LE(l.measured, 20) << "of 2000 launches";
  std::printf("counter: %d of 2000 launches measured\n", l.measured);
}

// What is learnt about one grid says nothing about another.
TEST(SignatureSettling, DifferentGridsAreDifferentFamilies) {
  std::mt19937 rng(3);
  Launcher l;
  for (int i = 0; i < 10; ++i) l.launch(signature_of(garbage_args(rng, 1000), 64), duration_of(1000));
  EXPECT_FALSE(l.table.settled(signature_of(garbage_args(rng, 1000), 128)).has_value());
  EXPECT_TRUE(l.table.free_words(signature_of(garbage_args(rng, 1000), 128)).empty());
}

// Samples that include host work (a function's first launch in another context) are slow for
// a reason no byte gives: told so, the table learns nothing from them; else the one word they
// differed in would key for good (after two such samples: one alone pins nothing).
TEST(SignatureSettling, SamplesWithHostWorkTeachNothing) {
  for (bool learn_from_slow : {false, true}) {
    SettlingSignatures t(3);
    Args a{};
    a.n = 1000;
    auto with_garbage = [&a](uint32_t g) {
      Args b = a;
      b.tail[0] = g;
      return signature_of(b);
    };
    t.add_sample(with_garbage(0x90000001), 10e-6);                   // the family's first
    t.add_sample(with_garbage(0x90000002), 10e-6);
    t.add_sample(with_garbage(0x90000003), 40e-6, learn_from_slow);  // slow: host work
    t.add_sample(with_garbage(0x90000005), 45e-6, learn_from_slow);
    t.add_sample(with_garbage(0x90000004), 10e-6);
    const std::vector<size_t> free = t.free_words(with_garbage(0));
    if (learn_from_slow) {
      EXPECT_TRUE(free.empty()) << "the slow sample pinned the garbage word";
    } else {
      EXPECT_EQ(free, std::vector<size_t>{2}) << "tail[0], the third word";
    }
  }
}

// One sample slowed down (a shared GPU) pins nothing: the garbage word it alone differed in
// is freed by the next agreeing pair.
TEST(SignatureSettling, OneSlowSamplePinsNothing) {
  SettlingSignatures t(3);
  Args a{};
  a.n = 1000;
  auto with_garbage = [&a](uint32_t g) {
    Args b = a;
    b.tail[0] = g;
    return signature_of(b);
  };
  t.add_sample(with_garbage(0x90000001), 10e-6);
  t.add_sample(with_garbage(0x90000002), 10e-6);
  t.add_sample(with_garbage(0x90000003), 40e-6);
  t.add_sample(with_garbage(0x90000004), 10e-6);
  EXPECT_EQ(t.free_words(with_garbage(0)), std::vector<size_t>{2});
}

// Where several processes share the GPU, another context's time slice can land inside a
// measurement and only ever adds time: a group settles on its smallest sample, and only once a
// second sample agrees with it (within 25% or 50 us); samples that disagree ask for more, up to
// kExtraSamples beyond those wanted, after which the smallest is taken. (Seen on an H200,
// 2026-11-26: a 6.67 ms GEMM measured 7.06 and 9.68 ms on one rank of a DDP job, 14.10 and
// 6.66 ms on the other; the median of two settled at 8.37 ms.)
TEST(SignatureSettling, DisturbedSamplesAskForMoreAndTheSmallestCounts) {
  Args a{};
  a.n = 4096;
  const LaunchSignature s = signature_of(a, 512);
  SettlingSignatures t(3);
  double least = 0;  // what each measured launch itself takes: the least disturbed sample so far
  EXPECT_FALSE(t.add_sample(s, 6.668e-3, true, &least));  // first launch: left out of the duration
  EXPECT_DOUBLE_EQ(least, 6.668e-3);
  EXPECT_FALSE(t.add_sample(s, 7.058e-3, true, &least));
  EXPECT_DOUBLE_EQ(least, 7.058e-3);
  EXPECT_FALSE(t.add_sample(s, 9.682e-3, true, &least)) << "7.06 and 9.68 ms disagree: not settled yet";
  EXPECT_DOUBLE_EQ(least, 7.058e-3) << "the 9.68 ms launch takes 7.06 ms, not what a time slice made it";
  EXPECT_FALSE(t.settled(s));
  const std::optional<double> d = t.add_sample(s, 6.660e-3);
  ASSERT_TRUE(d) << "6.66 and 7.06 ms agree";
  EXPECT_DOUBLE_EQ(*d, 6.660e-3);
  EXPECT_DOUBLE_EQ(*t.settled(s), 6.660e-3);

  // Samples that never agree settle at the cap, on the smallest.
  Args b{};
  b.n = 8192;
  const LaunchSignature u = signature_of(b, 512);
  const int cap = 3 + SettlingSignatures::kExtraSamples;
  std::optional<double> settled;
  int samples = 0;
  for (double x = 1e-3; !settled && samples < 100; x *= 1.5) settled = t.add_sample(u, x), ++samples;
  EXPECT_EQ(samples, cap);
  ASSERT_TRUE(settled);
  EXPECT_DOUBLE_EQ(*settled, 1.5e-3) << "the smallest after the first";

  // Samples that agree settle after those wanted, as before, on the smallest.
  Args c{};
  c.n = 16384;
  const LaunchSignature v = signature_of(c, 512);
  EXPECT_FALSE(t.add_sample(v, 30e-6));
  EXPECT_FALSE(t.add_sample(v, 10.2e-6));
  EXPECT_EQ(t.add_sample(v, 10.0e-6), std::optional<double>(10.0e-6));
}

// A kernel launched once a step gives one sample a step: wanting three, it was measured in a
// job's third step too even when its first two agreed to the nanosecond. Two samples that agree
// closely (within 5% or 0.5 us) settle it one sample early, on the smaller; two that agree only
// within the looser settling rule (25%) still ask for the third, and so do more wanted samples.
TEST(SignatureSettling, TwoCloseSamplesSettleOneEarly) {
  Args a{};
  a.n = 1 << 20;
  const LaunchSignature s = signature_of(a, 256);
  SettlingSignatures t(3);
  EXPECT_FALSE(t.add_sample(s, 10.5e-6));
  EXPECT_EQ(t.add_sample(s, 10.4e-6), std::optional<double>(10.4e-6)) << "10.5 and 10.4 us agree within 0.5 us";
  EXPECT_EQ(t.settled(s), std::optional<double>(10.4e-6));

  // 3.37 and 3.35 ms: the function's first launch agreeing with the next within 5%.
  a.n = 1 << 21;
  const LaunchSignature big = signature_of(a, 256);
  EXPECT_FALSE(t.add_sample(big, 3.3678e-3, /*learn=*/false));
  EXPECT_EQ(t.add_sample(big, 3.3546e-3), std::optional<double>(3.3546e-3));

  // 44.1 then 19.5 us (a first launch's latency): the third sample decides, the first left out.
  a.n = 1 << 22;
  const LaunchSignature cold = signature_of(a, 256);
  EXPECT_FALSE(t.add_sample(cold, 44.1e-6));
  EXPECT_FALSE(t.add_sample(cold, 19.5e-6));
  EXPECT_EQ(t.add_sample(cold, 19.7e-6), std::optional<double>(19.5e-6));

  // 100 and 108 us agree within the settling rule (25%) but not closely: a third is wanted.
  a.n = 1 << 23;
  const LaunchSignature loose = signature_of(a, 256);
  EXPECT_FALSE(t.add_sample(loose, 100e-6));
  EXPECT_FALSE(t.add_sample(loose, 108e-6));
  EXPECT_EQ(t.add_sample(loose, 101e-6), std::optional<double>(101e-6)) << "the first left out from three on";

  // Wanting five, two agreeing samples are not enough; four are (one fewer than wanted).
  SettlingSignatures five(5);
  a.n = 1 << 24;
  const LaunchSignature f = signature_of(a, 256);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(five.add_sample(f, 50e-6)) << "sample " << i + 1;
  EXPECT_EQ(five.add_sample(f, 50e-6), std::optional<double>(50e-6));

  // Wanting one or two: as before (one settles at once, two at the second when they agree).
  SettlingSignatures one(1), two(2);
  EXPECT_EQ(one.add_sample(s, 7e-6), std::optional<double>(7e-6));
  EXPECT_FALSE(two.add_sample(s, 7e-6));
  EXPECT_EQ(two.add_sample(s, 7.1e-6), std::optional<double>(7e-6));
}

TEST(SignatureSettling, DurationRules) {
  EXPECT_TRUE(durations_agree(10e-6, 10.4e-6));
  EXPECT_TRUE(durations_agree(2e-6, 2.4e-6));  // within 0.5 us
  EXPECT_FALSE(durations_agree(10e-6, 11e-6));
  EXPECT_TRUE(durations_differ(10e-6, 12e-6));
  EXPECT_FALSE(durations_differ(2e-6, 2.5e-6));  // under 1 us
  EXPECT_FALSE(durations_differ(100e-6, 110e-6));
}

// Signatures from the kernel-time database settle as they are, and malformed bytes are ignored.
TEST(SignatureSettling, DatabaseDurationsAndMalformedSignatures) {
  SettlingSignatures t(3);
  Args a{};
  a.n = 5;
  t.settle(signature_of(a), 7e-6);
  EXPECT_EQ(t.settled(signature_of(a)), std::optional<double>(7e-6));
  EXPECT_TRUE(t.seen(signature_of(a)));
  LaunchSignature junk{"not a signature"};
  EXPECT_FALSE(t.settled(junk).has_value());
  EXPECT_FALSE(t.add_sample(junk, 1e-6).has_value());
  EXPECT_FALSE(t.seen(junk));
}

// settled(signature, hash) remembers its answers: it must answer exactly as settled(signature)
// through a run that measures, settles, adopts and frees words, with hashes that collide (every
// signature here hashes to one of three values: the memo must compare the bytes, and forget
// everything that changes).
TEST(SignatureSettling, RememberedAnswersAreTheAnswers) {
  std::mt19937 rng(2111);
  SettlingSignatures t(3);
  SettlingSignatures donor(1);
  std::vector<LaunchSignature> pool;
  for (uint32_t n : {1000u, 1500u, 4096u, 9000u})
    for (int k = 0; k < 4; ++k) pool.push_back(signature_of(garbage_args(rng, n)));
  pool.push_back(signature_of(garbage_args(rng, 4096), 128));  // another family
  int answered = 0, mismatches = 0;
  for (int i = 0; i < 3000; ++i) {
    const LaunchSignature& s = pool[rng() % pool.size()];
    const uint64_t hash = rng() % 3;
    const std::optional<double> remembered = t.settled(s, hash);
    const std::optional<double> fresh = t.settled(s);
    mismatches += remembered != fresh;
    answered += fresh.has_value();
    switch (rng() % 8) {
      case 0:
      case 1: {  // a measurement (a size's work, noise, now and then host work)
        Args a{};
        std::memcpy(&a, s.bytes.data() + s.bytes.size() - sizeof a, sizeof a);
        t.add_sample(s, duration_of(a.n) * (1 + 0.01 * (rng() % 3)), /*learn=*/rng() % 5 != 0);
        break;
      }
      case 2:
        if (rng() % 50 == 0) t.settle(signature_of(garbage_args(rng, 777)), 3e-6);
        break;
      case 3:
        if (rng() % 100 == 0) {
          donor.settle(pool[rng() % pool.size()], 5e-6);
          for (const SettledGroup& g : donor.export_groups()) t.adopt(g);
        }
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(answered, 1000) << "the run must reach settled groups";
}

}  // namespace
}  // namespace vgpu
