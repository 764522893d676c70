// cudart_interface slots 1, 6 and 8: modules from a fat binary, with or without the
// __fatBinC_Wrapper_t runtimes put around it. The fat binary is built by nvcc at build time
// (kernels.cu); its path comes in VGPU_DARKAPI_FATBIN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "darkapi_test_util.h"

using namespace darkapi_test;

namespace {

struct Wrapper {
  uint32_t magic;
  uint32_t version;
  const void* fatbin;
  const void* filename_or_fatbins;
};

std::vector<char> read_fatbin() {
  const char* path = std::getenv("VGPU_DARKAPI_FATBIN");
  if (path == nullptr) return {};
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(DarkApiModules, FatBinaryModulesLoadThroughTheCudartSlots) {
  const std::vector<char> image = read_fatbin();
  ASSERT_FALSE(image.empty()) << "VGPU_DARKAPI_FATBIN not readable";
  // Fat binaries are 8-byte aligned in a program's data; keep that here.
  std::vector<uint64_t> aligned((image.size() + 7) / 8);
  std::memcpy(aligned.data(), image.data(), image.size());

  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);

  const Wrapper wrapper{0x466243b1, 1, aligned.data(), nullptr};
  using Slot1 = CUresult (*)(CUmodule*, const void*);
  using Slot6 = CUresult (*)(CUmodule*, const void*, void*, void*, unsigned);
  using Slot8 = CUresult (*)(const void*, CUmodule*, void*, void*, unsigned);

  CUmodule modules[3] = {};
  ASSERT_EQ(slot<Slot1>("6bd5fb6c", 1)(&modules[0], &wrapper), CUDA_SUCCESS);
  ASSERT_EQ(slot<Slot6>("6bd5fb6c", 6)(&modules[1], &wrapper, nullptr, nullptr, 0), CUDA_SUCCESS);
  ASSERT_EQ(slot<Slot8>("6bd5fb6c", 8)(aligned.data(), &modules[2], nullptr, nullptr, 0), CUDA_SUCCESS);
  for (CUmodule m : modules) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, m, "darkapi_add_one"), CUDA_SUCCESS);
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  }

  CUmodule m = nullptr;
  EXPECT_EQ(slot<Slot1>("6bd5fb6c", 1)(nullptr, &wrapper), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(slot<Slot1>("6bd5fb6c", 1)(&m, nullptr), CUDA_ERROR_INVALID_VALUE);
  const Wrapper empty{0x466243b1, 1, nullptr, nullptr};
  EXPECT_EQ(slot<Slot1>("6bd5fb6c", 1)(&m, &empty), CUDA_ERROR_INVALID_IMAGE);
  const uint64_t garbage[4] = {1, 2, 3, 4};
  EXPECT_EQ(slot<Slot8>("6bd5fb6c", 8)(garbage, &m, nullptr, nullptr, 0), CUDA_ERROR_INVALID_IMAGE);

  ASSERT_EQ(cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

// tools_module (6e163fbe) slot 7, as cuFFT calls it: (ctx, module, visit, opaque) calls
// visit(opaque, f) for every function of the module and returns how many it visited. The
// handles are cuModuleGetFunction's. A bad module visits nothing.
TEST(DarkApiModules, ToolsModuleSlotVisitsEveryFunctionOfAModule) {
  const std::vector<char> image = read_fatbin();
  ASSERT_FALSE(image.empty()) << "VGPU_DARKAPI_FATBIN not readable";
  std::vector<uint64_t> aligned((image.size() + 7) / 8);
  std::memcpy(aligned.data(), image.data(), image.size());
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);

  const uint8_t uuid[16] = {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d,
                            0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e};
  const void* const* table = nullptr;
  ASSERT_EQ(lookup(uuid, &table), CUDA_SUCCESS);
  ASSERT_NE(table, nullptr);
  // cuFFT checks the size header covers slot 7 before calling it.
  ASSERT_GT(reinterpret_cast<uintptr_t>(table[0]), 7 * sizeof(void*));
  using Visit = void (*)(void*, CUfunction);
  using Slot7 = uint64_t (*)(CUcontext, CUmodule, Visit, void*);
  const auto functions = reinterpret_cast<Slot7>(const_cast<void*>(table[7]));

  CUmodule m = nullptr;
  ASSERT_EQ(cuModuleLoadData(&m, aligned.data()), CUDA_SUCCESS);
  std::vector<CUfunction> seen;
  const Visit collect = [](void* out, CUfunction f) { static_cast<std::vector<CUfunction>*>(out)->push_back(f); };
  EXPECT_EQ(functions(ctx, m, collect, &seen), 1u);
  CUfunction f = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&f, m, "darkapi_add_one"), CUDA_SUCCESS);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], f);

  seen.clear();
  EXPECT_EQ(functions(ctx, reinterpret_cast<CUmodule>(uintptr_t{0x1234}), collect, &seen), 0u);
  EXPECT_EQ(functions(ctx, m, nullptr, nullptr), 0u);
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}
