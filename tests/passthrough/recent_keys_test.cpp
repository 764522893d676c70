// A thread's recent signature keys (vgpu/passthrough/recent_keys.h): through a random run of
// launches of a few functions whose bytes change now and then (one word, the length, or another
// function colliding in the same slot), every key must be the hash of that launch's bytes.
#include "passthrough/recent_keys.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace {

using vgpu::pt::RecentKeys;

uint64_t hash_of(std::string_view bytes) { return std::hash<std::string_view>{}(bytes); }

TEST(RecentKeys, EveryKeyIsTheHashOfItsLaunchsBytes) {
  std::mt19937_64 rng(21);
  RecentKeys keys;
  // Functions 0x10 apart share no slot; 0x400 apart (64 slots of 16) share one: 0x1000 and 0x1400.
  const uintptr_t functions[4] = {0x1000, 0x1010, 0x1400, 0x2020};
  std::string bytes[4] = {"empty....", "gemm_kernel........", "collides", "elementwise"};
  int computed = 0, wrong = 0;
  for (int step = 0; step < 20000; ++step) {
    const int i = static_cast<int>(rng() % 4);
    const int change = static_cast<int>(rng() % 20);
    if (change == 0) bytes[i][rng() % bytes[i].size()] = static_cast<char>('a' + rng() % 26);  // a word moved
    if (change == 1) bytes[i].push_back('x');                                                 // another length
    if (change == 2 && bytes[i].size() > 4) bytes[i].pop_back();
    const uint64_t k = keys.key(reinterpret_cast<const void*>(functions[i]), bytes[i], [&](std::string_view b) {
      ++computed;
      return hash_of(b);
    });
    if (k != hash_of(bytes[i])) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
  // Empty bytes in a slot never filled are hashed too.
  EXPECT_EQ(keys.key(reinterpret_cast<const void*>(0x3000), "", hash_of), hash_of(""));
  // Half the launches repeat their function's last bytes in a slot of their own: remembered.
  EXPECT_LT(computed, 20000 * 3 / 4);
}

}  // namespace
