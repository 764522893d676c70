// The path of a thread's last copy, remembered (vgpu/passthrough/last_copy_path.h): through a
// random run of copies between a few addresses, allocations and frees (each bumping the
// generation) and a second owner, every answer must be the one the lookups give at that moment.
#include "passthrough/last_copy_path.h"

#include <gtest/gtest.h>

#include "front/launch/copy_cost.h"

#include <random>
#include <set>

namespace {

using vgpu::CopyPath;
using vgpu::pt::LastCopyPath;
using vgpu::pt::LastCopyPrice;

TEST(LastCopyPath, RememberedAnswersAreTheLookupsAnswers) {
  std::mt19937_64 rng(21);
  std::set<uint64_t> device;  // the owner's device allocations, one address each
  uint64_t generation = 0;
  const int owners[2] = {0, 0};  // two owners that answer differently for the same addresses
  LastCopyPath last;
  int lookups = 0, wrong = 0;
  uint64_t dst = 0x1000, src = 0x2000;
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 4 == 0) {  // a copy between other ends (else the same two again)
      dst = 0x1000 * (1 + rng() % 3);
      src = 0x1000 * (1 + rng() % 3);
    }
    if (rng() % 20 == 0) {  // an allocation or a free
      const uint64_t a = 0x1000 * (1 + rng() % 3);
      if (device.count(a)) device.erase(a); else device.insert(a);
      ++generation;
    }
    const int owner = static_cast<int>(rng() % 8 == 0);  // the second owner sees no device memory
    auto truth = [&](uint64_t d, uint64_t s) {
      return owner == 0 && device.count(d) && device.count(s) ? CopyPath::within_device : CopyPath::host_device;
    };
    const CopyPath got = last.path(&owners[owner], generation, dst, src, [&](uint64_t d, uint64_t s) {
      ++lookups;
      return truth(d, s);
    });
    if (got != truth(dst, src)) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_LT(lookups, 20000 / 2);  // repeated copies are answered without a lookup
}

// The price remembered (LastCopyPrice): through a random run of copies of a few sizes, on a few
// paths and devices, under two owners whose devices price differently, every answer is the
// price's for that copy, and a repeated copy is answered without pricing.
TEST(LastCopyPrice, RememberedPricesAreThePricesAnswers) {
  std::mt19937_64 rng(22);
  const int owners[2] = {0, 0};
  const CopyPath paths[] = {CopyPath::host_device, CopyPath::within_device, CopyPath::memset};
  LastCopyPrice last;
  int priced = 0, wrong = 0;
  int owner = 0, device = 0;
  CopyPath path = CopyPath::host_device;
  uint64_t bytes = 4096;
  for (int step = 0; step < 20000; ++step) {
    switch (rng() % 10) {  // one of the four changes, else the same copy again
      case 0: owner = static_cast<int>(rng() % 2); break;
      case 1: device = static_cast<int>(rng() % 3); break;
      case 2: path = paths[rng() % 3]; break;
      case 3: bytes = 4096u << (rng() % 3); break;
      default: break;
    }
    auto truth = [&] {
      return (owner + 1) * 1e-3 + device * 1e-4 + static_cast<int>(path) * 1e-5 + static_cast<double>(bytes) * 1e-12;
    };
    const double got = last.seconds(&owners[owner], device, path, bytes, [&] {
      ++priced;
      return truth();
    });
    if (got != truth()) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_LT(priced, 20000 / 2);  // repeated copies are answered without pricing
}

}  // namespace
