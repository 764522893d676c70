// The plugin driven as NCCL 2.28's proxy drives it (bench/nccl_plugin/net_driver.h, shared with
// the benchmark): a 2-rank ring, each message split over several channels and cut into chunks,
// many receives and sends outstanding per channel, receives posted before the sends, tags that
// name the sending rank, only the oldest request of each direction tested per pass. Every byte
// is checked. Run twice by meson: as configured by default (ranks as threads copy straight from
// the sender's buffer, processes go through the shared-memory ring), and with VGPU_NCCL_DIRECT=0
// and VGPU_NCCL_RING_BYTES=16384, so that every pair uses a ring that nearly every message wraps.
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "net_driver.h"
#include "plugin_fixture.h"

using nccl_bench::RunConfig;
using nccl_bench::Shared;

namespace {

// How many receives each rank completes for `cfg`: every channel carries at least one chunk.
uint64_t expected_messages(const RunConfig& cfg) {
  uint64_t n = 0;
  for (int i = 0; i < cfg.nsizes; ++i) {
    for (int c = 0; c < cfg.channels; ++c) {
      size_t part = cfg.sizes[i] / cfg.channels +
                    (static_cast<size_t>(c) < cfg.sizes[i] % cfg.channels ? 1 : 0);
      n += std::max<uint64_t>(1, (part + cfg.chunk - 1) / cfg.chunk);
    }
  }
  return n;
}

uint64_t total_bytes(const RunConfig& cfg) {
  uint64_t n = 0;
  for (int i = 0; i < cfg.nsizes; ++i) n += cfg.sizes[i];
  return n;
}

RunConfig config(std::initializer_list<size_t> sizes, size_t chunk, int depth, int channels) {
  RunConfig cfg;
  for (size_t s : sizes) cfg.sizes[cfg.nsizes++] = s;
  cfg.chunk = chunk;
  cfg.depth = depth;
  cfg.channels = channels;
  cfg.target_seconds = 0;  // untimed: each size once
  cfg.verify_all = true;
  cfg.first_gpu = 2;
  return cfg;
}

nccl_bench::NetOps load(int abi) {
  nccl_bench::NetOps ops;
  std::string err = nccl_bench::load_plugin(VGPU_NCCL_PLUGIN_PATH, abi, &ops);
  EXPECT_EQ(err, "");
  return ops;
}

void expect_clean_run(const Shared& s, const RunConfig& cfg) {
  EXPECT_EQ(s.failed.load(), 0u) << s.error;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(s.messages[r], expected_messages(cfg)) << "rank " << r;
    EXPECT_EQ(s.verified_bytes[r], total_bytes(cfg)) << "rank " << r;
  }
}

void run_as_threads(const nccl_bench::NetOps& ops, const RunConfig& cfg) {
  Shared* shared = nccl_bench::map_shared();
  std::thread peer([&] { nccl_bench::run_rank(ops, shared, 1, cfg); });
  nccl_bench::run_rank(ops, shared, 0, cfg);
  peer.join();
  expect_clean_run(*shared, cfg);
}

}  // namespace

TEST(NcclPattern, RingOfTwoThreadsV11) {
  auto ops = load(11);
  ASSERT_NE(ops.ctx, nullptr);
  RunConfig cfg = config({0, 1, 4093, size_t{512} << 10, (size_t{512} << 10) + 1,
                          (size_t{3} << 20) + 5, (size_t{9} << 20) + 123},
                         size_t{512} << 10, 8, 2);
  run_as_threads(ops, cfg);
}

TEST(NcclPattern, RingOfTwoThreadsV12ManySmallChunks) {
  auto ops = load(12);
  ASSERT_NE(ops.ctx, nullptr);
  // NCCL_NET_MAX_REQUESTS outstanding per direction and channel, odd-sized chunks, 3 channels:
  // hundreds of messages in flight at once on interleaved connections.
  RunConfig cfg = config({100000, 777, 262147}, 4099, 32, 3);
  run_as_threads(ops, cfg);
}

TEST(NcclPattern, RingOfTwoProcesses) {
  auto ops = load(11);
  ASSERT_NE(ops.ctx, nullptr);
  RunConfig cfg = config({1, (size_t{1} << 20) + 7, (size_t{5} << 20) + 3}, size_t{512} << 10, 8,
                         2);
  Shared* shared = nccl_bench::map_shared();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(nccl_bench::run_rank(ops, shared, 1, cfg) ? 0 : 1);
  bool ok = nccl_bench::run_rank(ops, shared, 0, cfg);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(ok);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  expect_clean_run(*shared, cfg);
}
