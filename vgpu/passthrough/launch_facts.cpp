#include "passthrough/launch_facts.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <shared_mutex>
#include <unordered_map>

#include "common/log.h"
#include "passthrough/nccl_timing.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "timing/outside_cpu_time.h"

namespace vgpu::pt {
namespace {

FunctionFacts describe(CUfunction f) {
  FunctionFacts facts;
  const char* name = nullptr;
  // cudart hands context-independent kernels (CUkernel) to cuLaunchKernel as well.
  if (VGPU_REAL("cuFuncGetName", CUresult (*)(const char**, CUfunction))(&name, f) != CUDA_SUCCESS &&
      VGPU_REAL("cuKernelGetName", CUresult (*)(const char**, CUkernel))(&name, reinterpret_cast<CUkernel>(f)) !=
          CUDA_SUCCESS)
    return facts;
  facts.name = name ? name : "";
  facts.nccl = nccl_timing::is_nccl_kernel(facts.name);
  auto func_info = VGPU_REAL("cuFuncGetParamInfo", CUresult (*)(CUfunction, size_t, size_t*, size_t*));
  auto kernel_info = VGPU_REAL("cuKernelGetParamInfo", CUresult (*)(CUkernel, size_t, size_t*, size_t*));
  for (size_t i = 0; i < 4096; ++i) {
    size_t off = 0, size = 0;
    if ((!func_info || func_info(f, i, &off, &size) != CUDA_SUCCESS) &&
        (!kernel_info || kernel_info(reinterpret_cast<CUkernel>(f), i, &off, &size) != CUDA_SUCCESS))
      break;
    facts.slots.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
    facts.block_bytes = std::max<uint32_t>(facts.block_bytes, static_cast<uint32_t>(off + size));
  }
  facts.ok = true;
  return facts;
}

// The packed parameter block of a launch, from kernelParams (one pointer per parameter) or from
// `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE); false when neither describes it.
bool pack_params(const FunctionFacts& facts, void** params, void** extra, std::vector<uint8_t>* out) {
  out->assign(facts.block_bytes, 0);
  if (params != nullptr) {
    for (size_t i = 0; i < facts.slots.size(); ++i)
      if (params[i] != nullptr) std::memcpy(out->data() + facts.slots[i].offset, params[i], facts.slots[i].size);
    return true;
  }
  if (extra == nullptr) return facts.slots.empty();
  const void* buffer = nullptr;
  size_t size = 0;
  for (size_t i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) size = *static_cast<size_t*>(extra[i + 1]);
  }
  if (buffer == nullptr || size < facts.block_bytes) return false;
  std::memcpy(out->data(), buffer, facts.block_bytes);
  return true;
}

}  // namespace

const FunctionFacts& function_facts(CUfunction f, LaunchScratch& scratch) {
  if (scratch.facts_cache == nullptr) scratch.facts_cache = &Passthrough::get().function_facts();
  return scratch.facts_cache->of(f, scratch.recent);
}

const FunctionFacts& FunctionFactsCache::of(CUfunction f, RecentFacts& recent) {
  RecentFacts::Slot& slot = recent.slots[RecentFacts::slot_of(f)];
  if (slot.owner == this && slot.f == f) return *slot.facts;
  const FunctionFacts* found = nullptr;
  {
    std::shared_lock l(mu_);
    if (auto it = facts_.find(f); it != facts_.end()) found = &it->second;
  }
  if (found == nullptr) {
    FunctionFacts facts = describe(f);
    std::unique_lock l(mu_);
    found = &facts_.emplace(f, std::move(facts)).first->second;
  }
  slot = {this, f, found};
  return *found;
}

bool launch_signature(PassState* s, CUfunction f, const FunctionFacts& facts, const LaunchShape& shape,
                      void** params, void** extra, LaunchScratch& scratch, LaunchSignature* out,
                      RecentSignatures::Derived** derived) {
  if (s == nullptr || f == nullptr) return false;
  std::vector<uint8_t>& block = scratch.block;
  if (!facts.ok || !pack_params(facts, params, extra, &block)) {
    out->bytes.clear();
    return false;
  }
  // Read before any answer is asked for: an answer given after a change is kept under the new
  // generation only by a later launch.
  const auto device_generation = static_cast<uint32_t>(s->address_generation());
  const auto host_generation = static_cast<uint32_t>(s->host_addresses().generation());
  // What the answers need, behind one reference: a std::function holds a callable of up to 16
  // bytes in place, and a lambda capturing these five (40 bytes) was allocated and freed on
  // every launch (~300 instructions of a settled launch).
  struct Asking {
    PassState* s;
    HostAddressSpace& host;
    KnownAddresses& known;
    uint32_t device_generation, host_generation;
    double now = -1;  // read once per launch, when a "no" is first looked at
    double until = std::numeric_limits<double>::infinity();  // the answers so far stand until then
    double wall() { return now < 0 ? (now = OutsideCpuTime::wall_seconds()) : now; }
    bool operator()(uint64_t v) {
      return known.is_address(
          v, s, device_generation, host_generation, [this] { return wall(); },
          [this](uint64_t w) {
            const bool address = s->is_device_pointer(w) || host.contains(w);
            // A "no" about a user address stands until the host's mappings would be read again
            // for it (read after the answer: a reading it made is the one it stands on); about
            // anything else, while the generations hold.
            const bool user = w >= HostAddressSpace::kLowest && w < HostAddressSpace::kUserEnd;
            return std::pair<bool, double>{address, user ? host.refresh_due_at()
                                                         : std::numeric_limits<double>::infinity()};
          },
          &until);
    }
  } asking{s, s->host_addresses(), scratch.known, device_generation, host_generation};
  // This very launch again (same function, shape, block and answers): its signature as before,
  // no word asked about (recent_signatures.h).
  const RecentSignatures::Launch launch{f, s, shape, block, device_generation, host_generation};
  RecentSignatures::Derived& kept = scratch.signatures.signature(
      launch, [&asking] { return asking.wall(); },
      [&](LaunchSignature* built) {
        build_launch_signature(
            facts.name, shape, facts.slots, block, [&asking](uint64_t v) { return asking(v); }, built);
        return asking.until;
      },
      out);
  if (derived != nullptr) *derived = &kept;
  // How often a job's launches repeat their raw parameters (what the remembered signatures are
  // worth): every 4096 launches of a thread, at debug level.
  const RecentSignatures& recent = scratch.signatures;
  if ((recent.found() + recent.built()) % 4096 == 0 && vgpu::log::enabled(vgpu::log::Level::debug))
    vgpu::log::debug("vgpu: launch signatures remembered: {} launches of this thread found theirs, {} built, {} kept",
                     recent.found(), recent.built(), recent.kept());
  return true;
}

}  // namespace vgpu::pt
