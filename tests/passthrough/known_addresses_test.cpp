// Answers to "is this word an address" remembered per thread (vgpu/passthrough/known_addresses.h):
// through a random run of questions, allocations and frees (the device generation), readings of
// the host's mappings (the host generation) and time passing, every answer must be the one the
// lookups themselves give at that moment.
#include "passthrough/known_addresses.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>
#include <utility>
#include "address_world.h"

namespace {

using vgpu::pt::KnownAddresses;

using World = vgpu::test::AddressWorld;

TEST(KnownAddresses, RememberedAnswersAreTheLookupsAnswers) {
  std::mt19937_64 rng(21);
  std::vector<uint64_t> words;
  for (int i = 0; i < 64; ++i) words.push_back(rng() % 2 ? (uint64_t{0x7f00} << 32) + 64 * i : 0x10000 + 8 * i);
  for (int i = 0; i < 8; ++i) words.push_back((uint64_t{i + 1} << 32) | i);  // pairs of sizes
  World w;
  World truth;  // the same world, asked directly
  KnownAddresses known;
  int asked = 0, mismatches = 0, remembered = 0;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t v = words[rng() % words.size()];
    switch (rng() % 200) {
      case 0:  // an allocation or a free
        if (w.device.count(v)) w.device.erase(v); else w.device.insert(v);
        ++w.device_generation;
        break;
      case 1:  // a mapping made or gone (seen at the next reading)
        if (w.host_now.count(v)) w.host_now.erase(v); else w.host_now.insert(v);
        break;
      case 2:
        w.now += 0.1;
        break;
      default: {
        const uint32_t dg = w.device_generation, hg = w.host_generation;  // read first, as a launch does
        int asks = 0;
        const bool got = known.is_address(v, &w, dg, hg, [&w] { return w.now; }, [&w, &asks](uint64_t x) {
          ++asks;
          return w.ask(x);
        });
        truth = w;  // the lookups' own answer now (whatever the asking above read)
        const bool expected = truth.ask(v).first;
        mismatches += got != expected;
        remembered += asks == 0;
        ++asked;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(remembered, asked / 2) << "most answers must come from memory";
}

}  // namespace
