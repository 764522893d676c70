// The driver's half of the plugin contract (vgpu/front/nccl/nccl_plugin_client.h), which both
// backends use: it finds the plugin NCCL loaded by one symbol, refuses a plugin that answers
// another version or size with one line (no crash; timing falls back), takes the plugin's knock
// through the private export table, and turns the one description of a launch into the
// collective model's calls for either backend.
#include "front/nccl/nccl_plugin_client.h"

#include "profiler_fixture.h"

using namespace vtest;
using vgpu::contracts::NcclPluginClient;

namespace {

NcclPluginClient* g_backend = nullptr;  // what the knock reaches in this test

int device_seven(int* d) {
  *d = 7;
  return 0;
}

// A plugin of another build: answers a table of another version.
int newer_plugin(uint32_t, const vgpu_nccl_driver_side*, vgpu_nccl_plugin_side* out) {
  out->version = VGPU_NCCL_CONTRACT_VERSION + 1;
  return 0;
}
// A plugin that refuses the driver.
int refusing_plugin(uint32_t, const vgpu_nccl_driver_side*, vgpu_nccl_plugin_side*) { return -1; }

}  // namespace

vgpu::contracts::NcclPluginClient* vgpu::contracts::backend_nccl_plugin_client() { return g_backend; }

TEST(NcclContractClient, APluginOfAnotherVersionIsRefusedWithOneLineAndStaysRefused) {
  for (auto fn : {&newer_plugin, &refusing_plugin}) {
    NcclPluginClient client(vgpu_nccl_driver_side{});
    testing::internal::CaptureStderr();
    EXPECT_EQ(client.connect(fn), -1);
    const std::string line = testing::internal::GetCapturedStderr();
    if (fn == &newer_plugin) {  // the first refusal of the process logs its line (once)
      EXPECT_NE(line.find("do not share a contract"), std::string::npos) << line;
      EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
    }
    EXPECT_EQ(client.plugin(), nullptr);  // timing falls back; the real plugin is not asked again
    EXPECT_EQ(client.connect(plugin().handshake), -1);
  }
}

TEST(NcclContractClient, FindsThePluginNcclLoadedAndHandsItsSideOver) {
  ASSERT_NE(plugin().dl, nullptr);  // loaded RTLD_LOCAL, as NCCL loads it
  NcclPluginClient client(vgpu_nccl_driver_side{0, 0, nullptr, nullptr, &device_seven, nullptr, nullptr, nullptr});
  const vgpu_nccl_plugin_side* p = client.plugin();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(client.plugin(), p);
  EXPECT_EQ(p->version, VGPU_NCCL_CONTRACT_VERSION);
  // The knock: the plugin offers its handshake through the contract table.
  const unsigned char uuid[16] = VGPU_NCCL_CONTRACT_TABLE_UUID;
  const void* table = nullptr;
  ASSERT_TRUE(vgpu::contracts::serve_nccl_contract_table(reinterpret_cast<const CUuuid_st*>(uuid), &table));
  const auto* t = static_cast<const vgpu_nccl_contract_table*>(table);
  EXPECT_EQ(t->size, sizeof(vgpu_nccl_contract_table));
  EXPECT_EQ(t->offer_plugin(plugin().handshake), -1);  // no backend initialised yet
  NcclPluginClient knocked(vgpu_nccl_driver_side{});
  g_backend = &knocked;
  EXPECT_EQ(t->offer_plugin(plugin().handshake), 0);
  EXPECT_EQ(t->offer_plugin(plugin().handshake), 0);  // once agreed, a second knock changes nothing
  g_backend = nullptr;
  const unsigned char other[16] = {1};
  EXPECT_FALSE(vgpu::contracts::serve_nccl_contract_table(reinterpret_cast<const CUuuid_st*>(other), &table));
}

// One description of a launch, read through the contract, serves both backends: the sim backend
// (collectives only: send/recv kernels involve only some ranks) and the passthrough (also its
// Send/Recv, as one point-to-point or all-to-all call).
TEST(NcclContractClient, OneDescriptionServesBothBackends) {
  NcclPluginClient client(vgpu_nccl_driver_side{});
  const vgpu_nccl_plugin_side* p = client.plugin();
  ASSERT_NE(p, nullptr);
  Comm c;  // 2 ranks, this one rank 0
  void* group = c.start(ncclProfileGroupApi, nullptr);
  ncclProfilerEventDescr_v5_t d = Comm::describe<ncclProfilerEventDescr_v5_t>(ncclProfileCollApi, group, nullptr);
  d.collApi.func = "AllReduce", d.collApi.count = 1 << 20, d.collApi.datatype = "ncclFloat32";
  void* api = nullptr;
  ASSERT_EQ(profiler().v5->startEvent(c.context(), &api, &d), ncclSuccess);
  Comm::stop(api);
  void* h = c.start(ncclProfileKernelLaunch, group);
  const uint64_t tag = p->current_launch();  // what the driver reads inside cuLaunchKernel
  ASSERT_NE(tag, 0u);
  vgpu_nccl_launch at_launch{};
  ASSERT_EQ(p->describe_launch(tag, &at_launch), 0);  // the sim backend asks here
  Comm::stop(h);
  // The kernel's tasks come later: an all-reduce task and a send to the peer.
  void* plan = c.start(ncclProfileGroup, nullptr);
  ncclProfilerEventDescr_v5_t s{};
  s.type = ncclProfileP2p, s.parentObj = api, s.p2p.parentGroup = plan;
  s.p2p.func = "Send", s.p2p.count = 4096, s.p2p.datatype = "ncclUint8", s.p2p.peer = 1;
  void* send = nullptr;
  ASSERT_EQ(profiler().v5->startEvent(c.context(), &send, &s), ncclSuccess);
  Comm::stop(send);
  vgpu_nccl_launch at_end{};
  ASSERT_EQ(p->describe_launch(tag, &at_end), 0);  // the passthrough asks once the kernel ended
  Comm::stop(plan);
  Comm::stop(group);

  const std::vector<int> gpus{4, 5};
  const auto sim = vgpu::contracts::collective_calls(at_launch, gpus, false);
  ASSERT_EQ(sim.size(), 1u);
  EXPECT_EQ(sim[0].op, simcore::CollectiveOp::all_reduce);
  EXPECT_EQ(sim[0].bytes, 4u << 20);
  EXPECT_EQ(sim[0].gpus, gpus);
  const auto pass = vgpu::contracts::collective_calls(at_end, gpus, true);
  ASSERT_EQ(pass.size(), 2u);
  EXPECT_EQ(pass[0].op, simcore::CollectiveOp::all_reduce);
  EXPECT_EQ(pass[0].bytes, 4u << 20);  // the same collective as the sim backend's
  EXPECT_EQ(pass[1].op, simcore::CollectiveOp::send_recv);
  EXPECT_EQ(pass[1].bytes, 4096u);
  EXPECT_EQ(vgpu::contracts::collective_calls(at_end, gpus, false).size(), 1u);  // the sim's view of it
}
