// The one mapping from a rank process's local device to the cluster's GPU (simcore/rank_gpu.h),
// shared by the NCCL plugin and the passthrough.
#include <gtest/gtest.h>

#include "simcore/cluster_config.h"
#include "simcore/rank_gpu.h"

namespace {

simcore::ClusterSpec two_nodes_of_four() {
  simcore::ClusterSpec c = simcore::default_cluster();
  c.nodes = 2;
  c.gpus_per_node = 4;
  return c;
}

TEST(RankGpu, NodeTimesGpusPerNodePlusTheLocalDevice) {
  const simcore::ClusterSpec c = two_nodes_of_four();
  ASSERT_EQ(c.total_gpus(), 8);
  EXPECT_EQ(simcore::rank_gpu(c, 0, -1, 0).gpu, 0);
  EXPECT_EQ(simcore::rank_gpu(c, 3, -1, 0).gpu, 3);
  EXPECT_EQ(simcore::rank_gpu(c, 2, -1, 1).gpu, 6);
}

TEST(RankGpu, AnExplicitGlobalGpuWinsAndIsChecked) {
  const simcore::ClusterSpec c = two_nodes_of_four();
  const simcore::RankGpu r = simcore::rank_gpu(c, 0, 5, 0);
  EXPECT_EQ(r.gpu, 5);
  EXPECT_STREQ(r.origin, "VGPU_GLOBAL_RANK_GPU");
  const simcore::RankGpu bad = simcore::rank_gpu(c, 0, 8, 0);
  EXPECT_EQ(bad.gpu, -1);
  EXPECT_NE(bad.error.find("VGPU_GLOBAL_RANK_GPU gives GPU 8"), std::string::npos) << bad.error;
}

TEST(RankGpu, ANodeOrDeviceOutsideTheClusterIsAnErrorNotGpuZero) {
  const simcore::ClusterSpec c = two_nodes_of_four();
  const simcore::RankGpu node = simcore::rank_gpu(c, 0, -1, 2);
  EXPECT_EQ(node.gpu, -1);
  EXPECT_NE(node.error.find("VGPU_NODE_INDEX=2"), std::string::npos) << node.error;
  const simcore::RankGpu dev = simcore::rank_gpu(c, 4, -1, 0);
  EXPECT_EQ(dev.gpu, -1);
  EXPECT_NE(dev.error.find("CUDA device 4"), std::string::npos) << dev.error;
}

}  // namespace
