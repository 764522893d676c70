// Transfers through the plugin's ABI inside one process: sizes (0, 1, unaligned, 64 MiB), tags,
// grouped receives, ranks as threads, many concurrent connections, and the errors NCCL must see.
#include <future>
#include <thread>

#include "plugin_fixture.h"

using namespace vtest;

namespace {

struct Regs {
  void* send_mr = nullptr;
  void* recv_mr = nullptr;
};

// One send of `bytes` and one receive of `recv_bytes` over `p`, polled in this thread.
void round_trip(Pair& p, size_t bytes, size_t recv_bytes, int tag, unsigned seed) {
  const auto& n = net();
  std::vector<unsigned char> src(bytes + 1), dst(recv_bytes + 1, 0xEE);
  fill_pattern(src, seed);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(n.isend(p.send, src.data(), bytes, tag, smr, nullptr, &sreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  void* data[1] = {dst.data()};
  size_t sizes[1] = {recv_bytes};
  int tags[1] = {tag};
  void* mrs[1] = {rmr};
  ASSERT_EQ(n.irecv(p.recv, 1, data, sizes, tags, mrs, nullptr, &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  std::vector<std::vector<int>> got;
  ASSERT_EQ(wait_all({sreq, rreq}, &got), ncclSuccess);
  EXPECT_EQ(got[0][0], static_cast<int>(bytes));
  EXPECT_EQ(got[1][0], static_cast<int>(bytes));
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), bytes)) << bytes << " bytes differ";
  EXPECT_EQ(dst[bytes], 0xEE) << "wrote past the message";
  EXPECT_EQ(n.deregMr(p.send, smr), ncclSuccess);
  EXPECT_EQ(n.deregMr(p.recv, rmr), ncclSuccess);
}

}  // namespace

TEST(NcclTransfer, PluginLoadsAndInits) {
  ASSERT_NE(plugin().dl, nullptr) << dlerror();
  ASSERT_NE(plugin().v12, nullptr);
  ASSERT_NE(plugin().ctx, nullptr);
}

TEST(NcclTransfer, SizesInOneThread) {
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  unsigned seed = 1;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{4093}, size_t{1} << 20,
                       (size_t{3} << 20) + 5, size_t{64} << 20}) {
    SCOPED_TRACE(bytes);
    round_trip(p, bytes, bytes, static_cast<int>(seed), seed);
    ++seed;
  }
  // A receive larger than the send completes with the sent size.
  round_trip(p, 1000, 5000, 3, 99);
  close_pair(p);
}

TEST(NcclTransfer, RanksAsThreads) {
  const auto& n = net();
  std::promise<std::vector<char>> handle_p;
  auto handle_f = handle_p.get_future();
  constexpr int kMsgs = 40;
  auto size_of = [](int i) { return static_cast<size_t>(i * 37777 + (i % 3)); };
  std::atomic<bool> recv_ok{false}, send_ok{false};

  std::thread receiver([&] {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* lc = nullptr;
    if (n.listen(plugin().ctx, 0, handle, &lc) != ncclSuccess) return handle_p.set_value({});
    handle_p.set_value(std::vector<char>(handle, handle + sizeof handle));
    void* rc = nullptr;
    auto end = std::chrono::steady_clock::now() + kDeadline;
    while (rc == nullptr && std::chrono::steady_clock::now() < end) {
      if (n.accept(lc, &rc, nullptr) != ncclSuccess) return;
    }
    if (rc == nullptr) return;
    bool ok = true;
    for (int i = 0; i < kMsgs && ok; ++i) {
      std::vector<unsigned char> want(size_of(i)), buf(size_of(i) + 16);
      fill_pattern(want, i);
      void* mr = nullptr;
      ok = n.regMr(rc, buf.data(), buf.size(), NCCL_PTR_HOST, &mr) == ncclSuccess;
      void* data[1] = {buf.data()};
      size_t sizes[1] = {buf.size()};
      int tags[1] = {i};
      void* mrs[1] = {mr};
      void* req = nullptr;
      ok = ok && n.irecv(rc, 1, data, sizes, tags, mrs, nullptr, &req) == ncclSuccess;
      std::vector<std::vector<int>> got;
      ok = ok && wait_all({req}, &got) == ncclSuccess;
      ok = ok && got[0][0] == static_cast<int>(want.size()) &&
           (want.empty() || std::memcmp(want.data(), buf.data(), want.size()) == 0);
      n.deregMr(rc, mr);
    }
    recv_ok = ok;
    n.closeRecv(rc);
    n.closeListen(lc);
  });
  std::thread sender([&] {
    auto handle = handle_f.get();
    if (handle.empty()) return;
    void* sc = nullptr;
    auto end = std::chrono::steady_clock::now() + kDeadline;
    while (sc == nullptr && std::chrono::steady_clock::now() < end) {
      if (n.connect(plugin().ctx, 0, handle.data(), &sc, nullptr) != ncclSuccess) return;
    }
    if (sc == nullptr) return;
    // All sends posted at once (the receiver posts one at a time): the ring and the descriptor
    // queue must carry them in order.
    std::vector<std::vector<unsigned char>> bufs(kMsgs);
    std::vector<void*> reqs, mrs;
    bool ok = true;
    for (int i = 0; i < kMsgs && ok; ++i) {
      bufs[i].resize(size_of(i));
      fill_pattern(bufs[i], i);
      void* mr = nullptr;
      ok = n.regMr(sc, bufs[i].data(), bufs[i].size(), NCCL_PTR_HOST, &mr) == ncclSuccess;
      void* req = nullptr;
      ok = ok && n.isend(sc, bufs[i].data(), bufs[i].size(), i, mr, nullptr, &req) == ncclSuccess &&
           req != nullptr;
      reqs.push_back(req);
      mrs.push_back(mr);
    }
    ok = ok && wait_all(reqs) == ncclSuccess;
    for (void* mr : mrs) n.deregMr(sc, mr);
    send_ok = ok;
    n.closeSend(sc);
  });
  sender.join();
  receiver.join();
  EXPECT_TRUE(send_ok);
  EXPECT_TRUE(recv_ok);
}

TEST(NcclTransfer, GroupedReceiveMatchesByTag) {
  const auto& n = net();
  {
    ncclNetProperties_v12_t props;
    ASSERT_EQ(n.getProperties(0, &props), ncclSuccess);
    ASSERT_GE(props.maxRecvs, 3);
  }
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  constexpr int kN = 3;
  std::vector<unsigned char> src[kN], dst[kN];
  size_t lens[kN] = {100, 0, 70001};
  int tags[kN] = {11, 22, 33};
  void *smr[kN], *rmr[kN], *dptr[kN];
  size_t rsizes[kN];
  for (int i = 0; i < kN; ++i) {
    src[i].resize(lens[i] + 1);
    fill_pattern(src[i], 50 + i);
    dst[i].assign(80000, 0);
    ASSERT_EQ(n.regMr(p.send, src[i].data(), src[i].size(), NCCL_PTR_HOST, &smr[i]), ncclSuccess);
    ASSERT_EQ(n.regMr(p.recv, dst[i].data(), dst[i].size(), NCCL_PTR_HOST, &rmr[i]), ncclSuccess);
    dptr[i] = dst[i].data();
    rsizes[i] = dst[i].size();
  }
  void* rreq = nullptr;
  ASSERT_EQ(n.irecv(p.recv, kN, dptr, rsizes, tags, rmr, nullptr, &rreq), ncclSuccess);
  // Sends in another order than the buffers: tags pick the buffer.
  std::vector<void*> reqs;
  for (int i : {2, 0, 1}) {
    void* r = nullptr;
    ASSERT_EQ(n.isend(p.send, src[i].data(), lens[i], tags[i], smr[i], nullptr, &r), ncclSuccess);
    reqs.push_back(r);
  }
  reqs.push_back(rreq);
  std::vector<std::vector<int>> got;
  ASSERT_EQ(wait_all(reqs, &got), ncclSuccess);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got[3][i], static_cast<int>(lens[i])) << i;
    EXPECT_EQ(0, std::memcmp(src[i].data(), dst[i].data(), lens[i])) << i;
  }
  for (int i = 0; i < kN; ++i) {
    n.deregMr(p.send, smr[i]);
    n.deregMr(p.recv, rmr[i]);
  }
  close_pair(p);
}

TEST(NcclTransfer, ManyConnectionsAcrossThreads) {
  constexpr int kThreads = 8;
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      Pair p;
      if (!connect_pair(&p, t % 2)) return;
      const auto& n = net();
      bool good = true;
      for (int i = 0; i < 20 && good; ++i) {
        size_t bytes = static_cast<size_t>((t + 1) * 10007 + i * 313);
        std::vector<unsigned char> src(bytes), dst(bytes);
        fill_pattern(src, t * 100 + i);
        void *smr = nullptr, *rmr = nullptr, *sr = nullptr, *rr = nullptr;
        good = n.regMr(p.send, src.data(), bytes, NCCL_PTR_HOST, &smr) == ncclSuccess &&
               n.regMr(p.recv, dst.data(), bytes, NCCL_PTR_HOST, &rmr) == ncclSuccess &&
               n.isend(p.send, src.data(), bytes, 0, smr, nullptr, &sr) == ncclSuccess;
        void* d[1] = {dst.data()};
        size_t s[1] = {bytes};
        int tg[1] = {0};
        void* m[1] = {rmr};
        good = good && n.irecv(p.recv, 1, d, s, tg, m, nullptr, &rr) == ncclSuccess &&
               wait_all({sr, rr}) == ncclSuccess && src == dst;
        n.deregMr(p.send, smr);
        n.deregMr(p.recv, rmr);
      }
      close_pair(p);
      if (good) ok++;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), kThreads);
}

TEST(NcclTransfer, SendLargerThanReceiveIsInvalidUsage) {
  const auto& n = net();
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  std::vector<unsigned char> src(4096), dst(1024);
  void *smr, *rmr, *sr = nullptr, *rr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  ASSERT_EQ(n.isend(p.send, src.data(), src.size(), 0, smr, nullptr, &sr), ncclSuccess);
  void* d[1] = {dst.data()};
  size_t s[1] = {dst.size()};
  int tg[1] = {0};
  void* m[1] = {rmr};
  ASSERT_EQ(n.irecv(p.recv, 1, d, s, tg, m, nullptr, &rr), ncclSuccess);
  EXPECT_EQ(wait_all({rr}), ncclInvalidUsage);
  EXPECT_EQ(wait_all({sr}), ncclInvalidUsage);  // the sender hears of it too
  close_pair(p);
}

TEST(NcclTransfer, BadArgumentsAreErrorsNotCrashes) {
  const auto& n = net();
  int bogus = 0;
  void* out = reinterpret_cast<void*>(0x1);
  int done = 0;
  EXPECT_EQ(n.test(&bogus, &done, nullptr), ncclInternalError);
  EXPECT_EQ(n.closeSend(&bogus), ncclInternalError);
  EXPECT_EQ(n.closeRecv(&bogus), ncclInternalError);
  EXPECT_EQ(n.closeListen(&bogus), ncclInternalError);
  EXPECT_EQ(n.regMr(&bogus, &bogus, 4, NCCL_PTR_HOST, &out), ncclInternalError);
  EXPECT_EQ(n.isend(&bogus, &bogus, 4, 0, nullptr, nullptr, &out), ncclInternalError);
  EXPECT_EQ(out, nullptr);
  char garbage[NCCL_NET_HANDLE_MAXSIZE];
  std::memset(garbage, 0x5a, sizeof garbage);
  void* sc = nullptr;
  EXPECT_NE(n.connect(plugin().ctx, 0, garbage, &sc, nullptr), ncclSuccess);
  EXPECT_EQ(sc, nullptr);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  EXPECT_EQ(n.listen(plugin().ctx, 999, handle, &lc), ncclInternalError);

  // A send comm is not a listen comm; a send buffer outside its registration is refused.
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  EXPECT_EQ(n.accept(p.send, &out, nullptr), ncclInternalError);
  std::vector<unsigned char> buf(100);
  void* mr = nullptr;
  ASSERT_EQ(n.regMr(p.send, buf.data(), 50, NCCL_PTR_HOST, &mr), ncclSuccess);
  void* req = nullptr;
  EXPECT_EQ(n.isend(p.send, buf.data() + 10, 60, 0, mr, nullptr, &req), ncclInvalidUsage);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(n.regMr(p.send, buf.data(), 10, NCCL_PTR_CUDA, &out), ncclInvalidUsage);
  EXPECT_EQ(n.deregMr(p.send, mr), ncclSuccess);
  EXPECT_EQ(n.deregMr(p.send, mr), ncclInternalError);  // twice
  close_pair(p);
}

TEST(NcclTransfer, PeerClosedIsAnError) {
  const auto& n = net();
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  std::vector<unsigned char> dst(64);
  void* rmr = nullptr;
  ASSERT_EQ(n.regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  ASSERT_EQ(n.closeSend(p.send), ncclSuccess);
  p.send = nullptr;
  void* d[1] = {dst.data()};
  size_t s[1] = {dst.size()};
  int tg[1] = {0};
  void* m[1] = {rmr};
  void* rr = nullptr;
  ASSERT_EQ(n.irecv(p.recv, 1, d, s, tg, m, nullptr, &rr), ncclSuccess);
  EXPECT_EQ(wait_all({rr}), ncclSystemError);
  close_pair(p);
}
