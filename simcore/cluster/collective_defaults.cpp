// The collective model's default parameters (cluster_spec.h, CollectiveSpec): fitted by
// tests/gpu/fidelity/fit_collectives.py to NVIDIA's nccl-tests on two NVLink-connected (NV18)
// H100 80GB HBM3 GPUs, NCCL 2.28.9, driver 580.159.04, 2026-11-25
// (tests/data/nccl_tests_h100x2_nvlink.txt). default_cluster.toml repeats them.
#include "simcore/cluster_spec.h"

namespace simcore {
namespace {

constexpr double us = 1e-6;
constexpr double KiB = 1024;

// In the order of kCollectiveKeys: all_reduce, all_gather, reduce_scatter, broadcast, reduce,
// send_recv, all_to_all. Reduce was not measured: broadcast's pipeline stands for it.
constexpr CollectiveCost kNvlinkLL[kCollectiveKinds] = {
    {7.12 * us, 0.2345, 0},         {7.11 * us, 0.2190, 0},        {8.25 * us, 0.2737, 0},
    {5.75 * us, 0.3044, 0},         {5.75 * us, 0.3044, 0},        {7.02 * us, 1.0000, 2312 * KiB},
    {7.78 * us, 0.3374, 52 * KiB},
};
constexpr CollectiveCost kNvlinkSimple[kCollectiveKinds] = {
    {13.74 * us, 0.7528, 653 * KiB}, {13.58 * us, 0.6337, 484 * KiB}, {9.53 * us, 0.6274, 720 * KiB},
    {11.90 * us, 0.8418, 169 * KiB}, {11.90 * us, 0.8418, 169 * KiB}, {2.80 * us, 0.8799, 3595 * KiB},
    {8.19 * us, 0.7349, 1157 * KiB},
};

}  // namespace

CollectiveSpec default_collectives() {
  CollectiveSpec c;
  for (int i = 0; i < kCollectiveKinds; ++i) {
    c.nvlink.ll.op[i] = kNvlinkLL[i];
    c.nvlink.simple.op[i] = kNvlinkSimple[i];
    // Across nodes nothing was measured yet: NVLink's shape with a NIC's latency on top and most
    // of the NIC's payload rate (what NCCL reaches on 400 Gb/s InfiniBand in published figures).
    c.nic.ll.op[i] = {kNvlinkLL[i].latency_s + 4 * us, 0.45, kNvlinkLL[i].fill_bytes};
    c.nic.simple.op[i] = {kNvlinkSimple[i].latency_s + 4 * us, 0.92, kNvlinkSimple[i].fill_bytes};
  }
  c.nvlink.ll_max_bytes = c.nic.ll_max_bytes = 3072 * KiB;
  c.nvlink.step_latency_s = 1 * us;
  c.nic.step_latency_s = 4 * us;
  return c;
}

}  // namespace simcore
