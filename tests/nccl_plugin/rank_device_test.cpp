// Which GPU a rank is, found the way a PyTorch job leaves it to the plugin: the CUDA runtime
// loads libcuda.so.1 with RTLD_LOCAL (so its symbols are not global) and makes the rank's
// device current; nothing tells the plugin the rank's GPU. The plugin must ask the loaded
// driver (dlopen by name, not RTLD_DEFAULT) for its side of the contract (the knock through the
// driver's contract table, vgpu/contracts/nccl_plugin.h) and ask that for the current device; it
// used to count every such rank as GPU 0, and every transfer as a flow from GPU 0 to itself. The
// driver here is vgpu's sim backend.
#include <cuda.h>

#include "plugin_fixture.h"

using namespace vtest;

namespace {

using InitFn = CUresult (*)(unsigned);
using RetainFn = CUresult (*)(CUcontext*, CUdevice);
using SetCurrentFn = CUresult (*)(CUcontext);

TEST(RankDevice, FromTheCurrentContextOfADriverLoadedLocally) {
  void* cuda = dlopen(VGPU_SIM_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(cuda, nullptr) << dlerror();
  ASSERT_EQ(dlsym(RTLD_DEFAULT, "cuCtxGetDevice"), nullptr) << "the driver must not be global here";
  ASSERT_EQ(reinterpret_cast<InitFn>(dlsym(cuda, "cuInit"))(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(reinterpret_cast<RetainFn>(dlsym(cuda, "cuDevicePrimaryCtxRetain"))(&ctx, 3), CUDA_SUCCESS);
  ASSERT_EQ(reinterpret_cast<SetCurrentFn>(dlsym(cuda, "cuCtxSetCurrent"))(ctx), CUDA_SUCCESS);

  ASSERT_NE(plugin().v12, nullptr);
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  std::vector<unsigned char> out(4096, 7), in(4096, 0);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net().regMr(p.send, out.data(), out.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net().regMr(p.recv, in.data(), in.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void* rreq = nullptr;
  void* sreq = nullptr;
  void* data[] = {in.data()};
  size_t sizes[] = {in.size()};
  int tags[] = {1};
  void* mhs[] = {rmh};
  ASSERT_EQ(net().irecv(p.recv, 1, data, sizes, tags, mhs, nullptr, &rreq), ncclSuccess);
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (sreq == nullptr && std::chrono::steady_clock::now() < end)
    ASSERT_EQ(net().isend(p.send, out.data(), out.size(), 1, smh, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(wait_all({sreq, rreq}), ncclSuccess);
  EXPECT_EQ(in, out);
  vgpu_nccl_completion c{};
  ASSERT_EQ(plugin().last_completion(&c), 0);
  // Node 0 of the test cluster (2 nodes x 4 GPUs): the rank's device is global GPU 3.
  EXPECT_EQ(c.gpu, 3);
  EXPECT_EQ(c.peer_gpu, 3);
  net().deregMr(p.send, smh);
  net().deregMr(p.recv, rmh);
  close_pair(p);
}

}  // namespace
