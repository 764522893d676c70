// The collective model (simcore/collective_model.h) against what real NCCL measured: NVIDIA's
// nccl-tests on two NVLink-connected H100s and on two H200s (tests/data/nccl_tests_h100x2_nvlink.txt,
// nccl_tests_h200x2_nvlink.txt), every collective, 64 KiB to 1 GiB. The model's parameters were
// fitted to these curves (tests/gpu/fidelity/fit_collectives.py), the H200's as its own fit in the
// embedded cluster configuration; this keeps the model, the defaults of each GPU model and the data
// consistent, and shows how close the model's form can get.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "simcore/cluster_config.h"
#include "simcore/collective_model.h"

namespace simcore {
namespace {

struct Row {
  std::string op;
  uint64_t size;
  double d1, d2, graph;  // us
};

std::vector<Row> load(const char* path) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    Row r;
    f >> r.op >> r.size >> r.d1 >> r.d2 >> r.graph;
    rows.push_back(r);
  }
  return rows;
}

// nccl-tests' size -> the collective and NCCL's own byte count (2 ranks).
CollectiveCall call_for(const Row& r) {
  CollectiveCall c;
  c.gpus = {0, 1};
  const std::map<std::string, std::pair<CollectiveOp, uint64_t>> m = {
      {"all_reduce", {CollectiveOp::all_reduce, r.size}},   {"all_gather", {CollectiveOp::all_gather, r.size / 2}},
      {"reduce_scatter", {CollectiveOp::reduce_scatter, r.size / 2}},
      {"broadcast", {CollectiveOp::broadcast, r.size}},     {"sendrecv", {CollectiveOp::send_recv, r.size}},
      {"alltoall", {CollectiveOp::all_to_all, r.size / 2}},
  };
  const auto& [op, bytes] = m.at(r.op);
  c.op = op;
  c.bytes = bytes;
  return c;
}

// The embedded default cluster of GPU model `model`.
ClusterSpec cluster_of(const char* model) {
  const ConfigResult r = load_cluster_config([model](const char* name) -> const char* {
    return std::string_view(name) == "VGPU_GPU_MODEL" ? model : nullptr;
  });
  EXPECT_TRUE(r.ok()) << r.error.to_string();
  return r.ok() ? *r.cluster : default_cluster();
}

void expect_reproduces(const char* curves, const char* model) {
  const std::vector<Row> rows = load(curves);
  ASSERT_GE(rows.size(), 48u) << "the measured curves are missing: " << curves;
  const ClusterSpec cluster = cluster_of(model);
  ASSERT_EQ(cluster.model.id, model);
  std::map<std::string, std::vector<double>> errors;
  int mid = 0, mid_close = 0;
  for (const Row& r : rows) {
    if (r.size < (64u << 10)) continue;
    // From 4 MiB nccl-tests is bound by the GPU: its default-mode time (the faster of two runs:
    // noise only adds time); below, by the host, so the GPU's own time (graph mode).
    const double real = r.size >= (4u << 20) ? std::min(r.d1, r.d2) : r.graph;
    const double model = estimate_collective(cluster, call_for(r)).seconds * 1e6;
    const double err = model / real - 1;
    errors[r.op].push_back(std::abs(err));
    if (r.size >= (16u << 20)) {
      EXPECT_LT(std::abs(err), 0.07) << r.op << " " << r.size << " B: model " << model << " us, real " << real;
    } else {
      ++mid;
      mid_close += std::abs(err) <= 0.15;
    }
  }
  EXPECT_EQ(errors.size(), 6u);
  for (auto& [op, e] : errors) {
    std::sort(e.begin(), e.end());
    EXPECT_LT(e[e.size() / 2], 0.04) << op << ": median error";
  }
  // 64 KiB to 8 MiB: single measurements of 7-40 us, a few of them disturbed (one 128 KiB
  // reduce-scatter took twice its neighbours).
  EXPECT_GE(mid_close, mid * 9 / 10) << mid_close << " of " << mid << " within 15%";
}

// The H200's Simple figures were fitted to the median of real runs pooled over six device calls at
// 4 and 16 MiB (tests/data/nccl_tests_h200x2_pooled_2026-11-27.txt; each call ran on the host the
// kind lent it, and the same collective differs by a few percent between them): the model sits
// within 5% of every such median (one machine's curve had put reduce-scatter at 16 MiB 7% above
// it, all-to-all at 4 MiB 15% below).
TEST(CollectiveModel, SitsAtTheMedianOfRealRunsPooledOverMachines) {
  std::ifstream in(VGPU_NCCL_POOLED_H200);
  std::map<std::pair<std::string, uint64_t>, std::vector<double>> runs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    Row r;
    f >> r.op >> r.size >> r.d1;
    runs[{r.op, r.size}].push_back(r.d1);
  }
  const ClusterSpec cluster = cluster_of("H200-141GB");
  int checked = 0;
  for (auto& [key, t] : runs) {
    if (t.size() < 3) continue;
    std::sort(t.begin(), t.end());
    const size_t n = t.size();
    const double median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    const Row r{key.first, key.second, median, median, median};
    const double model = estimate_collective(cluster, call_for(r)).seconds * 1e6;
    EXPECT_LT(std::abs(model / median - 1), 0.05)
        << key.first << " " << key.second << " B: model " << model << " us, median of " << n << " runs " << median;
    ++checked;
  }
  EXPECT_EQ(checked, 12) << "six collectives at 4 and 16 MiB";
}

TEST(CollectiveModel, ReproducesRealNcclOnNvlinkH100) { expect_reproduces(VGPU_NCCL_CURVES_H100, "H100-SXM-80GB"); }
TEST(CollectiveModel, ReproducesRealNcclOnNvlinkH200) { expect_reproduces(VGPU_NCCL_CURVES_H200, "H200-141GB"); }

// The H200's own fit is what makes its curves come out: the general (H100) figures read its
// 16 MiB collectives several per cent slow (all-reduce +6.4%, reduce-scatter +6.9%).
TEST(CollectiveModel, AModelsOwnFitReplacesTheGeneralFigures) {
  const ClusterSpec h100 = cluster_of("H100-SXM-80GB"), h200 = cluster_of("H200-141GB");
  const CollectiveCall call{CollectiveOp::all_reduce, 16u << 20, {0, 1}};
  EXPECT_LT(estimate_collective(h200, call).seconds, estimate_collective(h100, call).seconds * 0.98);
  EXPECT_DOUBLE_EQ(h100.collectives.nvlink.simple.op[0].latency_s, default_collectives().nvlink.simple.op[0].latency_s);
  EXPECT_DOUBLE_EQ(h200.collectives.nvlink.simple.op[0].latency_s, 13.78e-6);
  // What the H200's fit leaves unset (the NIC's figures, the step latency) stays general.
  EXPECT_DOUBLE_EQ(h200.collectives.nic.simple.op[0].latency_s, h100.collectives.nic.simple.op[0].latency_s);
  EXPECT_DOUBLE_EQ(h200.collectives.nvlink.step_latency_s, h100.collectives.nvlink.step_latency_s);
}

TEST(CollectiveModel, ScalesWithRanksAndLinks) {
  const ClusterSpec one = default_cluster();
  CollectiveCall two{CollectiveOp::all_reduce, 256u << 20, {0, 1}};
  CollectiveCall eight{CollectiveOp::all_reduce, 256u << 20, {0, 1, 2, 3, 4, 5, 6, 7}};
  const CollectiveEstimate e2 = estimate_collective(one, two), e8 = estimate_collective(one, eight);
  // A ring over 8 puts 2*7/8 of the buffer on each link instead of 2*1/2, and takes 14 steps.
  EXPECT_DOUBLE_EQ(e8.wire_bytes, 2.0 * 7 / 8 * (256u << 20));
  EXPECT_EQ(e8.steps, 14);
  EXPECT_GT(e8.seconds, e2.seconds * 1.70);
  EXPECT_LT(e8.seconds, e2.seconds * 1.80);
  EXPECT_STREQ(e8.protocol, "Simple");
  // Across nodes the NIC (50 GB/s) is the link: far slower than NVLink.
  ClusterSpec two_nodes = one;
  two_nodes.nodes = 2;
  CollectiveCall across{CollectiveOp::all_reduce, 256u << 20, {0, 8}};
  EXPECT_GT(estimate_collective(two_nodes, across).seconds, 5 * e2.seconds);
  // Small buffers take LL, and no message is cheaper than the kernel's own latency.
  CollectiveCall tiny{CollectiveOp::all_reduce, 8, {0, 1}};
  EXPECT_STREQ(estimate_collective(one, tiny).protocol, "LL");
  EXPECT_GE(estimate_collective(one, tiny).seconds, one.collectives.nvlink.ll.op[0].latency_s);
  // One rank: nothing to send.
  CollectiveCall alone{CollectiveOp::all_reduce, 1u << 30, {3}};
  EXPECT_EQ(estimate_collective(one, alone).wire_bytes, 0);
}

// The bandwidth part (what the sim backend places on the fabric as flows, sim/exec/nccl_link_share.h)
// is the busiest link's bytes at the protocol's share of its line rate; the rest of the time is
// latency, fill and steps, which no other transfer slows.
TEST(CollectiveModel, BandwidthPartIsTheWireAtTheProtocolsShare) {
  ClusterSpec two_nodes = default_cluster();
  two_nodes.nodes = 2;
  const CollectiveCall across{CollectiveOp::all_reduce, 256u << 20, {0, 8}};
  const CollectiveEstimate e = estimate_collective(two_nodes, across);
  ASSERT_STREQ(e.protocol, "Simple");
  const double line = two_nodes.nic.bw * two_nodes.nic.efficiency;
  const double share = two_nodes.collectives.nic.simple.op[0].link_share;
  EXPECT_DOUBLE_EQ(e.bandwidth_seconds, e.wire_bytes / (line * share));
  EXPECT_GT(e.bandwidth_seconds, 0.8 * e.seconds);  // 256 MiB across a NIC: mostly bandwidth
  EXPECT_LT(e.bandwidth_seconds, e.seconds);
  // On NVLink the line is the GPU's NVLink bandwidth, and an LL collective's share is LL's.
  const ClusterSpec one = default_cluster();
  const CollectiveEstimate small = estimate_collective(one, {CollectiveOp::all_gather, 64u << 10, {0, 1}});
  ASSERT_STREQ(small.protocol, "LL");
  const double ll_share = one.collectives.nvlink.ll.op[static_cast<int>(CollectiveOp::all_gather)].link_share;
  EXPECT_DOUBLE_EQ(small.bandwidth_seconds, small.wire_bytes / (one.nvlink.bw_per_gpu * ll_share));
  EXPECT_LT(small.bandwidth_seconds, 0.2 * small.seconds);  // 64 KiB: mostly latency
  // Nothing to send, no bandwidth part.
  EXPECT_EQ(estimate_collective(one, {CollectiveOp::all_reduce, 1u << 30, {3}}).bandwidth_seconds, 0);
}

TEST(CollectiveModel, NcclNames) {
  EXPECT_EQ(collective_from_nccl_name("AllReduce"), CollectiveOp::all_reduce);
  EXPECT_EQ(collective_from_nccl_name("ReduceScatter"), CollectiveOp::reduce_scatter);
  EXPECT_EQ(collective_from_nccl_name("Send"), CollectiveOp::send_recv);
  EXPECT_FALSE(collective_from_nccl_name("AllReduceX").has_value());
  EXPECT_STREQ(collective_name(CollectiveOp::all_gather), "AllGather");
}

}  // namespace
}  // namespace simcore
