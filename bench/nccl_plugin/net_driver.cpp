#include "net_driver.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "abi/net_v11.h"
#include "contracts/nccl_plugin.h"
#include "abi/net_v12.h"

namespace nccl_bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBarrierDeadline = std::chrono::seconds(300);
constexpr auto kExchangeDeadline = std::chrono::seconds(120);
constexpr int kBatches = 3;

// The kernel clock (RunConfig::kernel_clock), per global GPU.
constexpr int kClockGpus = 1024;
std::atomic<double> g_kernel_start[kClockGpus];
double kernel_clock(int gpu) {
  return gpu >= 0 && gpu < kClockGpus ? g_kernel_start[gpu].load(std::memory_order_relaxed) : 0;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class Net> void fill_ops(Net* n, const char* abi, NetOps* o) {
  o->abi = abi;
  o->listen = n->listen;
  o->connect = n->connect;
  o->accept = n->accept;
  o->reg_mr = n->regMr;
  o->dereg_mr = n->deregMr;
  o->isend = n->isend;
  o->irecv = n->irecv;
  o->test = n->test;
  o->close_send = n->closeSend;
  o->close_recv = n->closeRecv;
  o->close_listen = n->closeListen;
}

template <class Net, class Cfg> std::string init_table(Net* n, NetOps* o) {
  Cfg cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclResult_t rc = n->init(&o->ctx, /*commId=*/0x5eed, &cfg, nullptr, nullptr);
  if (rc != ncclSuccess) return "plugin init failed with " + std::to_string(rc);
  return {};
}

void fail(Shared* s, const std::string& what) {
  uint32_t expected = 0;
  if (s->failed.compare_exchange_strong(expected, 1)) {
    std::snprintf(s->error, sizeof s->error, "%s", what.c_str());
  }
}

// Counting barrier for the two ranks; false when the other rank failed or never came.
bool barrier(Shared* s) {
  uint32_t gen = s->generation.load(std::memory_order_acquire);
  if (s->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == 2) {
    s->arrived.store(0, std::memory_order_relaxed);
    s->generation.fetch_add(1, std::memory_order_acq_rel);
    return s->failed.load() == 0;
  }
  auto end = Clock::now() + kBarrierDeadline;
  int spins = 0;
  while (s->generation.load(std::memory_order_acquire) == gen) {
    if (s->failed.load() != 0) return false;
    if (++spins > 64) {
      sched_yield();
      spins = 0;
      if (Clock::now() > end) {
        fail(s, "barrier: the other rank never arrived");
        return false;
      }
    }
  }
  return s->failed.load() == 0;
}

// The content of one chunk: 8-byte words from a seed that names the exchange, channel, chunk and
// sending rank, so a byte delivered to the wrong place or out of order shows.
uint64_t seed_of(uint64_t exchange, int channel, uint64_t chunk, int rank) {
  uint64_t x = exchange * 0x9E3779B97F4A7C15ull ^ (chunk << 20) ^ (uint64_t(channel) << 8) ^
               uint64_t(rank + 1);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

uint64_t word_at(uint64_t seed, size_t i) { return seed + i * 0xD1B54A32D192ED03ull; }

void fill(unsigned char* p, size_t n, uint64_t seed, bool all) {
  if (!all) {  // a stamp at both ends
    if (n >= 8) {
      std::memcpy(p, &seed, 8);
      std::memcpy(p + n - 8, &seed, 8);
    }
    return;
  }
  size_t words = n / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = word_at(seed, i);
    std::memcpy(p + 8 * i, &w, 8);
  }
  uint64_t last = word_at(seed, words);
  std::memcpy(p + 8 * words, &last, n % 8);
}

bool matches(const unsigned char* p, size_t n, uint64_t seed, bool all) {
  if (!all) {
    if (n < 8) return true;
    uint64_t head = 0, tail = 0;
    std::memcpy(&head, p, 8);
    std::memcpy(&tail, p + n - 8, 8);
    return head == seed && tail == seed;
  }
  size_t words = n / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = word_at(seed, i);
    if (std::memcmp(p + 8 * i, &w, 8) != 0) return false;
  }
  uint64_t last = word_at(seed, words);
  return std::memcmp(p + 8 * words, &last, n % 8) == 0;
}

// One connection pair of a rank (NCCL: one channel's net send and receive).
struct Channel {
  void* send_comm = nullptr;
  void* recv_comm = nullptr;
  void* listen_comm = nullptr;
  std::vector<unsigned char> sbuf, rbuf;  // NCCL's host staging buffers: depth slots of chunk
  void* smr = nullptr;
  void* rmr = nullptr;
  void* sreq[kMaxDepth] = {};
  void* rreq[kMaxDepth] = {};
  // Per exchange:
  size_t bytes = 0;
  uint64_t chunks = 0;
  uint64_t s_post = 0, s_done = 0, r_post = 0, r_done = 0;
  size_t chunk_bytes(uint64_t i, size_t chunk) const {
    return i + 1 < chunks ? chunk : bytes - (chunks - 1) * chunk;
  }
  bool finished() const { return s_done == chunks && r_done == chunks; }
};

class Rank {
 public:
  Rank(const NetOps& o, Shared* s, int r, const RunConfig& c)
      : ops_(o), shared_(s), rank_(r), cfg_(c), channels_(static_cast<size_t>(c.channels)) {}

  bool run() {
    if (cfg_.channels < 1 || cfg_.channels > kMaxChannels || cfg_.depth < 1 ||
        cfg_.depth > kMaxDepth || cfg_.chunk == 0) {
      return error("bad run configuration");
    }
    if (ops_.set_thread_gpu != nullptr) ops_.set_thread_gpu(cfg_.first_gpu + rank_);
    if (cfg_.kernel_clock) {
      if (ops_.set_clock == nullptr || ops_.latest_completion == nullptr) {
        return error("the plugin has no contract with the vgpu driver (vgpu_nccl_plugin_contract)");
      }
      ops_.set_clock(&kernel_clock);
    }
    if (!connect()) return false;
    for (int i = 0; i < cfg_.nsizes; ++i) {
      if (!run_size(i)) return false;
    }
    return barrier(shared_);
  }

  void close() {
    for (Channel& ch : channels_) {
      if (ch.smr != nullptr) ops_.dereg_mr(ch.send_comm, ch.smr);
      if (ch.rmr != nullptr) ops_.dereg_mr(ch.recv_comm, ch.rmr);
      if (ch.send_comm != nullptr) ops_.close_send(ch.send_comm);
      if (ch.recv_comm != nullptr) ops_.close_recv(ch.recv_comm);
      if (ch.listen_comm != nullptr) ops_.close_listen(ch.listen_comm);
    }
  }

 private:
  bool error(const std::string& what) {
    fail(shared_, "rank " + std::to_string(rank_) + ": " + what);
    return false;
  }

  bool connect() {
    for (int c = 0; c < cfg_.channels; ++c) {
      if (ops_.listen(ops_.ctx, 0, shared_->handle[rank_][c], &channels_[c].listen_comm) !=
          ncclSuccess) {
        return error("listen failed");
      }
    }
    if (!barrier(shared_)) return false;
    auto end = Clock::now() + kExchangeDeadline;
    for (int c = 0; c < cfg_.channels; ++c) {
      Channel& ch = channels_[c];
      char peer[NCCL_NET_HANDLE_MAXSIZE];
      std::memcpy(peer, shared_->handle[1 - rank_][c], sizeof peer);
      while (ch.send_comm == nullptr || ch.recv_comm == nullptr) {
        if (Clock::now() > end) return error("connect/accept did not complete");
        if (ch.send_comm == nullptr &&
            ops_.connect(ops_.ctx, 0, peer, &ch.send_comm, nullptr) != ncclSuccess) {
          return error("connect failed");
        }
        if (ch.recv_comm == nullptr &&
            ops_.accept(ch.listen_comm, &ch.recv_comm, nullptr) != ncclSuccess) {
          return error("accept failed");
        }
      }
      size_t bytes = cfg_.chunk * static_cast<size_t>(cfg_.depth);
      ch.sbuf.assign(bytes, static_cast<unsigned char>(rank_ + 1));
      ch.rbuf.assign(bytes, 0);
      if (ops_.reg_mr(ch.send_comm, ch.sbuf.data(), bytes, NCCL_PTR_HOST, &ch.smr) != ncclSuccess ||
          ops_.reg_mr(ch.recv_comm, ch.rbuf.data(), bytes, NCCL_PTR_HOST, &ch.rmr) != ncclSuccess) {
        return error("regMr failed");
      }
    }
    return barrier(shared_);
  }

  bool run_size(int i) {
    size_t bytes = cfg_.sizes[i];
    if (!barrier(shared_)) return false;
    auto t0 = Clock::now();
    if (!exchange(bytes)) return false;  // warm-up, also sizes the run
    if (cfg_.target_seconds <= 0) return barrier(shared_);
    double warm = seconds_since(t0);
    if (rank_ == 0) {
      double want = cfg_.target_seconds / kBatches / std::max(warm, 1e-7);
      shared_->iters = static_cast<uint32_t>(std::clamp(want, 1.0, double(cfg_.max_iters)));
    }
    if (!barrier(shared_)) return false;
    const uint32_t iters = shared_->iters;
    // The best of a few batches: other work on the machine only ever makes a batch slower.
    for (int batch = 0; batch < kBatches; ++batch) {
      if (!barrier(shared_)) return false;
      t0 = Clock::now();
      for (uint32_t k = 0; k < iters; ++k) {
        if (!exchange(bytes)) return false;
      }
      shared_->seconds[rank_] = seconds_since(t0);
      if (!barrier(shared_)) return false;
      if (rank_ == 0) {
        double t = std::max(shared_->seconds[0], shared_->seconds[1]) / iters;
        if (batch == 0 || t < shared_->per_exchange[i]) shared_->per_exchange[i] = t;
      }
    }
    return true;
  }

  // One message of `bytes` each way, split over the channels, as NCCL's proxy moves it.
  bool exchange(size_t bytes) {
    const int nch = cfg_.channels;
    for (int c = 0; c < nch; ++c) {
      Channel& ch = channels_[c];
      ch.bytes = bytes / nch + (static_cast<size_t>(c) < bytes % nch ? 1 : 0);
      ch.chunks = std::max<uint64_t>(1, (ch.bytes + cfg_.chunk - 1) / cfg_.chunk);
      ch.s_post = ch.s_done = ch.r_post = ch.r_done = 0;
    }
    const uint64_t ex = exchanges_++;
    const int gpu = cfg_.first_gpu + rank_;
    if (cfg_.kernel_clock && gpu >= 0 && gpu < kClockGpus) {
      // A new kernel: it starts once its GPU's previous transfers finished.
      double t = 0;
      if (ops_.latest_completion(gpu, &t) == 0 && t > g_kernel_start[gpu].load()) {
        g_kernel_start[gpu].store(t);
      }
    }
    auto end = Clock::now() + kExchangeDeadline;
    uint64_t passes = 0;
    for (;;) {
      bool all_done = true;
      bool progressed = false;
      for (int c = 0; c < nch; ++c) {
        Channel& ch = channels_[c];
        if (ch.finished()) continue;
        all_done = false;
        int moved = 0;
        if (!step(ch, c, ex, &moved)) return false;
        progressed |= moved > 0;
      }
      if (all_done) return true;
      // An idle pass gives the core away, as NCCL's proxy thread does when idle (the machine
      // may have fewer cores than spinning threads).
      if (!progressed) sched_yield();
      if ((++passes & 1023) == 0 && Clock::now() > end) return error("an exchange timed out");
    }
  }

  // One progress pass over a channel: post what can be posted (receives first), then test the
  // oldest send and the oldest receive.
  bool step(Channel& ch, int c, uint64_t ex, int* moved) {
    const uint64_t depth = static_cast<uint64_t>(cfg_.depth);
    const int peer = 1 - rank_;
    while (ch.r_post < ch.chunks && ch.r_post - ch.r_done < depth) {
      void* data = ch.rbuf.data() + (ch.r_post % depth) * cfg_.chunk;
      size_t size = cfg_.chunk;  // NCCL posts the whole slot
      int tag = peer;
      void* mh = ch.rmr;
      void* req = nullptr;
      if (ops_.irecv(ch.recv_comm, 1, &data, &size, &tag, &mh, nullptr, &req) != ncclSuccess) {
        return error("irecv failed");
      }
      if (req == nullptr) break;  // the plugin asks to retry later
      ch.rreq[ch.r_post % depth] = req;
      ++ch.r_post;
    }
    while (ch.s_post < ch.chunks && ch.s_post - ch.s_done < depth) {
      unsigned char* data = ch.sbuf.data() + (ch.s_post % depth) * cfg_.chunk;
      size_t n = ch.chunk_bytes(ch.s_post, cfg_.chunk);
      // What the GPU would have written into the staging slot.
      fill(data, n, seed_of(ex, c, ch.s_post, rank_), cfg_.verify_all);
      void* req = nullptr;
      if (ops_.isend(ch.send_comm, data, n, rank_, ch.smr, nullptr, &req) != ncclSuccess) {
        return error("isend failed");
      }
      if (req == nullptr) break;
      ch.sreq[ch.s_post % depth] = req;
      ++ch.s_post;
    }
    if (ch.s_done < ch.s_post) {
      int done = 0, size = -1;
      if (ops_.test(ch.sreq[ch.s_done % depth], &done, &size) != ncclSuccess) {
        return error("test(send) failed");
      }
      if (done) {
        if (size != static_cast<int>(ch.chunk_bytes(ch.s_done, cfg_.chunk))) {
          return error("a send completed with a wrong size");
        }
        ++ch.s_done;
        ++*moved;
      }
    }
    if (ch.r_done < ch.r_post) {
      int done = 0, size = -1;
      if (ops_.test(ch.rreq[ch.r_done % depth], &done, &size) != ncclSuccess) {
        return error("test(recv) failed");
      }
      if (done) {
        size_t n = ch.chunk_bytes(ch.r_done, cfg_.chunk);
        if (size != static_cast<int>(n)) {
          return error("a receive completed with " + std::to_string(size) + " bytes, not " +
                       std::to_string(n));
        }
        const unsigned char* data = ch.rbuf.data() + (ch.r_done % depth) * cfg_.chunk;
        if (!matches(data, n, seed_of(ex, c, ch.r_done, peer), cfg_.verify_all)) {
          return error("chunk " + std::to_string(ch.r_done) + " of channel " + std::to_string(c) +
                       " arrived with wrong bytes");
        }
        shared_->verified_bytes[rank_] += cfg_.verify_all ? n : std::min<size_t>(n, 16);
        shared_->messages[rank_]++;
        ++ch.r_done;
        ++*moved;
      }
    }
    return true;
  }

  const NetOps& ops_;
  Shared* shared_;
  const int rank_;
  const RunConfig& cfg_;
  std::vector<Channel> channels_;
  uint64_t exchanges_ = 0;
};

}  // namespace

// The plugin's handshake (the contract with the vgpu driver): the benchmark plays the driver's
// part to hand over a kernel clock, and reads the plugin's table.
vgpu_nccl_plugin_contract_fn g_handshake = nullptr;

void hand_over_clock(double (*clock)(int gpu)) {
  static vgpu_nccl_driver_side d;  // one driver: the plugin knows its driver by this address
  d = vgpu_nccl_driver_side{};  // every slot the benchmark does not play stays null
  d.size = sizeof d;
  d.version = VGPU_NCCL_CONTRACT_VERSION;
  d.gpu_clock = clock;
  vgpu_nccl_plugin_side out{};
  out.size = sizeof out;
  out.version = VGPU_NCCL_CONTRACT_VERSION;
  if (g_handshake != nullptr) g_handshake(VGPU_NCCL_CONTRACT_VERSION, &d, &out);
}

std::string load_plugin(const char* path, int abi, NetOps* out) {
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) return std::string("dlopen: ") + dlerror();
  *out = NetOps{};
  g_handshake = reinterpret_cast<vgpu_nccl_plugin_contract_fn>(dlsym(dl, VGPU_NCCL_PLUGIN_CONTRACT_SYMBOL));
  vgpu_nccl_plugin_side side{};
  side.size = sizeof side;
  side.version = VGPU_NCCL_CONTRACT_VERSION;
  if (g_handshake != nullptr && g_handshake(VGPU_NCCL_CONTRACT_VERSION, nullptr, &side) == 0) {
    out->set_thread_gpu = side.set_thread_gpu;
    out->set_clock = &hand_over_clock;
    out->latest_completion = side.latest_completion;
  }
  if (abi == 11) {
    auto* n = static_cast<ncclNet_v11_t*>(dlsym(dl, "ncclNetPlugin_v11"));
    if (n == nullptr) return "no ncclNetPlugin_v11";
    fill_ops(n, "v11", out);
    return init_table<ncclNet_v11_t, ncclNetCommConfig_v11_t>(n, out);
  }
  if (abi == 12) {
    auto* n = static_cast<ncclNet_v12_t*>(dlsym(dl, "ncclNetPlugin_v12"));
    if (n == nullptr) return "no ncclNetPlugin_v12";
    fill_ops(n, "v12", out);
    return init_table<ncclNet_v12_t, ncclNetCommConfig_v12_t>(n, out);
  }
  return "unknown ABI version " + std::to_string(abi);
}

Shared* map_shared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  return new (p) Shared();
}

bool run_rank(const NetOps& ops, Shared* shared, int rank, const RunConfig& cfg) {
  Rank r(ops, shared, rank, cfg);
  bool ok = r.run();
  r.close();
  return ok;
}

}  // namespace nccl_bench
