// library_1734dc26 slots 4 and 13 on a virtual H200 (VGPU_GPU_MODEL=H200-141GB): the TPC layout
// [4] answers makes cuBLASLt build the cluster tables an H200's nvjet GEMM launches carried
// (recorded by tests/gpu/sim_torch record on 2026-11-26, kernels_2.db), and [13] takes the
// blocks back. cuBLASLt's use of the layout is written out below as it was read from
// libcublasLt.so.13 (see vgpu/sim/darkapi/library_slots.cpp), so that the test needs no cuBLAS.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "darkapi_test_util.h"

using namespace darkapi_test;

namespace {

using Slot = uint32_t (*)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);

// cuBLASLt's cluster table for `clusters` clusters of `cluster_size` blocks on `sms` SMs from the
// layout (one byte per TPC).
std::vector<int> cluster_table(const uint8_t* layout, int sms, int clusters, int cluster_size) {
  std::vector<int> identity(clusters);
  for (int i = 0; i < clusters; ++i) identity[i] = i;
  if (cluster_size % 2 != 0) return identity;
  const int tpcs = sms / 2;
  std::map<uint8_t, int> left;  // TPCs of each group not yet given a cluster
  for (int i = 0; i < tpcs; ++i) ++left[layout[i]];
  std::vector<uint8_t> group_of;  // the group each cluster goes to, in cluster order
  if (cluster_size == 2) {
    for (auto& [group, n] : left)
      if (n == 1) {
        group_of.push_back(group);
        --n;
      }
  }
  const int per_cluster = cluster_size / 2;
  for (int i = 0; i < tpcs && sms > 1; ++i) {
    const uint8_t g = layout[i];
    if (left[g] < per_cluster) continue;
    group_of.push_back(g);
    if (static_cast<int>(group_of.size()) >= clusters) break;
    left[g] -= per_cluster;
  }
  if (group_of.empty()) return identity;
  // Clusters renumbered group by group, groups in order of first appearance.
  std::vector<int> table(group_of.size());
  std::set<uint8_t> done;
  int next = 0;
  for (size_t i = 0; i < group_of.size(); ++i) {
    if (!done.insert(group_of[i]).second) continue;
    for (size_t j = i; j < group_of.size(); ++j)
      if (group_of[j] == group_of[i]) table[j] = next++;
  }
  return table;
}

class LibrarySlots : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    layout_ = slot<Slot>("1734dc26", 4);
    release_ = slot<Slot>("1734dc26", 13);
    ASSERT_NE(layout_, nullptr);
    ASSERT_NE(release_, nullptr);
  }
  void TearDown() override { cuDevicePrimaryCtxRelease(0); }

  CUcontext ctx_ = nullptr;
  Slot layout_ = nullptr;
  Slot release_ = nullptr;
};

TEST_F(LibrarySlots, LayoutGivesTheClusterTablesAnH200sLaunchesCarried) {
  int sms = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
  ASSERT_EQ(sms, 132);
  const uint8_t* layout = nullptr;
  const void* other = nullptr;
  ASSERT_EQ(layout_(reinterpret_cast<uintptr_t>(&layout), reinterpret_cast<uintptr_t>(&other), 0, 0, 0, 0), 0u);
  ASSERT_NE(layout, nullptr);
  ASSERT_NE(other, nullptr);

  // The H200's nvjet launches: grid 2x66 (clusters 1x2), 4x30 (4x1), 8x15 and 8x12 (2x4).
  const std::vector<int> want66 = {0,  1,  2,  3,  4,  8,  16, 24, 32, 40, 48, 57, 5,  9,  17, 25, 33,
                                   41, 49, 58, 6,  10, 18, 26, 34, 42, 50, 59, 7,  11, 19, 27, 35, 43,
                                   51, 60, 12, 20, 28, 36, 44, 52, 61, 13, 21, 29, 37, 45, 53, 62, 14,
                                   22, 30, 38, 46, 54, 63, 15, 23, 31, 39, 47, 55, 64, 56, 65};
  const std::vector<int> want30 = {0, 2, 6,  10, 14, 18, 22, 26, 1,  3,  7,  11, 15, 19, 23,
                                   27, 4, 8, 12, 16, 20, 24, 28, 5, 9, 13, 17, 21, 25, 29};
  const std::vector<int> want15 = {0, 1, 3, 5, 7, 9, 11, 13, 2, 4, 6, 8, 10, 12, 14};
  const std::vector<int> want12 = {0, 1, 3, 5, 7, 9, 10, 11, 2, 4, 6, 8};
  EXPECT_EQ(cluster_table(layout, sms, 66, 2), want66);
  EXPECT_EQ(cluster_table(layout, sms, 30, 4), want30);
  EXPECT_EQ(cluster_table(layout, sms, 15, 8), want15);
  EXPECT_EQ(cluster_table(layout, sms, 12, 8), want12);

  EXPECT_EQ(release_(reinterpret_cast<uintptr_t>(layout), reinterpret_cast<uintptr_t>(other), 0, 0, 0, 0), 0u);
}

TEST_F(LibrarySlots, ReleaseTakesOnlyBlocksHandedOut) {
  const void* layout = nullptr;
  const void* other = nullptr;
  ASSERT_EQ(layout_(reinterpret_cast<uintptr_t>(&layout), reinterpret_cast<uintptr_t>(&other), 0, 0, 0, 0), 0u);
  const auto a = reinterpret_cast<uintptr_t>(layout);
  const auto b = reinterpret_cast<uintptr_t>(other);
  EXPECT_EQ(release_(a, b, 0, 0, 0, 0), 0u);
  // Given back already, a stack address, and small numbers: refused, nothing touched.
  EXPECT_EQ(release_(a, b, 0, 0, 0, 0), static_cast<uint32_t>(CUDA_ERROR_INVALID_VALUE));
  uint64_t local[2] = {1, 2};
  const auto l = reinterpret_cast<uintptr_t>(local);
  EXPECT_EQ(release_(l, l, 0, 0, 0, 0), static_cast<uint32_t>(CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(local[0], 1u);
  EXPECT_EQ(release_(0, 1, 0, 0, 0, 0), static_cast<uint32_t>(CUDA_ERROR_INVALID_VALUE));
  // [4] with no place to write: refused.
  EXPECT_EQ(layout_(0, 0, 0, 0, 0, 0), static_cast<uint32_t>(CUDA_ERROR_INVALID_VALUE));
}

}  // namespace
