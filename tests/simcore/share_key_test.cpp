// The flow solver's packed heap key (share_key.h) must order exactly as the pair (share, link)
// did, or the max-min filling would freeze links in another order and round differently.
#include "share_key.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace simcore::detail {
namespace {

TEST(ShareKey, RoundTripsShareAndLink) {
  for (double s : {0.0, 5e-324, 1e-12, 0.5, 1.0, 3.0e9, 1.7e308,
                   std::numeric_limits<double>::infinity()})
    for (LinkId l : {0u, 1u, 77u, 0xFFFFFFFFu}) {
      const ShareKey k = ShareKey::of(s, l);
      EXPECT_EQ(k.share(), s);
      EXPECT_EQ(k.link(), l);
    }
}

// Random shares (many ties, values across magnitudes, zeros) and links: sorting by the key
// gives the same sequence as sorting by (share, link).
TEST(ShareKey, OrdersAsShareThenLink) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::pair<double, LinkId>> pairs;
    const int n = 1 + static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) {
      double share;
      switch (rng() % 4) {
        case 0: share = static_cast<double>(rng() % 5); break;  // ties and zeros
        case 1: share = std::ldexp(static_cast<double>(rng() % 1000 + 1), -static_cast<int>(rng() % 1060)); break;
        case 2: share = std::uniform_real_distribution<double>(0, 1e11)(rng); break;
        default: share = 12.5e9 / static_cast<double>(rng() % 64 + 1); break;
      }
      pairs.emplace_back(share, static_cast<LinkId>(rng() % 50));
    }
    std::vector<ShareKey> keys;
    for (const auto& [s, l] : pairs) keys.push_back(ShareKey::of(s, l));
    std::sort(pairs.begin(), pairs.end());
    std::sort(keys.begin(), keys.end());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(keys[i].share(), pairs[i].first) << "round " << round << " index " << i;
      ASSERT_EQ(keys[i].link(), pairs[i].second) << "round " << round << " index " << i;
    }
  }
}

}  // namespace
}  // namespace simcore::detail
