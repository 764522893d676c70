// The sim backend honours CUDA_VISIBLE_DEVICES as the real driver does (issue 23): the listed
// GPUs of the whole cluster, renumbered from 0 in the order listed; the first invalid entry ends
// the list; none left (empty, a repeat) fails cuInit with CUDA_ERROR_NO_DEVICE. The cluster is
// 2 nodes x 4 GPUs (the test's environment), GPU g on node g / 4, whose PCI domain is its node.
// The driver is set up once per process: each case runs in a child (a death test's fork).
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// The node (PCI domain) of each visible ordinal, or the cuInit error as a negative number.
std::string layout(const char* visible) {
  setenv("CUDA_VISIBLE_DEVICES", visible, 1);
  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) return "init " + std::to_string(r);
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS) return "count failed";
  std::string out;
  for (int i = 0; i < count; ++i) {
    CUdevice d = -1;
    char bus[32] = {};
    int group = -1;
    if (cuDeviceGet(&d, i) != CUDA_SUCCESS || d != i) return "cuDeviceGet " + std::to_string(i);
    if (cuDeviceGetPCIBusId(bus, sizeof bus, d) != CUDA_SUCCESS) return "bus id";
    if (cuDeviceGetAttribute(&group, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, d) != CUDA_SUCCESS) return "attr";
    const long domain = std::strtol(bus, nullptr, 16);
    if (domain != group) return "bus id and attribute disagree";
    out += (out.empty() ? "" : ",") + std::to_string(domain) + ":" + std::string(bus).substr(9, 2);
  }
  CUdevice d;
  if (cuDeviceGet(&d, count) != CUDA_ERROR_INVALID_DEVICE) return "ordinal past the list is valid";
  return out;
}

// Runs layout() in a child and checks what it printed.
void expect_layout(const char* visible, const std::string& want) {
  EXPECT_EXIT(
      {
        const std::string got = layout(visible);
        std::fprintf(stderr, "[%s]\n", got.c_str());
        std::exit(got == want ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "")
      << "CUDA_VISIBLE_DEVICES='" << visible << "' wants [" << want << "]";
}

// The bus of local GPU 0..3 (pci_for: HGX buses 0x18, 0x2a, 0x3a, 0x5d).
TEST(VisibleDevices, OneNodesGpusNumberedFromZero) { expect_layout("4,5,6,7", "1:18,1:2a,1:3a,1:5d"); }
TEST(VisibleDevices, InTheOrderListed) { expect_layout("5,2", "1:2a,0:3a"); }
TEST(VisibleDevices, UnsetIsEveryGpu) {
  EXPECT_EXIT(
      {
        unsetenv("CUDA_VISIBLE_DEVICES");
        int count = 0;
        std::exit(cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&count) == CUDA_SUCCESS && count == 8 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}
TEST(VisibleDevices, AnInvalidEntryEndsTheList) {
  expect_layout("3,junk,4", "0:5d");
  expect_layout("6,8,0", "1:3a");
  expect_layout("1,-1,0", "0:2a");
}
TEST(VisibleDevices, NoneLeftFailsInit) {
  const std::string no_device = "init " + std::to_string(CUDA_ERROR_NO_DEVICE);
  expect_layout("", no_device);
  expect_layout("-1", no_device);
  expect_layout("1,2,1", no_device);
}

}  // namespace
