// Every device attribute the real driver answers is answered by vgpu too, on every virtual
// device, with the measured value. cudart's start-up reads ~110 of them and treats any
// failure as cudaErrorInitializationError (issue 5: CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID was once
// missing and no cudart program could start).
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "simcore/gpu_catalog.h"

namespace {

struct Measured {
  std::string name;
  int value;
};

std::vector<Measured> measured_h100() {
  const char* dir = std::getenv("VGPU_TEST_DATA");
  std::ifstream in(std::string(dir ? dir : "tests/data") + "/../cluster/data/h100_real_attributes.txt");
  std::vector<Measured> out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("CU_DEVICE_ATTRIBUTE_", 0) != 0) continue;
    std::istringstream ls(line);
    Measured m;
    if (ls >> m.name >> m.value) out.push_back(m);
  }
  return out;
}

TEST(DeviceAttributes, EveryAttributeTheRealDriverAnswersOnEveryDevice) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  int n = 0;
  ASSERT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  ASSERT_EQ(n, 8);
  const auto measured = measured_h100();
  ASSERT_GT(measured.size(), 120u) << "attribute file not found or truncated";
  for (int dev = 0; dev < n; ++dev) {
    for (const Measured& m : measured) {
      const auto id = simcore::cu_device_attribute_value(m.name);
      ASSERT_TRUE(id.has_value()) << m.name;
      int v = -12345;
      ASSERT_EQ(cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(*id), dev), CUDA_SUCCESS)
          << m.name << " on device " << dev;
      if (!simcore::is_per_device_attribute(*id)) {
        EXPECT_EQ(v, m.value) << m.name << " on device " << dev;
      }
    }
  }
}

TEST(DeviceAttributes, HostNumaSplitsTheBoardAcrossTwoSockets) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  std::set<int> sockets;
  for (int dev = 0; dev < 8; ++dev) {
    int v = -1;
    ASSERT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev), CUDA_SUCCESS);
    EXPECT_EQ(v, dev < 4 ? 0 : 1) << "device " << dev;
    sockets.insert(v);
  }
  EXPECT_EQ(sockets.size(), 2u);
}

TEST(DeviceAttributes, UnknownAttributeIsInvalidValue) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  int v = 7;
  EXPECT_EQ(cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(100000), 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 8), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
            CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
