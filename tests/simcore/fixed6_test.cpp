// vgpu-netsim's fixed-notation writer (simcore/tools/fixed6.h) against std::to_chars, whose
// "%.6f" digits it must reproduce exactly: random doubles of every magnitude, exact ties
// (k + 1/2 millionths that a double holds exactly), and the edges of its fast path.
#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "fixed6.h"

namespace {

std::string fast(double v) {
  char buf[500];
  return std::string(buf, simcore::netsim::write_fixed6(buf, v));
}

std::string reference(double v) {
  char buf[500];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 6).ptr);
}

TEST(Fixed6, MatchesToCharsOnRandomDoubles) {
  std::mt19937_64 rng(11);
  for (int k = 0; k < 300000; ++k) {
    const double scaled = std::ldexp(static_cast<double>(rng() >> 11), -static_cast<int>(rng() % 90));
    ASSERT_EQ(fast(scaled), reference(scaled)) << scaled;
    uint64_t bits = rng() & ~(uint64_t{1} << 63);
    double any;
    std::memcpy(&any, &bits, sizeof any);
    if (std::isfinite(any)) {
      ASSERT_EQ(fast(any), reference(any)) << any;
    }
  }
}

TEST(Fixed6, TiesGoToEvenAsPrintfDoes) {
  EXPECT_EQ(fast(1.0 / 128), "0.007812");  // 7812.5 millionths
  EXPECT_EQ(fast(3.0 / 128), "0.023438");  // 23437.5
  for (long k = 0; k < 100000; ++k) {
    const double tie = (2.0 * static_cast<double>(k) + 1) / 128.0;  // every one a tie
    ASSERT_EQ(fast(tie), reference(tie)) << tie;
    const double micro = static_cast<double>(k) * 1e-6;
    ASSERT_EQ(fast(micro), reference(micro)) << micro;
  }
}

TEST(Fixed6, EdgesOfTheFastPath) {
  const double cases[] = {0.0, -0.0, 5e-324, 1e-300, 4.9999999e-7, 5e-7, 1.0,
                          17592186044415.99, 17592186044416.0, 1e20, 1e300, -1.5,
                          std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::quiet_NaN()};
  for (double v : cases) EXPECT_EQ(fast(v), reference(v)) << v;
}

}  // namespace
