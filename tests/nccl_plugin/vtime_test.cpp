// Virtual time: every transfer becomes a simcore flow from the sender's GPU to the receiver's,
// and the completion the plugin reports is what simcore gives for the same flows. Cluster (meson
// test env): 2 nodes x 4 GPUs, one 400 Gb/s (50e9 B/s) NIC per GPU.
#include "plugin_fixture.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"

using namespace vtest;

namespace {

// Each test works in its own virtual-time window so their flows never share a link.
std::atomic<double> g_base{0};
std::atomic<double> g_gpu4_extra{0};
double test_clock(int gpu) { return g_base.load() + (gpu == 4 ? g_gpu4_extra.load() : 0.0); }

struct Flow {
  int src, dst;
  uint64_t bytes;
  double not_before;
};

// What an engine of our own says for the same flows.
std::vector<simcore::Interval> reference(const std::vector<Flow>& flows) {
  auto cfg = simcore::load_cluster_config();
  EXPECT_TRUE(cfg.ok()) << cfg.error.to_string();
  auto engine = simcore::make_engine(*cfg.cluster);
  std::vector<simcore::EventId> ids;
  for (const auto& f : flows) {
    simcore::FlowSpec s;
    s.src_gpu = f.src;
    s.dst_gpu = f.dst;
    s.bytes = f.bytes;
    s.not_before = f.not_before;
    ids.push_back(engine->add_flow(s));
  }
  std::vector<simcore::Interval> out;
  for (auto id : ids) out.push_back(engine->query(id).value_or(simcore::Interval{-1, -1}));
  return out;
}

struct Posted {
  std::vector<unsigned char> src, dst;
  void *smr = nullptr, *rmr = nullptr, *sreq = nullptr, *rreq = nullptr;
};

void post(Pair& p, Posted& x, size_t bytes) {
  const auto& n = net();
  x.src.assign(bytes, 0x3c);
  x.dst.assign(bytes, 0);
  ASSERT_EQ(n.regMr(p.send, x.src.data(), bytes, NCCL_PTR_HOST, &x.smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, x.dst.data(), bytes, NCCL_PTR_HOST, &x.rmr), ncclSuccess);
  ASSERT_EQ(n.isend(p.send, x.src.data(), bytes, 0, x.smr, nullptr, &x.sreq), ncclSuccess);
  void* d[1] = {x.dst.data()};
  size_t s[1] = {bytes};
  int t[1] = {0};
  void* m[1] = {x.rmr};
  ASSERT_EQ(n.irecv(p.recv, 1, d, s, t, m, nullptr, &x.rreq), ncclSuccess);
}

// Waits for the send, then returns the completion the plugin recorded for it.
vgpu_nccl_completion finish_send(Posted& x) {
  vgpu_nccl_completion c{};
  EXPECT_EQ(wait_all({x.rreq}, nullptr, [&](void* r, int* d, int* s) {
              // Keep the sender moving while the receive is polled (one thread for both).
              int sd = 0;
              if (x.sreq != nullptr && net().test(x.sreq, &sd, nullptr) == ncclSuccess && sd) {
                EXPECT_EQ(plugin().last_completion(&c), 0);
                x.sreq = nullptr;
              }
              return net().test(r, d, s);
            }),
            ncclSuccess);
  if (x.sreq != nullptr) {
    EXPECT_EQ(wait_all({x.sreq}), ncclSuccess);
    EXPECT_EQ(plugin().last_completion(&c), 0);
  }
  EXPECT_TRUE(x.src == x.dst);
  return c;
}

class NcclVirtualTime : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(plugin().ctx, nullptr);
    set_clock(&test_clock);  // as the driver's side of the contract
    g_gpu4_extra = 0;
  }
};

}  // namespace

TEST_F(NcclVirtualTime, OneFlowOverOneNicPath) {
  g_base = 10.0;
  Pair p = gpu_pair(4, 0);  // node 1 -> node 0
  Posted x;
  post(p, x, 50'000'000);
  vgpu_nccl_completion c = finish_send(x);
  EXPECT_EQ(c.is_send, 1);
  EXPECT_EQ(c.gpu, 4);
  EXPECT_EQ(c.peer_gpu, 0);
  EXPECT_EQ(c.bytes, 50'000'000u);
  ASSERT_NE(c.flow_id, 0u);
  auto ref = reference({{4, 0, 50'000'000, 10.0}});
  EXPECT_DOUBLE_EQ(c.start, ref[0].start);
  EXPECT_DOUBLE_EQ(c.finish, ref[0].finish);
  // 50e6 B at 50e9 B/s is 1 ms, plus a few microseconds of latency.
  EXPECT_NEAR(c.finish - c.start, 1e-3, 20e-6);
  EXPECT_GT(c.finish - c.start, 1e-3);
  double latest = 0;
  EXPECT_EQ(plugin().latest_completion(4, &latest), 0);
  EXPECT_GE(latest, c.finish);
  close_pair(p);
}

TEST_F(NcclVirtualTime, TwoFlowsIntoOneReceiverShareIt) {
  g_base = 20.0;
  Pair a = gpu_pair(4, 0), b = gpu_pair(5, 0);
  Posted xa, xb;
  post(a, xa, 50'000'000);
  post(b, xb, 50'000'000);
  ASSERT_EQ(wait_all({xa.rreq, xb.rreq, xa.sreq, xb.sreq}), ncclSuccess);
  EXPECT_TRUE(xa.src == xa.dst);
  EXPECT_TRUE(xb.src == xb.dst);
  // Flow ids from the completion log (the last four: two receives, two sends).
  auto completions = plugin().side.completions;
  ASSERT_NE(completions, nullptr);
  std::vector<vgpu_nccl_completion> all(4096);
  int n = completions(0, all.data(), static_cast<int>(all.size()));
  ASSERT_GE(n, 4);
  std::map<int, uint64_t> flow_of_sender;  // receive completions name their peer
  for (int i = n - 4; i < n; ++i) {
    if (!all[i].is_send) flow_of_sender[all[i].peer_gpu] = all[i].flow_id;
  }
  ASSERT_EQ(flow_of_sender.size(), 2u);
  auto ref = reference({{4, 0, 50'000'000, 20.0}, {5, 0, 50'000'000, 20.0}});
  int k = 0;
  for (int src : {4, 5}) {
    double s = 0, f = 0;
    ASSERT_EQ(plugin().flow_interval(flow_of_sender[src], &s, &f), 0);
    EXPECT_DOUBLE_EQ(s, ref[k].start) << src;
    EXPECT_DOUBLE_EQ(f, ref[k].finish) << src;
    // The receiver's NIC is shared: each takes about twice as long as alone.
    EXPECT_GT(f - s, 1.9e-3) << src;
    ++k;
  }
  close_pair(a);
  close_pair(b);
}

TEST_F(NcclVirtualTime, TransfersStartAtTheLaterRanksClock) {
  g_base = 30.0;
  g_gpu4_extra = 0.25e-3;  // the sender is 0.25 ms ahead of the receiver
  Pair p = gpu_pair(4, 0);
  Posted x;
  post(p, x, 1'000'000);
  vgpu_nccl_completion c = finish_send(x);
  EXPECT_DOUBLE_EQ(c.start, 30.0 + 0.25e-3);
  auto ref = reference({{4, 0, 1'000'000, 30.0 + 0.25e-3}});
  EXPECT_DOUBLE_EQ(c.finish, ref[0].finish);
  close_pair(p);
}

// NCCL keeps NCCL_STEPS transfers in flight per connection and reuses a staging slot only once
// its previous transfer completed. Under a clock that stands still for the whole kernel (the
// passthrough backend's: the kernel's start), the first window of transfers starts at the
// clock, and each later one no earlier than the transfer whose slot it reuses finished: a
// pipeline, not every chunk of the kernel piled up at its start.
TEST_F(NcclVirtualTime, ChunksOfOneConnectionPipelineBehindTheirSlots) {
  g_base = 40.0;
  const auto& n = net();
  Pair p = gpu_pair(4, 0);
  constexpr int kWindow = 4;
  constexpr int kChunks = 12;
  constexpr size_t kLen = 2'000'000;
  std::vector<unsigned char> src(kWindow * kLen, 0x5a), dst(kWindow * kLen, 0);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  void* sreq[kChunks] = {};
  void* rreq[kChunks] = {};
  vgpu_nccl_completion recv[kChunks] = {};
  int posted = 0, s_done = 0, r_done = 0;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (r_done < kChunks || s_done < kChunks) {
    ASSERT_LT(std::chrono::steady_clock::now(), end);
    // A slot is free again once both its send and its receive completed.
    while (posted < kChunks && posted - std::min(s_done, r_done) < kWindow) {
      void* d[1] = {dst.data() + (posted % kWindow) * kLen};
      size_t s[1] = {kLen};
      int t[1] = {4};
      void* m[1] = {rmr};
      ASSERT_EQ(n.irecv(p.recv, 1, d, s, t, m, nullptr, &rreq[posted]), ncclSuccess);
      ASSERT_EQ(n.isend(p.send, src.data() + (posted % kWindow) * kLen, kLen, 4, smr, nullptr,
                        &sreq[posted]), ncclSuccess);
      ++posted;
    }
    int done = 0;
    if (s_done < posted) {
      ASSERT_EQ(n.test(sreq[s_done], &done, nullptr), ncclSuccess);
      if (done) ++s_done;
    }
    if (r_done < posted) {
      ASSERT_EQ(n.test(rreq[r_done], &done, nullptr), ncclSuccess);
      if (done) {
        ASSERT_EQ(plugin().last_completion(&recv[r_done]), 0);
        ++r_done;
      }
    }
  }
  // Where simcore places them now that all are known (a completion reports the interval as it
  // stood then; later chunks of the first window could still move it).
  double start[kChunks], finish[kChunks];
  for (int k = 0; k < kChunks; ++k) {
    ASSERT_NE(recv[k].flow_id, 0u) << k;
    ASSERT_EQ(plugin().flow_interval(recv[k].flow_id, &start[k], &finish[k]), 0) << k;
  }
  for (int k = 0; k < kChunks; ++k) {
    SCOPED_TRACE(k);
    if (k < kWindow) {
      EXPECT_DOUBLE_EQ(start[k], 40.0);  // the first window starts with the kernel
    } else {
      EXPECT_DOUBLE_EQ(start[k], finish[k - kWindow]);  // as soon as its slot is free
    }
  }
  // 12 chunks of 2 MB over one 50 GB/s NIC path: 480 us of bytes, and three windows' latency
  // (each window waits for the previous one's last byte to land).
  EXPECT_NEAR(finish[kChunks - 1] - 40.0, 12 * kLen / 50e9 + 3 * 2.5e-6, 1e-6);
  n.deregMr(p.send, smr);
  n.deregMr(p.recv, rmr);
  close_pair(p);
}
