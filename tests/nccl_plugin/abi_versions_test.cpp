// Every exported ABI version: the struct is there, init works, properties match the cluster, and
// a round trip through that version's own entry points moves the bytes.
#include <cmath>

#include "plugin_fixture.h"

using namespace vtest;

namespace {

// Expected from the test's cluster (meson test env: VGPU_NODES=2, 4 GPUs per node, the default
// 400 Gb/s, 2 us NICs).
constexpr int kNics = 4;
constexpr int kSpeedMbps = 400000;
constexpr float kLatencyUs = 2.0f;

template <class Props> void check_base(const Props& p, int dev) {
  EXPECT_STREQ(p.name, ("vgpu-nic" + std::to_string(dev)).c_str());
  EXPECT_EQ(p.pciPath, nullptr);
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.regIsGlobal, 0);
  EXPECT_EQ(p.speed, kSpeedMbps);
  EXPECT_EQ(p.port, 1);
  EXPECT_NEAR(p.latency, kLatencyUs, 1e-4);
  EXPECT_GE(p.maxComms, 1024);
  EXPECT_GE(p.maxRecvs, 1);
  EXPECT_LE(p.maxRecvs, 8);
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
}

template <class Props> void check_v9(const Props& p, int dev) {
  check_base(p, dev);
  EXPECT_EQ(p.forceFlush, 0);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], dev);
  EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
  EXPECT_EQ(p.maxCollBytes, static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
}

// A round trip of `bytes` with the version's own listen/connect/accept/isend/irecv/test.
template <class Listen, class Connect, class Isend, class Irecv, class Net>
void round_trip(const Net& n, Listen listen, Connect connect, Isend isend, Irecv irecv,
                size_t bytes) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(listen(0, handle, &lc), ncclSuccess);
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while ((sc == nullptr || rc == nullptr) && std::chrono::steady_clock::now() < end) {
    if (sc == nullptr) {
      ASSERT_EQ(connect(0, handle, &sc), ncclSuccess);
    }
    if (rc == nullptr) {
      ASSERT_EQ(n.accept(lc, &rc, nullptr), ncclSuccess);
    }
  }
  ASSERT_NE(sc, nullptr);
  ASSERT_NE(rc, nullptr);
  std::vector<unsigned char> src(bytes), dst(bytes + 8);
  fill_pattern(src, static_cast<unsigned>(bytes));
  void *smr = nullptr, *rmr = nullptr, *sr = nullptr, *rr = nullptr;
  ASSERT_EQ(n.regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  ASSERT_EQ(isend(sc, src.data(), bytes, 9, smr, &sr), ncclSuccess);
  ASSERT_EQ(irecv(rc, dst.data(), dst.size(), 9, rmr, &rr), ncclSuccess);
  std::vector<std::vector<int>> got;
  ASSERT_EQ(wait_all({sr, rr}, &got, n.test), ncclSuccess);
  EXPECT_EQ(got[1][0], static_cast<int>(bytes));
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), bytes));
  void* fr = nullptr;
  void* fd[1] = {dst.data()};
  int fs[1] = {static_cast<int>(bytes)};
  void* fm[1] = {rmr};
  ASSERT_EQ(n.iflush(rc, 1, fd, fs, fm, &fr), ncclSuccess);
  if (fr != nullptr) {
    EXPECT_EQ(wait_all({fr}, nullptr, n.test), ncclSuccess);
  }
  EXPECT_EQ(n.deregMr(sc, smr), ncclSuccess);
  EXPECT_EQ(n.deregMr(rc, rmr), ncclSuccess);
  EXPECT_EQ(n.closeSend(sc), ncclSuccess);
  EXPECT_EQ(n.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(n.closeListen(lc), ncclSuccess);
}

}  // namespace

TEST(NcclAbi, V8) {
  auto* n = plugin().v8;
  ASSERT_NE(n, nullptr);
  EXPECT_STREQ(n->name, "vgpu");
  ASSERT_EQ(n->init(nullptr), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(n->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, kNics);
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v8_t p;
    ASSERT_EQ(n->getProperties(d, &p), ncclSuccess);
    check_base(p, d);
  }
  ncclNetProperties_v8_t p;
  EXPECT_NE(n->getProperties(ndev, &p), ncclSuccess);
  round_trip(*n, n->listen, [&](int dev, void* h, void** sc) { return n->connect(dev, h, sc, nullptr); },
      [&](void* sc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->isend(sc, data, static_cast<int>(size), tag, mr, req);
      },
      [&](void* rc, void* data, size_t size, int tag, void* mr, void** req) {
        int s = static_cast<int>(size);
        return n->irecv(rc, 1, &data, &s, &tag, &mr, req);
      },
      3333);
  // v8 sizes are ints: a negative one is refused, not converted.
  void* req = reinterpret_cast<void*>(0x1);
  int bogus = 0;
  EXPECT_EQ(n->isend(&bogus, &bogus, -1, 0, nullptr, &req), ncclInternalError);
}

TEST(NcclAbi, V9) {
  auto* n = plugin().v9;
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->init(nullptr), ncclSuccess);
  ncclNetProperties_v9_t p;
  ASSERT_EQ(n->getProperties(1, &p), ncclSuccess);
  check_v9(p, 1);
  EXPECT_EQ(n->makeVDevice, nullptr);
  round_trip(*n, n->listen, [&](int dev, void* h, void** sc) { return n->connect(dev, h, sc, nullptr); },
      [&](void* sc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->isend(sc, data, size, tag, mr, req);
      },
      [&](void* rc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->irecv(rc, 1, &data, &size, &tag, &mr, req);
      },
      (size_t{2} << 20) + 1);
}

TEST(NcclAbi, V10) {
  auto* n = plugin().v10;
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->init(nullptr, nullptr), ncclSuccess);
  ncclNetProperties_v10_t p;
  ASSERT_EQ(n->getProperties(2, &p), ncclSuccess);
  check_v9(p, 2);
  ncclNetCommConfig_v10_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  round_trip(*n, n->listen,
      [&](int dev, void* h, void** sc) { return n->connect(dev, &cfg, h, sc, nullptr); },
      [&](void* sc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->isend(sc, data, size, tag, mr, nullptr, req);
      },
      [&](void* rc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->irecv(rc, 1, &data, &size, &tag, &mr, nullptr, req);
      },
      1);
}

TEST(NcclAbi, V11) {
  auto* n = plugin().v11;
  ASSERT_NE(n, nullptr);
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ASSERT_EQ(n->init(&ctx, 42, &cfg, nullptr, nullptr), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  ncclNetProperties_v11_t p;
  ASSERT_EQ(n->getProperties(3, &p), ncclSuccess);
  check_v9(p, 3);
  EXPECT_EQ(p.maxMultiRequestSize, 1);
  EXPECT_EQ(n->setNetAttr, nullptr);
  round_trip(*n, [&](int dev, void* h, void** lc) { return n->listen(ctx, dev, h, lc); },
      [&](int dev, void* h, void** sc) { return n->connect(ctx, dev, h, sc, nullptr); },
      [&](void* sc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->isend(sc, data, size, tag, mr, nullptr, req);
      },
      [&](void* rc, void* data, size_t size, int tag, void* mr, void** req) {
        // NCCL may hand in NCCL_NET_OPTIONAL_RECV_COMPLETION: a real request must come back.
        *req = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
        return n->irecv(rc, 1, &data, &size, &tag, &mr, nullptr, req);
      },
      65536);
  EXPECT_EQ(n->finalize(ctx), ncclSuccess);
}

TEST(NcclAbi, V12) {
  auto* n = plugin().v12;
  ASSERT_NE(n, nullptr);
  void* ctx = plugin().ctx;
  ASSERT_NE(ctx, nullptr);
  int ndev = 0;
  ASSERT_EQ(n->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, kNics);
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v12_t p;
    ASSERT_EQ(n->getProperties(d, &p), ncclSuccess);
    check_v9(p, d);
    EXPECT_EQ(p.railId, NCCL_NET_ID_UNDEF);
    EXPECT_EQ(p.planeId, NCCL_NET_ID_UNDEF);
  }
  round_trip(*n, [&](int dev, void* h, void** lc) { return n->listen(ctx, dev, h, lc); },
      [&](int dev, void* h, void** sc) { return n->connect(ctx, dev, h, sc, nullptr); },
      [&](void* sc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->isend(sc, data, size, tag, mr, nullptr, req);
      },
      [&](void* rc, void* data, size_t size, int tag, void* mr, void** req) {
        return n->irecv(rc, 1, &data, &size, &tag, &mr, nullptr, req);
      },
      100000);
}

TEST(NcclAbi, OnlyThePluginSymbolsAreExported) {
  EXPECT_EQ(dlsym(plugin().dl, "ncclNetPlugin_v7"), nullptr);   // NCCL must not pick v7
  EXPECT_EQ(dlsym(plugin().dl, "ncclCollNetPlugin_v12"), nullptr);  // no collNet offered
  // The contract with the vgpu driver is one symbol, its handshake (vgpu/contracts/nccl_plugin.h).
  EXPECT_NE(dlsym(plugin().dl, "vgpu_nccl_plugin_contract"), nullptr);
  EXPECT_EQ(dlsym(plugin().dl, "vgpu_nccl_set_clock"), nullptr);
  EXPECT_EQ(dlsym(plugin().dl, "vgpu_nccl_current_launch"), nullptr);
}
