// The virtual duration of copies and sets, from the GPU model's figures (catalog): the one
// price list both backends use (the sim for every copy within a GPU or to the host, the
// passthrough for every copy it times instead of measuring it).
//   host <-> device (and host <-> host)  kCopyLatency + bytes / (pcie_bw * pcie efficiency)
//   within one device                    kCopyLatency + 2 * bytes / memory_bw (read + write)
//   memset                               kCopyLatency + bytes / memory_bw
//   between devices without P2P          2 * kCopyLatency + bytes / (pcie_bw * pcie efficiency):
//                                        the driver stages it through pinned host memory, device
//                                        to host and host to device, pipelined in chunks
// The PCIe efficiency is the cluster's [pcie] efficiency (0.87 measured on an H100); callers
// without a cluster at hand pass none (1).
// kCopyLatency (2 us) is the fixed cost of one DMA operation: a small cudaMemcpy on an H100
// takes about that long end to end. A figure the model leaves at 0 falls back to PCIe 4 x16
// (25 GB/s) and 2 TB/s.
#pragma once

#include <cstdint>

#include "simcore/cluster_spec.h"
#include "simcore/topology.h"

namespace vgpu {

inline constexpr double kCopyLatency = 2e-6;

enum class CopyPath { host_device, within_device, memset, staged_peer };

// The path's name in timelines and logs.
inline const char* copy_path_name(CopyPath path) {
  switch (path) {
    case CopyPath::host_device: return "copy host<->device";
    case CopyPath::within_device: return "copy within device";
    case CopyPath::memset: return "memset";
    case CopyPath::staged_peer: return "peer copy through host";
  }
  return "copy";
}

inline double copy_seconds(const simcore::GpuModel& m, CopyPath path, uint64_t bytes, double pcie_efficiency = 1.0) {
  const double pcie = (m.pcie_bw > 0 ? m.pcie_bw : 25e9) * (pcie_efficiency > 0 ? pcie_efficiency : 1.0);
  const double hbm = m.memory_bw > 0 ? m.memory_bw : 2e12;
  const double b = static_cast<double>(bytes);
  switch (path) {
    case CopyPath::host_device: return kCopyLatency + b / pcie;
    case CopyPath::within_device: return kCopyLatency + 2.0 * b / hbm;
    case CopyPath::memset: return kCopyLatency + b / hbm;
    case CopyPath::staged_peer: return 2 * kCopyLatency + b / pcie;
  }
  return kCopyLatency;
}

// A copy between two GPUs on its own: the route's latency plus the bytes at the route's narrowest
// link (topology.h, payload efficiency included). The sim backend gives such copies to simcore,
// where they also share links with other transfers; this is the uncontended answer.
inline double transfer_seconds(const simcore::Topology& t, int src_gpu, int dst_gpu, uint64_t bytes) {
  const simcore::Route r = t.route(src_gpu, dst_gpu);
  double narrowest = 0;
  for (int i = 0; i < r.count; ++i) {
    const double c = t.links()[r.links[i]].capacity;
    if (narrowest == 0 || c < narrowest) narrowest = c;
  }
  return r.latency + (narrowest > 0 ? static_cast<double>(bytes) / narrowest : 0.0);
}

}  // namespace vgpu
