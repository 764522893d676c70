// Without a real driver the passthrough library fails cleanly: cuInit says there is no
// device (and one log line names the paths tried), and nothing else crashes.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include "on_passthrough.h"

namespace {
}  // namespace

TEST(PassthroughWithoutDriver, FailsCleanly) {
  ASSERT_TRUE(running_on_passthrough());
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
  int n = -1;
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUcontext c = nullptr;
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&c, 0), CUDA_ERROR_NOT_INITIALIZED);
  CUdeviceptr p = 0;
  EXPECT_NE(cuMemAlloc(&p, 16), CUDA_SUCCESS);
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_NE(cuGetExportTable(&table, &id), CUDA_SUCCESS);
  int version = 0;
  EXPECT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);  // vgpu's own answer, as before cuInit
}
