// The sim backend's kernel-time database lookup for launches whose by-value struct carries new
// stack garbage every time (issue 23), against a baseline in the same run: the same launches
// looked up by exact signature in SQLite first (lookup_exact, one query per new signature, as
// every lookup did before), then by their family's groups. Both find every launch in the
// group a recording settled; the table gives microseconds per lookup and the ratio. A third row:
// launches of a family whose recording never varied its garbage (one process, so settling kept
// those words keyed), found through their work key (schema 3) after the exact row and the
// groups missed.
//
//   build/bench/driver/kernel_db_lookup_bench [launches]      (default 20000; --quick: 2000)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "front/launch/kernel_time_db.h"
#include "front/launch/signature_settling.h"

using namespace vgpu;

namespace {

struct Args {  // an element count, then entries the host never filled
  uint32_t n, dims, tail[10];
};

LaunchSignature signature_of(const Args& a, uint32_t grid = 64) {
  const ParamSlot slots[] = {{0, 8}, {8, sizeof(Args)}};
  std::vector<uint8_t> params(8 + sizeof(Args));
  const uint64_t out = 0x7f0000001000;
  std::memcpy(params.data(), &out, 8);
  std::memcpy(params.data() + 8, &a, sizeof a);
  LaunchShape shape;
  shape.grid = {grid, 1, 1};
  shape.block = {256, 1, 1};
  return build_launch_signature("elementwise_kernel", shape, slots, params, [out](uint64_t v) { return v == out; });
}

}  // namespace

int main(int argc, char** argv) {
  int n = 20000;
  for (int i = 1; i < argc; ++i) n = std::strcmp(argv[i], "--quick") == 0 ? 2000 : std::atoi(argv[i]);
  if (n < 1) n = 1;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("vgpu_kdb_bench_" + std::to_string(getpid()) + ".sqlite")).string();
  std::filesystem::remove(path);
  std::mt19937 rng(1);
  auto garbage = [&rng](uint32_t size) {
    Args a{};
    a.n = size;
    a.dims = 1;
    for (uint32_t& w : a.tail) w = static_cast<uint32_t>(rng()) | 0x80000000u;
    return a;
  };
  {  // the recording: one settled group, and 2000 other exact rows in the file
    KernelTimeDb db(path, "GPU");
    SettlingSignatures settling(3);
    for (int i = 0; i < 30; ++i) {
      const LaunchSignature s = signature_of(garbage(4096));
      if (!settling.settled(s)) settling.add_sample(s, 8e-6);
    }
    // Another family (grid 128), recorded with the same garbage every time: its words stay keyed.
    const LaunchSignature fixed = signature_of(garbage(4096), 128);
    for (int i = 0; i < 4; ++i)
      if (const auto settled = settling.add_sample(fixed, 8e-6))
        db.record(fixed, static_cast<uint64_t>(*settled * 1e9), KernelTimeDb::Merge::least);
    for (int i = 0; i < 2000; ++i) db.record(signature_of(garbage(100000 + i)), 1000);
    db.record_groups(settling.export_groups());
  }
  std::vector<LaunchSignature> launches, unvaried;
  for (int i = 0; i < n; ++i) launches.push_back(signature_of(garbage(4096)));
  for (int i = 0; i < n; ++i) unvaried.push_back(signature_of(garbage(4096), 128));
  using clock = std::chrono::steady_clock;
  auto per_lookup_us = [&](auto&& look, const std::vector<LaunchSignature>& of = {}) {
    const std::vector<LaunchSignature>& sigs = of.empty() ? launches : of;
    KernelTimeDb db(path, "GPU");
    int found = 0;
    const auto t0 = clock::now();
    for (const LaunchSignature& s : sigs) found += look(db, s);
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / n;
    if (found != n) std::fprintf(stderr, "found %d of %d\n", found, n), std::exit(1);
    return us;
  };
  const double baseline = per_lookup_us([](KernelTimeDb& db, const LaunchSignature& s) {
    return db.lookup_exact(s).has_value() || db.lookup_group(s).has_value();
  });
  const double now = per_lookup_us([](KernelTimeDb& db, const LaunchSignature& s) { return db.lookup(s).has_value(); });
  const double by_work_key = per_lookup_us(
      [](KernelTimeDb& db, const LaunchSignature& s) {
        KernelDbLevel level = KernelDbLevel::none;
        return db.lookup(s, &level).has_value() && level == KernelDbLevel::work_key;
      },
      unvaried);
  std::printf("%d launches with new garbage, each found in its settled group; %d of a family recorded with\n"
              "unvaried garbage, each found by work key\n", n, n);
  std::printf("%-44s %10s %8s\n", "lookup", "us/launch", "ratio");
  std::printf("%-44s %10.3f %8.2f\n", "exact row in SQLite, then groups (baseline)", baseline, 1.0);
  std::printf("%-44s %10.3f %8.3f\n", "lookup(): the family read once", now, now / baseline);
  std::printf("%-44s %10.3f %8.3f\n", "lookup() of unvaried garbage: by work key", by_work_key, by_work_key / baseline);
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return 0;
}
