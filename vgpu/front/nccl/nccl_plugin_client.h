// The driver's half of the contract with vgpu's NCCL plugin (nccl_plugin.h), shared by both
// backends: the handshake (found once in the library NCCL loaded, or offered by the plugin's
// knock through the private export table), the plugin's table once the two sides agreed, and
// the collective model's calls for a launch's one description. Each backend's root object owns
// one client and gives it the backend's side (its clock hooks and current device).
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "contracts/nccl_plugin.h"
#include "simcore/collective_model.h"

struct CUuuid_st;  // cuda.h's CUuuid, without including cuda.h

namespace vgpu::contracts {

class NcclPluginClient {
 public:
  // `driver`: the backend's hooks (any may be null); size and version are set here.
  explicit NcclPluginClient(const vgpu_nccl_driver_side& driver);

  // The plugin's table, or nullptr: not loaded yet (asked again next time: NCCL loads the
  // plugin when it creates its first communicator), or refused (for good, after one line).
  // Lock-free once connected: asked on every NCCL kernel launch.
  const vgpu_nccl_plugin_side* plugin();

  // Hands the backend's side over through `handshake` and keeps the plugin's. 0 when the two
  // sides agreed now or before; -1 when refused (one log line; NCCL kernels are then timed
  // without the plugin). `handshake` comes from the plugin's knock or from plugin().
  int connect(vgpu_nccl_plugin_contract_fn handshake);

 private:
  std::mutex mu_;
  vgpu_nccl_driver_side driver_;
  vgpu_nccl_plugin_side side_{};
  bool refused_ = false;
  std::atomic<const vgpu_nccl_plugin_side*> ready_{nullptr};
};

// The collective model's calls for what one launch does: one per collective operation over
// `gpus`, and, with_point_to_point, its Send/Recv as one call: an all-to-all of the bytes per
// peer when they include the rank's own share, else a send/recv of the larger side between the
// first two GPUs. Operations the model does not know are left out.
std::vector<simcore::CollectiveCall> collective_calls(const vgpu_nccl_launch& launch, const std::vector<int>& gpus,
                                                      bool with_point_to_point);

// The contract's private export table (nccl_plugin.h) for cuGetExportTable: when `id` is its
// UUID and `table` is not null, sets *table and returns true. Its slot hands the plugin's
// handshake to the backend's client.
bool serve_nccl_contract_table(const CUuuid_st* id, const void** table);

// The backend's client (each backend defines it: its root object's), nullptr before the
// backend is initialised.
NcclPluginClient* backend_nccl_plugin_client();

}  // namespace vgpu::contracts
