// The contract between the vgpu driver and the plugin (vgpu/contracts/nccl_plugin.h), seen from
// the plugin: its one handshake refuses a driver of another version or table size with one log
// line and hands nothing over; one of the same version gets the whole table.
#include "plugin_fixture.h"

using namespace vtest;

namespace {

vgpu_nccl_plugin_side empty_side() {
  vgpu_nccl_plugin_side s{};
  s.size = sizeof s;
  s.version = VGPU_NCCL_CONTRACT_VERSION;
  return s;
}

TEST(NcclContract, AnotherVersionOrSizeIsRefusedWithOneLineAndNothingHandedOver) {
  ASSERT_NE(plugin().handshake, nullptr);
  vgpu_nccl_driver_side driver{sizeof driver, VGPU_NCCL_CONTRACT_VERSION + 1, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  vgpu_nccl_plugin_side out = empty_side();
  testing::internal::CaptureStderr();
  EXPECT_EQ(plugin().handshake(VGPU_NCCL_CONTRACT_VERSION + 1, &driver, &out), -1);
  const std::string line = testing::internal::GetCapturedStderr();
  EXPECT_NE(line.find("refused a driver of contract " + std::to_string(VGPU_NCCL_CONTRACT_VERSION + 1)),
            std::string::npos) << line;
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_EQ(out.current_launch, nullptr);
  EXPECT_EQ(out.describe_launch, nullptr);

  // The right version number with a table of another size (a newer or older build's struct).
  driver.version = VGPU_NCCL_CONTRACT_VERSION;
  driver.size = sizeof driver - 8;
  EXPECT_EQ(plugin().handshake(VGPU_NCCL_CONTRACT_VERSION, &driver, &out), -1);
  driver.size = sizeof driver;
  out.size = sizeof out + 8;
  EXPECT_EQ(plugin().handshake(VGPU_NCCL_CONTRACT_VERSION, &driver, &out), -1);
  EXPECT_EQ(out.current_launch, nullptr);
  EXPECT_EQ(plugin().handshake(VGPU_NCCL_CONTRACT_VERSION, &driver, nullptr), -1);
}

TEST(NcclContract, TheSameVersionGetsEverySlot) {
  vgpu_nccl_plugin_side out = empty_side();
  ASSERT_EQ(plugin().handshake(VGPU_NCCL_CONTRACT_VERSION, nullptr, &out), 0);
  EXPECT_EQ(out.version, VGPU_NCCL_CONTRACT_VERSION);
  EXPECT_EQ(out.size, sizeof out);
  for (const void* slot : {reinterpret_cast<const void*>(out.current_launch), reinterpret_cast<const void*>(out.describe_launch),
                           reinterpret_cast<const void*>(out.launch_window), reinterpret_cast<const void*>(out.launch_transfers),
                           reinterpret_cast<const void*>(out.forget_launch), reinterpret_cast<const void*>(out.completions),
                           reinterpret_cast<const void*>(out.flow_interval), reinterpret_cast<const void*>(out.latest_completion),
                           reinterpret_cast<const void*>(out.last_completion), reinterpret_cast<const void*>(out.set_thread_gpu),
                           reinterpret_cast<const void*>(out.local_ranks), reinterpret_cast<const void*>(out.launch_tasks)})
    EXPECT_NE(slot, nullptr);
  EXPECT_EQ(out.current_launch(), 0u);  // no launch under way on this thread
  vgpu_nccl_launch d{};
  EXPECT_EQ(out.describe_launch(12345, &d), -1);
  EXPECT_EQ(out.local_ranks(0x5eed), 0);  // no communicator's context is open
  int n = -1;
  EXPECT_EQ(out.launch_tasks(12345, nullptr, 0, &n), -1);  // a launch the profiler never saw
}

}  // namespace
