// A thread's recent launch signatures (vgpu/passthrough/recent_signatures.h), built as
// launch_facts.cpp builds them (KnownAddresses' answers, the least until of its "no"s): through a
// random run of launches of a few functions (two often with the same arguments: one set of slots)
// whose parameter words and shapes change now and then, among allocations and frees (the device
// generation), new host mappings (seen at the next reading: the host generation) and time
// passing, every signature must be the one built from the lookups' own answers at that moment, and
// what was derived from a remembered signature (its key) that signature's.
#include "passthrough/recent_signatures.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "passthrough/known_addresses.h"
#include "address_world.h"

namespace {

using vgpu::LaunchShape;
using vgpu::LaunchSignature;
using vgpu::ParamSlot;
using vgpu::pt::KnownAddresses;
using vgpu::pt::RecentSignatures;

using World = vgpu::test::AddressWorld;

// A function: its parameter layout (an 8-byte pointer-or-value, a 4-byte count, a 64-byte struct
// by value) and the words of its next launch.
struct Function {
  const void* handle;
  std::string name;
  std::vector<ParamSlot> slots{{0, 8}, {8, 4}, {16, 64}};
  std::vector<uint64_t> words = std::vector<uint64_t>(10, 0);  // the 80-byte block as 8-byte words
  LaunchShape shape;
  std::vector<uint8_t> block() const {
    std::vector<uint8_t> b(80);
    std::memcpy(b.data(), words.data(), 80);
    return b;
  }
};

TEST(RecentSignatures, EverySignatureIsTheOneItsLookupsGiveNow) {
  std::mt19937_64 rng(21);
  // Device addresses, host addresses, pairs of sizes (user-range words that are no address) and
  // small values.
  std::vector<uint64_t> pool;
  for (int i = 0; i < 16; ++i) pool.push_back((uint64_t{0x7f00} << 32) + 64 * i);
  for (int i = 0; i < 8; ++i) pool.push_back((static_cast<uint64_t>(i + 1) << 32) | static_cast<uint64_t>(i));
  for (int i = 0; i < 8; ++i) pool.push_back(0x10000 + 8 * i);
  for (int i = 0; i < 4; ++i) pool.push_back(static_cast<uint64_t>(i));
  std::vector<Function> functions(4);
  const uintptr_t handles[4] = {0x1000, 0x1010, 0x1400, 0x2020};
  for (size_t i = 0; i < functions.size(); ++i) {
    functions[i].handle = reinterpret_cast<const void*>(handles[i]);
    functions[i].name = "kernel" + std::to_string(i);
    for (uint64_t& w : functions[i].words) w = pool[rng() % pool.size()];
  }
  World w;
  KnownAddresses known;
  RecentSignatures recent;
  int launches = 0, wrong = 0, built = 0, wrong_derived = 0;
  auto key_of = [](std::string_view bytes) { return std::hash<std::string_view>{}(bytes); };
  for (int step = 0; step < 40000; ++step) {
    Function& fn = functions[rng() % functions.size()];
    switch (rng() % 100) {
      case 0: {  // an allocation or a free
        const uint64_t v = pool[rng() % pool.size()];
        if (w.device.count(v)) w.device.erase(v); else w.device.insert(v);
        ++w.device_generation;
        break;
      }
      case 1: {  // a mapping made or gone (seen at the next reading)
        const uint64_t v = pool[rng() % pool.size()];
        if (w.host_now.count(v)) w.host_now.erase(v); else w.host_now.insert(v);
        break;
      }
      case 2:
        w.now += 0.1;
        break;
      case 3:  // one word of the parameters changes
        fn.words[rng() % fn.words.size()] = pool[rng() % pool.size()];
        break;
      case 4:  // another shape
        fn.shape.grid[rng() % 3] = static_cast<uint32_t>(1 + rng() % 4);
        break;
      default: {
        // Often the same arguments as another function (signatures differing only in the name,
        // in one set of slots).
        if (&fn == &functions[2] && rng() % 2 == 0) {
          fn.words = functions[0].words;
          fn.shape = functions[0].shape;
        }
        const std::vector<uint8_t> block = fn.block();
        const uint32_t dg = w.device_generation, hg = w.host_generation;  // read first, as a launch does
        double until = std::numeric_limits<double>::infinity();
        auto is_pointer = [&](uint64_t v) {
          return known.is_address(v, &w, dg, hg, [&w] { return w.now; }, [&w](uint64_t x) { return w.ask(x); },
                                  &until);
        };
        LaunchSignature got;
        RecentSignatures::Derived& derived = recent.signature(
            {fn.handle, &w, fn.shape, block, dg, hg}, [&w] { return w.now; },
            [&](LaunchSignature* out) {
              ++built;
              vgpu::build_launch_signature(fn.name, fn.shape, fn.slots, block, is_pointer, out);
              return until;
            },
            &got);
        // What was derived from the signature (its key) stands only while it is that signature.
        if (derived.known) wrong_derived += derived.key != key_of(got.bytes);
        derived = {key_of(got.bytes), true};
        // A launch during which the host's mappings were read again holds answers of both
        // readings (as every launch's signature could before it was remembered): no one
        // reading's answers to compare with. Kept under the older generation: not met again.
        if (w.host_generation != hg) continue;
        World truth = w;  // the lookups' own answers now (whatever the launch above read)
        const LaunchSignature expected = vgpu::build_launch_signature(
            fn.name, fn.shape, fn.slots, block, [&truth](uint64_t v) { return truth.ask(v).first; });
        wrong += got != expected;
        ++launches;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(wrong_derived, 0);
  EXPECT_LT(built, launches / 2) << "most signatures must come from memory";
}

// A kernel launched with many arguments in turn (an elementwise kernel on each tensor of a step)
// finds each launch's signature again after a few rounds, and tells them apart; one whose raw
// launches never repeat is kept only now and then.
TEST(RecentSignatures, AKernelLaunchedWithManyArgumentsInTurnFindsEach) {
  RecentSignatures recent;
  const LaunchShape shape;
  const std::vector<ParamSlot> slots{{0, 8}, {8, 8}};
  auto no_pointer = [](uint64_t) { return false; };
  int built = 0, wrong = 0, total_built = 0;
  auto launch = [&](const void* function, uint64_t a, uint64_t b) {
    const uint64_t words[2] = {a, b};
    std::vector<uint8_t> block(16);
    std::memcpy(block.data(), words, 16);
    LaunchSignature got;
    recent.signature(
        {function, &recent, shape, block, 0, 0}, [] { return 0.0; },
        [&](LaunchSignature* out) {
          ++built;
          ++total_built;
          vgpu::build_launch_signature("elementwise", shape, slots, block, no_pointer, out);
          return std::numeric_limits<double>::infinity();
        },
        &got);
    wrong += got != vgpu::build_launch_signature("elementwise", shape, slots, block, no_pointer);
  };
  const void* elementwise = reinterpret_cast<const void*>(0x1000);
  int built_last_rounds = 0;
  for (int round = 0; round < 10; ++round) {
    if (round == 8) built = 0;
    for (uint64_t i = 0; i < 64; ++i) launch(elementwise, i, 2 * i + 1);
  }
  built_last_rounds = built;
  EXPECT_EQ(recent.built(), static_cast<unsigned long>(total_built)) << "the counts are the launches'";
  EXPECT_EQ(recent.found() + recent.built(), 64u * 10u);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(built_last_rounds, 0) << "every launch found again";
  // Raw launches that never repeat (a word that changes every time): kept only after each
  // kRetryEvery-th, once kGiveUpAfter missed in a row.
  const unsigned long kept_before = recent.kept();
  constexpr unsigned long kLaunches = 16 * RecentSignatures::kGiveUpAfter;
  for (uint64_t i = 0; i < kLaunches; ++i) launch(reinterpret_cast<const void*>(0x2000), 1u << 20, i);
  EXPECT_EQ(wrong, 0);
  EXPECT_LE(recent.kept() - kept_before,
            RecentSignatures::kGiveUpAfter + kLaunches / RecentSignatures::kRetryEvery);
}

// Two launches whose blocks differ but share a hash (built here by inverting hash_of's last step:
// its arithmetic, repeated) are told apart by their bytes.
TEST(RecentSignatures, BlocksSharingAHashAreToldApart) {
  const LaunchShape shape;
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  auto mix = [](uint64_t h, uint64_t w) { return (std::rotl(h, 23) ^ w) * kMul; };
  uint64_t h = mix(16, shape.grid[0] | uint64_t{shape.grid[1]} << 32);
  h = mix(h, shape.grid[2] | uint64_t{shape.block[0]} << 32);
  h = mix(h, shape.block[1] | uint64_t{shape.block[2]} << 32);
  h = mix(h, shape.dynamic_shared);
  const uint64_t a[2] = {7, 1000}, b0 = 9;
  const uint64_t b[2] = {b0, std::rotl(mix(h, b0), 23) ^ std::rotl(mix(h, a[0]), 23) ^ a[1]};
  std::vector<uint8_t> block_a(16), block_b(16);
  std::memcpy(block_a.data(), a, 16);
  std::memcpy(block_b.data(), b, 16);
  ASSERT_EQ(RecentSignatures::hash_of(shape, block_a), RecentSignatures::hash_of(shape, block_b));
  RecentSignatures recent;
  const std::vector<ParamSlot> slots{{0, 8}, {8, 8}};
  auto no_pointer = [](uint64_t) { return false; };
  for (const std::vector<uint8_t>* block : {&block_a, &block_b, &block_a}) {
    LaunchSignature got;
    recent.signature(
        {reinterpret_cast<const void*>(0x1000), &recent, shape, *block, 0, 0}, [] { return 0.0; },
        [&](LaunchSignature* out) {
          vgpu::build_launch_signature("k", shape, slots, *block, no_pointer, out);
          return std::numeric_limits<double>::infinity();
        },
        &got);
    EXPECT_EQ(got, vgpu::build_launch_signature("k", shape, slots, *block, no_pointer));
  }
}

}  // namespace
