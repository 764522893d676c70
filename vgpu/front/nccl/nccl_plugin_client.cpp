#include "front/nccl/nccl_plugin_client.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/log.h"

namespace vgpu::contracts {

NcclPluginClient::NcclPluginClient(const vgpu_nccl_driver_side& driver) : driver_(driver) {
  driver_.size = sizeof(vgpu_nccl_driver_side);
  driver_.version = VGPU_NCCL_CONTRACT_VERSION;
}

const vgpu_nccl_plugin_side* NcclPluginClient::plugin() {
  if (const vgpu_nccl_plugin_side* p = ready_.load(std::memory_order_acquire)) return p;
  {
    std::lock_guard l(mu_);
    if (refused_) return nullptr;
  }
  // NCCL dlopens the plugin (RTLD_LOCAL): find the library it loaded by name. One symbol.
  void* lib = dlopen(VGPU_NCCL_PLUGIN_LIBRARY, RTLD_NOLOAD | RTLD_LAZY);
  if (lib == nullptr) return nullptr;  // not loaded (yet)
  auto handshake = reinterpret_cast<vgpu_nccl_plugin_contract_fn>(dlsym(lib, VGPU_NCCL_PLUGIN_CONTRACT_SYMBOL));
  dlclose(lib);  // NOLOAD took a reference; NCCL's keeps it loaded (-z nodelete too)
  if (handshake == nullptr) {
    std::lock_guard l(mu_);
    refused_ = true;
    log::once(log::Level::warn, "nccl-contract-missing",
              "the loaded vgpu NCCL plugin has no contract with this driver (an older build): NCCL kernels "
              "are timed without it (use the plugin built with this driver)");
    return nullptr;
  }
  connect(handshake);
  return ready_.load(std::memory_order_acquire);
}

int NcclPluginClient::connect(vgpu_nccl_plugin_contract_fn handshake) {
  std::lock_guard l(mu_);
  if (ready_.load(std::memory_order_relaxed) != nullptr) return 0;
  if (refused_ || handshake == nullptr) return -1;
  vgpu_nccl_plugin_side got{};
  got.size = sizeof got;
  got.version = VGPU_NCCL_CONTRACT_VERSION;
  const int rc = handshake(VGPU_NCCL_CONTRACT_VERSION, &driver_, &got);
  // Checked here too: a plugin of another build may fill a table of another shape.
  const bool complete = got.current_launch && got.describe_launch && got.launch_window && got.launch_transfers &&
                        got.forget_launch && got.completions && got.flow_interval && got.local_ranks &&
                        got.launch_tasks;
  if (rc != 0 || got.size != sizeof got || got.version != VGPU_NCCL_CONTRACT_VERSION || !complete) {
    refused_ = true;
    log::once(log::Level::warn, "nccl-contract-refused",
              fmt::format("the vgpu NCCL plugin and this driver do not share a contract (this driver: "
                          "version {}, {} bytes; the plugin answered {}: version {}, {} bytes): NCCL "
                          "kernels are timed without it (use the plugin built with this driver)",
                          VGPU_NCCL_CONTRACT_VERSION, sizeof got, rc, got.version, got.size));
    return -1;
  }
  side_ = got;
  ready_.store(&side_, std::memory_order_release);
  log::info("the vgpu NCCL plugin's contract is in place: NCCL kernels are timed from its launch descriptions");
  return 0;
}

std::vector<simcore::CollectiveCall> collective_calls(const vgpu_nccl_launch& launch, const std::vector<int>& gpus,
                                                      bool with_point_to_point) {
  std::vector<simcore::CollectiveCall> calls;
  if (gpus.empty()) return calls;
  uint64_t p2p_bytes = 0;
  int p2p_peers = 0;
  bool all_to_all = false;
  for (int i = 0; i < std::clamp(launch.count, 0, VGPU_NCCL_MAX_OPERATIONS); ++i) {
    const vgpu_nccl_operation& o = launch.op[i];
    const std::string_view func(o.func, strnlen(o.func, sizeof o.func));
    const std::optional<simcore::CollectiveOp> op = simcore::collective_from_nccl_name(func);
    if (!op) continue;
    if (*op == simcore::CollectiveOp::send_recv) {
      p2p_bytes = std::max(p2p_bytes, o.bytes);
      p2p_peers = std::max(p2p_peers, o.peers);
      all_to_all = all_to_all || o.self != 0;
      continue;
    }
    calls.push_back({*op, o.bytes, gpus});
  }
  if (with_point_to_point && p2p_peers > 0) {
    if (all_to_all)
      calls.push_back({simcore::CollectiveOp::all_to_all, p2p_bytes / static_cast<uint64_t>(p2p_peers), gpus});
    else
      calls.push_back({simcore::CollectiveOp::send_recv, p2p_bytes, {gpus.front(), gpus.size() > 1 ? gpus[1] : gpus.front()}});
  }
  return calls;
}

namespace {

int offer_plugin(vgpu_nccl_plugin_contract_fn handshake) {
  NcclPluginClient* client = backend_nccl_plugin_client();
  return client == nullptr ? -1 : client->connect(handshake);
}

constexpr unsigned char kTableUuid[16] = VGPU_NCCL_CONTRACT_TABLE_UUID;
const vgpu_nccl_contract_table kTable = {sizeof(vgpu_nccl_contract_table), &offer_plugin};

}  // namespace

bool serve_nccl_contract_table(const CUuuid_st* id, const void** table) {
  if (id == nullptr || table == nullptr || std::memcmp(id, kTableUuid, sizeof kTableUuid) != 0) return false;
  *table = &kTable;
  return true;
}

}  // namespace vgpu::contracts
