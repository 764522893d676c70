// The passthrough hands the real driver physical device ids inside parameter structures: graph
// memory-allocation nodes (pool location, peer access) and batched copies (location hints).
// Its real driver here is tests/passthrough/recording_driver.cpp over the sim, every virtual
// device on the sim's device 0: whatever virtual device a structure names, the real driver must
// see device 0 (host locations unchanged), and what it reports comes back as virtual.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::vector<int> recorded() {
  void* real = dlopen(std::getenv("VGPU_REAL_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(real, nullptr);
  if (real == nullptr) return {};
  using Fn = std::vector<int> (*)();
  const auto fn = reinterpret_cast<Fn>(dlsym(real, "recorded_locations"));
  EXPECT_NE(fn, nullptr);
  std::vector<int> out = fn ? fn() : std::vector<int>{};
  dlclose(real);
  return out;
}

class LocationStructs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Dl_info info{};
    ASSERT_TRUE(dladdr(reinterpret_cast<void*>(&cuInit), &info) && info.dli_fname &&
                std::string(info.dli_fname).find("/passthrough/") != std::string::npos);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 5), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    recorded();  // start clean
  }
  void TearDown() override {
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(5);
  }
  CUcontext ctx_ = nullptr;
};

constexpr int kHost = -100 - CU_MEM_LOCATION_TYPE_HOST;  // how the recorder writes a host location

TEST_F(LocationStructs, MemAllocNodeNamesThePhysicalDevice) {
  CUmemAccessDesc access[2] = {};
  access[0].location = {CU_MEM_LOCATION_TYPE_DEVICE, 5};
  access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  access[1].location = {CU_MEM_LOCATION_TYPE_DEVICE, 6};
  access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 5};
  p.accessDescs = access;
  p.accessDescCount = 2;
  p.bytesize = 4096;
  CUgraphNode node = nullptr;
  ASSERT_EQ(cuGraphAddMemAllocNode(&node, nullptr, nullptr, 0, &p), CUDA_SUCCESS);
  EXPECT_EQ(recorded(), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(p.dptr, 0x1000u) << "the address the driver wrote comes back";
  EXPECT_EQ(p.poolProps.location.id, 5) << "the caller's structure is left as it was";
  EXPECT_EQ(access[1].location.id, 6);
  // Asked back, the pool's location is the virtual device of the asking thread.
  CUDA_MEM_ALLOC_NODE_PARAMS out{};
  ASSERT_EQ(cuGraphMemAllocNodeGetParams(node, &out), CUDA_SUCCESS);
  EXPECT_EQ(out.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(out.poolProps.location.id, 5);
}

TEST_F(LocationStructs, GenericMemAllocNodeToo) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  p.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.alloc.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 7};
  p.alloc.bytesize = 4096;
  CUgraphNode node = nullptr;
  ASSERT_EQ(cuGraphAddNode(&node, nullptr, nullptr, nullptr, 0, &p), CUDA_SUCCESS);  // _v2 in CUDA 13
  EXPECT_EQ(recorded(), (std::vector<int>{0}));
  EXPECT_EQ(p.alloc.dptr, 0x3000u);
  EXPECT_EQ(p.alloc.poolProps.location.id, 7);
}

TEST_F(LocationStructs, BatchedCopyHints) {
  CUmemcpyAttributes attrs[2] = {};
  attrs[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attrs[0].srcLocHint = {CU_MEM_LOCATION_TYPE_DEVICE, 3};
  attrs[0].dstLocHint = {CU_MEM_LOCATION_TYPE_HOST, 0};
  attrs[1] = attrs[0];
  attrs[1].dstLocHint = {CU_MEM_LOCATION_TYPE_DEVICE, 4};
  CUdeviceptr d[1] = {0x10}, s[1] = {0x20};
  size_t sizes[1] = {16}, idx[2] = {0, 0};
  ASSERT_EQ(cuMemcpyBatchAsync(d, s, sizes, 1, attrs, idx, 2, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(recorded(), (std::vector<int>{0, kHost, 0, 0}));
  EXPECT_EQ(attrs[1].dstLocHint.id, 4);
  CUDA_MEMCPY3D_BATCH_OP op{};
  op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.src.op.ptr.locHint = {CU_MEM_LOCATION_TYPE_DEVICE, 6};
  op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  ASSERT_EQ(cuMemcpy3DBatchAsync(1, &op, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(recorded(), (std::vector<int>{0}));
}

}  // namespace
