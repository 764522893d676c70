// The library_1734dc26 table's slots 4 and 13, which cuBLASLt's own code (not the runtime in it)
// calls once per (SM count, cluster count, cluster size) before it loads a Hopper GEMM kernel
// with thread-block clusters (nvjet_sm90_*), to build the cluster table that kernel takes in its
// by-value parameter struct. Read from libcublasLt.so.13 (CUDA 13.0: the function that fetches
// the table by its UUID, at 0x330f7e0 of that file) and checked against what an H200 answered
// under the passthrough (driver 580.159.04, 2026-11-26, VGPU_QUERY_TRACE,
// tests/gpu/probe/cublaslt_queries) and the tables its nvjet launches carried
// (tests/gpu/sim_torch record, kernels_2.db):
//
//   [4](&layout, &other) -> 0   writes two addresses: `layout`, one byte per TPC (SM pair) that
//                               says which group of the GPU the TPC belongs to; `other`, a block
//                               only handed back to [13]. cuBLASLt reads layout[0 .. SMs/2).
//   [13](layout, other)         gives both back (the real driver frees them: after it, the traced
//                               words at both addresses are glibc's free-list pointer and key);
//                               its result is ignored.
//
// The other registers the traces show (a2..a5, and the addresses in a3/a4 of one [4] call on
// the GPU) are whatever the caller left in them, not arguments: the calls pass two.
//
// What cuBLASLt does with the layout, for C clusters of K blocks on an SM count N (odd K: no
// table): it counts the TPCs of each group among layout[0 .. N/2); for K = 2 it first takes
// every group with exactly one TPC (in increasing group order); then it walks the TPCs in order
// and takes a TPC's group for the next cluster while that group still has K/2 TPCs left, until C
// clusters have a group. The kernel's table is then the clusters renumbered group by group
// (groups in order of first appearance, clusters in order within a group); with no cluster
// placed (no layout, [4] failing) the table is 0, 1, 2, ... The sim used to hand out a zeroed
// block: one group, so that identity table, where the H200's launches carried
// 0,1,2,3,4,8,16,24,... (66 clusters of 2) and 0,1,3,5,7,9,11,13,2,4,... (15 of 8), and the
// sim's nvjet launches missed the kernel-time database recorded on the GPU.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "front/driver/query_lines.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/darkapi/slots.h"

namespace vgpu::darkapi::slots {
namespace {

// Below this an argument is a small number, not an address (the query trace's rule too).
constexpr uintptr_t kLowestAddress = 0x10000;

// The TPC layout of the H200 measured (132 SMs, 66 TPCs). Not the bytes the driver wrote (the
// trace does not read them) but the one layout, up to the names of the groups, that gives all
// four tables that GPU's launches carried (66 clusters of 2, 30 of 4, 15 and 12 of 8; test
// darkapi_library_slots): TPCs dealt round-robin to eight groups of 4, 8 (five of them) and 9
// (two) TPCs, plus four groups of one TPC each. H100 SXM has the same chip and SM count; its
// floorsweeping can differ from board to board, which only a trace on that board would show.
constexpr std::array<uint8_t, 66> kLayout132 = [] {
  std::array<uint8_t, 66> l{};
  size_t i = 0;
  for (int round = 0; round < 4; ++round)
    for (uint8_t g = 0; g < 8; ++g) l[i++] = g;
  for (int round = 0; round < 4; ++round)
    for (uint8_t g = 1; g < 8; ++g) l[i++] = g;
  l[i++] = 6;
  l[i++] = 7;
  for (uint8_t g = 8; g < 12; ++g) l[i++] = g;
  return l;
}();

// The layout of the current context's device (device 0 when none is current): the measured one
// for a 132-SM device; otherwise none (a zeroed block, one group: the identity table, as
// before), since no other chip was traced.
std::span<const uint8_t> current_layout() {
  DriverState* driver = DriverState::get();
  if (driver == nullptr) return {};
  int ordinal = 0;
  if (driver->contexts().current_device(&ordinal) != CUDA_SUCCESS) ordinal = 0;
  const Device* device = driver->device(ordinal);
  int sms = 0;
  if (device == nullptr || device->attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms) != CUDA_SUCCESS)
    return {};
  if (sms == 2 * static_cast<int>(kLayout132.size())) return kLayout132;
  log::debug("1734dc26[4]: no TPC layout traced for a {}-SM device; answering one group", sms);
  return {};
}

// The blocks [4] hands out and [13] takes back. A block given back is kept for the next [4]
// rather than freed: the query trace reads both addresses after [13] returns, and the caller
// may hold them a moment longer; what stays allocated is a few blocks (cuBLASLt caches each
// answer).
class LayoutBlocks {
 public:
  static constexpr size_t kBytes = 4096;  // cuBLASLt reads SMs/2 bytes of the layout

  static LayoutBlocks& get() {
    static LayoutBlocks* b = new LayoutBlocks;  // asked until exit
    return *b;
  }

  // A block holding `bytes`, zero after them.
  void* take(std::span<const uint8_t> bytes) {
    std::lock_guard l(mu_);
    std::unique_ptr<Block> b;
    if (free_.empty()) {
      b = std::make_unique<Block>();
    } else {
      b = std::move(free_.back());
      free_.pop_back();
    }
    std::memset(b->bytes, 0, kBytes);
    if (!bytes.empty()) std::memcpy(b->bytes, bytes.data(), std::min(bytes.size(), kBytes));  // none: one group
    void* const p = b->bytes;
    out_.emplace(p, std::move(b));
    return p;
  }

  // False when `p` is not a block handed out and not yet given back (then nothing happens).
  bool give_back(uintptr_t p) {
    std::lock_guard l(mu_);
    const auto it = out_.find(reinterpret_cast<void*>(p));
    if (it == out_.end()) return false;
    free_.push_back(std::move(it->second));
    out_.erase(it);
    return true;
  }

 private:
  struct Block {
    alignas(64) uint8_t bytes[kBytes];
  };
  std::mutex mu_;
  std::unordered_map<void*, std::unique_ptr<Block>> out_;
  std::vector<std::unique_ptr<Block>> free_;
};

uint32_t answer(size_t slot, const uintptr_t (&regs)[6], uint32_t result) {
  if (query_trace::enabled()) query_trace::private_slot("1734dc26", slot, regs, result);
  return result;
}

}  // namespace

uint32_t library_slot4(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5) {
  const uintptr_t regs[6] = {a0, a1, a2, a3, a4, a5};
  log::debug("1734dc26[4] asked ({:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x})", a0, a1, a2, a3, a4, a5);
  if (a0 < kLowestAddress || a1 < kLowestAddress) {
    // Never seen: every traced call passed two addresses.
    log::warn("1734dc26[4]: first two arguments {:#x}, {:#x} are not addresses: CUDA_ERROR_INVALID_VALUE", a0, a1);
    return answer(4, regs, CUDA_ERROR_INVALID_VALUE);
  }
  LayoutBlocks& blocks = LayoutBlocks::get();
  *reinterpret_cast<void**>(a0) = blocks.take(current_layout());
  *reinterpret_cast<void**>(a1) = blocks.take({});
  return answer(4, regs, 0);
}

uint32_t library_slot13(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5) {
  const uintptr_t regs[6] = {a0, a1, a2, a3, a4, a5};
  log::debug("1734dc26[13] asked ({:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x})", a0, a1, a2, a3, a4, a5);
  LayoutBlocks& blocks = LayoutBlocks::get();
  const bool first = blocks.give_back(a0);
  const bool second = blocks.give_back(a1);
  if (!first || !second) {
    // Not a pair [4] handed out (the real driver would free whatever it is given): refused,
    // nothing freed. cuBLASLt ignores the result.
    log::warn("1734dc26[13]: {:#x}, {:#x} are not both blocks of 1734dc26[4]: CUDA_ERROR_INVALID_VALUE", a0, a1);
    return answer(13, regs, CUDA_ERROR_INVALID_VALUE);
  }
  return answer(13, regs, 0);
}

}  // namespace vgpu::darkapi::slots
