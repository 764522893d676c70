// Transfers through the plugin's ABI inside one process: sizes (0, 1, unaligned, 64 MiB), tags,
// grouped receives, ranks as threads, many concurrent connections, and the errors NCCL must see.
#include <future>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/shm_layout.h"
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

// A handle naming a segment that is not a private segment of this user's plugin is refused
// before anything is mapped: another program's shared memory (here the job's status region
// name), a segment opened to others (mode 0666), a symlink put in its place (issue 19).
TEST(NcclTransfer, HandlesNamingForeignSegmentsAreRefused) {
  const auto& n = net();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  plugin().set_thread_gpu(0);
  ASSERT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclSuccess);
  plugin().set_thread_gpu(1);
  vgpu::nccl::WireHandle h;
  std::memcpy(&h, handle, sizeof h);
  const std::string segment = std::string("/dev/shm") + h.name;
  auto connect_with = [&](const vgpu::nccl::WireHandle& w) {
    char bytes[NCCL_NET_HANDLE_MAXSIZE] = {};
    std::memcpy(bytes, &w, sizeof w);
    void* sc = nullptr;
    const ncclResult_t r = n.connect(plugin().ctx, 0, bytes, &sc, nullptr);
    EXPECT_EQ(sc, nullptr);
    return r;
  };
  vgpu::nccl::WireHandle other = h;
  std::snprintf(other.name, sizeof other.name, "/vgpu-%u-some-job", static_cast<unsigned>(getuid()));
  EXPECT_EQ(connect_with(other), ncclSystemError);
  ASSERT_EQ(chmod(segment.c_str(), 0666), 0);
  EXPECT_EQ(connect_with(h), ncclSystemError);
  ASSERT_EQ(chmod(segment.c_str(), 0600), 0);
  const std::string moved = segment + ".moved";
  ASSERT_EQ(rename(segment.c_str(), moved.c_str()), 0);
  ASSERT_EQ(symlink(moved.c_str(), segment.c_str()), 0);
  EXPECT_EQ(connect_with(h), ncclSystemError);
  unlink(segment.c_str());
  ASSERT_EQ(rename(moved.c_str(), segment.c_str()), 0);
  // The genuine handle still connects.
  void* sc = nullptr;
  EXPECT_EQ(n.connect(plugin().ctx, 0, handle, &sc, nullptr), ncclSuccess);
  plugin().set_thread_gpu(-1);
  void* rc = nullptr;
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (rc == nullptr && std::chrono::steady_clock::now() < end) ASSERT_EQ(n.accept(lc, &rc, nullptr), ncclSuccess);
  if (sc) {
    EXPECT_EQ(n.closeSend(sc), ncclSuccess);
  }
  if (rc) {
    EXPECT_EQ(n.closeRecv(rc), ncclSuccess);
  }
  EXPECT_EQ(n.closeListen(lc), ncclSuccess);
}

// A driver that renumbers its devices (the sim backend under CUDA_VISIBLE_DEVICES) names the
// rank's GPU of the cluster itself (contract 4's current_global_gpu): the plugin takes it, and
// refuses one the cluster does not have, at listen.
int g_driver_gpu = -1;
int driver_global_gpu(int* gpu) {
  if (g_driver_gpu < 0) return -1;
  *gpu = g_driver_gpu;
  return 0;
}

TEST(NcclTransfer, TheDriversGlobalGpuNamesTheRank) {
  const auto& n = net();
  driver_clocks().global_gpu = &driver_global_gpu;
  ASSERT_TRUE(hand_over_clocks());
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  g_driver_gpu = 1 << 20;  // no cluster has it
  EXPECT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclInvalidUsage);
  EXPECT_EQ(lc, nullptr);
  g_driver_gpu = 1;
  EXPECT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclSuccess);
  if (lc) EXPECT_EQ(n.closeListen(lc), ncclSuccess);
  g_driver_gpu = -1;  // no current context: the plugin's own rule (device 0 here)
  lc = nullptr;
  EXPECT_EQ(n.listen(plugin().ctx, 0, handle, &lc), ncclSuccess);
  if (lc) EXPECT_EQ(n.closeListen(lc), ncclSuccess);
  driver_clocks().global_gpu = nullptr;
  EXPECT_TRUE(hand_over_clocks());
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

// More sends than the connection has descriptors (256) before any receive: the plugin answers
// "retry later" (a null request, as NCCL expects) instead of failing or overwriting, and every
// message arrives in order once receives drain the queue.
TEST(NcclTransfer, SendsBeyondTheDescriptorQueueAreRetriedNotLost) {
  const auto& n = net();
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  constexpr int kMsgs = 300;
  constexpr size_t kLen = 1000;
  std::vector<unsigned char> src(kMsgs * kLen), dst(kMsgs * kLen, 0);
  fill_pattern(src, 123);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  std::vector<void*> sreqs(kMsgs, nullptr);
  int posted = 0;
  while (posted < kMsgs) {
    void* r = nullptr;
    ASSERT_EQ(n.isend(p.send, src.data() + posted * kLen, kLen, posted, smr, nullptr, &r),
              ncclSuccess);
    if (r == nullptr) break;
    sreqs[posted++] = r;
  }
  EXPECT_EQ(posted, 256);  // the descriptor queue is full: NCCL will retry
  std::vector<void*> rreqs(kMsgs, nullptr);
  std::vector<bool> rdone(kMsgs, false);
  for (int i = 0; i < kMsgs; ++i) {
    void* d[1] = {dst.data() + i * kLen};
    size_t s[1] = {kLen};
    int t[1] = {i};
    void* m[1] = {rmr};
    ASSERT_EQ(n.irecv(p.recv, 1, d, s, t, m, nullptr, &rreqs[i]), ncclSuccess);
    ASSERT_NE(rreqs[i], nullptr);
    // NCCL's next proxy pass: test what is outstanding, retry the sends that did not fit.
    for (int j = 0; j <= i; ++j) {
      if (rdone[j]) continue;
      int done = 0;
      ASSERT_EQ(n.test(rreqs[j], &done, nullptr), ncclSuccess);
      rdone[j] = done != 0;
    }
    while (posted < kMsgs) {
      void* q = nullptr;
      ASSERT_EQ(n.isend(p.send, src.data() + posted * kLen, kLen, posted, smr, nullptr, &q),
                ncclSuccess);
      if (q == nullptr) break;
      sreqs[posted++] = q;
    }
  }
  EXPECT_EQ(posted, kMsgs);
  std::vector<void*> all = sreqs;
  for (int i = 0; i < kMsgs; ++i) {
    if (!rdone[i]) all.push_back(rreqs[i]);
  }
  ASSERT_EQ(wait_all(all), ncclSuccess);
  EXPECT_TRUE(src == dst);
  n.deregMr(p.send, smr);
  n.deregMr(p.recv, rmr);
  close_pair(p);
}

// NCCL groups up to maxRecvs receives of one comm into one irecv, all with the sender's rank as
// tag: equal tags fill the buffers in the order the sends were posted. Several grouped receives
// outstanding at once take the sends in posting order, buffer by buffer, whatever the tags.
TEST(NcclTransfer, GroupedReceivesFillInSendOrderAcrossTagsAndRequests) {
  const auto& n = net();
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  constexpr int kGroup = 8;
  constexpr int kGroups = 3;
  constexpr size_t kLen = 70001;  // odd: every message starts at another ring offset
  std::vector<unsigned char> src(kGroup * kGroups * kLen), dst(kGroup * kGroups * kLen, 0);
  fill_pattern(src, 77);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr), ncclSuccess);
  // Group 0: all tag 5. Group 1: tags 1,2 alternating. Group 2: distinct tags, reversed.
  auto tag_of = [&](int g, int i) { return g == 0 ? 5 : g == 1 ? 1 + (i % 2) : 100 + i; };
  std::vector<void*> reqs;
  for (int g = 0; g < kGroups; ++g) {
    void* d[kGroup];
    size_t s[kGroup];
    int t[kGroup];
    void* m[kGroup];
    for (int i = 0; i < kGroup; ++i) {
      d[i] = dst.data() + (g * kGroup + i) * kLen;
      s[i] = kLen;
      t[i] = tag_of(g, i);
      m[i] = rmr;
    }
    void* r = nullptr;
    ASSERT_EQ(n.irecv(p.recv, kGroup, d, s, t, m, nullptr, &r), ncclSuccess);
    ASSERT_NE(r, nullptr);
    reqs.push_back(r);
  }
  // Sends: group by group; within group 2 in reversed buffer order (tags pick the buffer).
  for (int g = 0; g < kGroups; ++g) {
    for (int k = 0; k < kGroup; ++k) {
      int i = g == 2 ? kGroup - 1 - k : k;
      void* r = nullptr;
      ASSERT_EQ(n.isend(p.send, src.data() + (g * kGroup + i) * kLen, kLen, tag_of(g, i), smr,
                        nullptr, &r), ncclSuccess);
      ASSERT_NE(r, nullptr);
      reqs.push_back(r);
    }
  }
  std::vector<std::vector<int>> got;
  ASSERT_EQ(wait_all(reqs, &got), ncclSuccess);
  for (int g = 0; g < kGroups; ++g) {
    for (int i = 0; i < kGroup; ++i) EXPECT_EQ(got[g][i], static_cast<int>(kLen)) << g << "/" << i;
  }
  EXPECT_TRUE(src == dst);
  n.deregMr(p.send, smr);
  n.deregMr(p.recv, rmr);
  close_pair(p);
}

// A send comm closed while its receiver is part-way through a message: the receiver gets an
// error (never a read of a buffer NCCL may already have freed), whichever path carries it.
TEST(NcclTransfer, SenderClosedMidMessageFailsTheReceive) {
  const auto& n = net();
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  const size_t kLen = size_t{40} << 20;  // more than two calls' worth of copying on either path
  std::vector<unsigned char> src(kLen, 0x11), dst(kLen, 0);
  void *smr = nullptr, *rmr = nullptr;
  ASSERT_EQ(n.regMr(p.send, src.data(), kLen, NCCL_PTR_HOST, &smr), ncclSuccess);
  ASSERT_EQ(n.regMr(p.recv, dst.data(), kLen, NCCL_PTR_HOST, &rmr), ncclSuccess);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(n.isend(p.send, src.data(), kLen, 0, smr, nullptr, &sreq), ncclSuccess);
  void* d[1] = {dst.data()};
  size_t s[1] = {kLen};
  int t[1] = {0};
  void* m[1] = {rmr};
  ASSERT_EQ(n.irecv(p.recv, 1, d, s, t, m, nullptr, &rreq), ncclSuccess);
  int done = 0;
  ASSERT_EQ(n.test(rreq, &done, nullptr), ncclSuccess);
  ASSERT_EQ(done, 0);
  ASSERT_EQ(n.deregMr(p.send, smr), ncclSuccess);
  ASSERT_EQ(n.closeSend(p.send), ncclSuccess);
  p.send = nullptr;
  std::fill(src.begin(), src.end(), 0x22);  // what NCCL may do with the memory now
  EXPECT_EQ(wait_all({rreq}), ncclSystemError);
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0x22), 0) << "read the sender's buffer after close";
  n.deregMr(p.recv, rmr);
  close_pair(p);
}
