// The kernel-time database keeps what settling learnt (issue 23): a launch of another process
// whose by-value struct carries other stack garbage than any recorded launch finds the duration
// its group settled at; a launch whose size word differs does not. The recording side is played
// with SettlingSignatures as the passthrough drives it (tests/launch/signature_settling_test.cpp);
// the lookup is the one the sim backend makes (KernelTimeDb::lookup, a fresh handle or process).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <atomic>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "front/launch/kernel_time_db.h"
#include "garbage_launch.h"
#include "front/launch/launch_signature.h"
#include "front/launch/signature_settling.h"

namespace vgpu {
namespace {

constexpr const char* kModel = "NVIDIA H100 80GB HBM3";

using test_launch::Args;
using test_launch::garbage_args;
using test_launch::signature_of;

std::string temp_db(const char* tag) { return test_launch::temp_db("vgpu_ktg", tag); }

// The passthrough's side: measure until settled, then record each settled group as
// launch_api.cpp does (the exact row of the launch that settled it, and its group).
struct Recorder {
  SettlingSignatures table{3};
  KernelTimeDb& db;
  int measured = 0;
  void launch(const LaunchSignature& s, double seconds) {
    if (table.settled(s)) return;
    ++measured;
    const std::optional<double> settled = table.add_sample(s, seconds);
    if (!settled) return;
    ASSERT_TRUE(db.record(s, static_cast<uint64_t>(*settled * 1e9 + 0.5), KernelTimeDb::Merge::least));
    const std::optional<SettledGroup> g = table.settled_group(s);
    ASSERT_TRUE(g.has_value());
    ASSERT_TRUE(db.record_groups({&*g, 1}));
  }
};

// 2 us per 1000 elements; the function's first launch carries 20 us of host latency.
double duration_of(uint32_t n) { return 2e-6 * n / 1000.0; }

void record_garbage_launches(const std::string& path, std::mt19937& rng) {
  KernelTimeDb db(path, kModel);
  Recorder r{.db = db};
  for (int i = 0; i < 30; ++i)
    r.launch(signature_of(garbage_args(rng, 4096)), duration_of(4096) * (1 + 0.01 * (i % 3)) + (i == 0 ? 20e-6 : 0));
  for (int i = 0; i < 30; ++i) r.launch(signature_of(garbage_args(rng, 1024)), duration_of(1024));
  ASSERT_GE(db.group_count(), 2);
}

TEST(KernelDbGroups, NewGarbageFindsTheSettledGroupFromAFreshHandle) {
  const std::string path = temp_db("fresh");
  std::mt19937 rng(23);
  record_garbage_launches(path, rng);
  KernelTimeDb fresh(path, kModel);
  for (int i = 0; i < 50; ++i) {
    const LaunchSignature s = signature_of(garbage_args(rng, 4096));
    EXPECT_FALSE(fresh.lookup_exact(s).has_value()) << "new garbage: no exact row";
    const std::optional<uint64_t> ns = fresh.lookup(s);
    ASSERT_TRUE(ns.has_value()) << "launch " << i;
    EXPECT_NEAR(static_cast<double>(*ns), duration_of(4096) * 1e9, 0.011 * duration_of(4096) * 1e9);
    const std::optional<uint64_t> small = fresh.lookup(signature_of(garbage_args(rng, 1024)));
    ASSERT_TRUE(small.has_value());
    EXPECT_NEAR(static_cast<double>(*small), duration_of(1024) * 1e9, 1.0);
  }
  // The size word keyed while recording (4096 and 1024 took different times): a size never
  // recorded is not found, whatever its garbage.
  EXPECT_FALSE(fresh.lookup(signature_of(garbage_args(rng, 2048))).has_value());
  EXPECT_FALSE(fresh.lookup(signature_of(garbage_args(rng, 8192))).has_value());
  std::filesystem::remove(path);
}

TEST(KernelDbGroups, NewGarbageFindsTheSettledGroupFromAFreshProcess) {
  const std::string path = temp_db("proc");
  std::mt19937 rng(24);
  record_garbage_launches(path, rng);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::mt19937 other(99);
    KernelTimeDb db(path, kModel);
    const std::optional<uint64_t> found = db.lookup(signature_of(garbage_args(other, 4096)));
    const bool ok = found && *found > 7'900 && *found < 8'300 &&
                    !db.lookup(signature_of(garbage_args(other, 3000))).has_value();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::filesystem::remove(path);
}

// A recording too short to settle a group still covers its launches: at its smallest learnable
// sample (not the family's first launch's, which includes the host's launch latency).
TEST(KernelDbGroups, AnUnsettledGroupIsRecordedAtItsSmallestLearnableSample) {
  const std::string path = temp_db("short");
  Args a{};
  a.n = 4096;
  SettlingSignatures t(5);
  EXPECT_FALSE(t.add_sample(signature_of(a), 5e-6).has_value());  // the family's first: teaches nothing
  EXPECT_FALSE(t.add_sample(signature_of(a), 9e-6).has_value());
  EXPECT_FALSE(t.add_sample(signature_of(a), 8e-6).has_value());
  const std::vector<SettledGroup> groups = t.export_groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_FALSE(groups[0].settled);
  EXPECT_DOUBLE_EQ(groups[0].seconds, 8e-6);
  EXPECT_EQ(groups[0].signature, signature_of(a));
  {
    KernelTimeDb db(path, kModel);
    ASSERT_TRUE(db.record_groups(groups));
  }
  KernelTimeDb fresh(path, kModel);
  EXPECT_EQ(fresh.lookup(signature_of(a)), 8000u);
  // A settled record of the same group wins over the unsettled one, even a larger one.
  SettledGroup settled = groups[0];
  settled.settled = true;
  settled.seconds = 8.5e-6;
  ASSERT_TRUE(fresh.record_groups({&settled, 1}));
  EXPECT_EQ(fresh.group_count(), 1);
  KernelTimeDb again(path, kModel);
  EXPECT_EQ(again.lookup(signature_of(a)), 8500u);
  std::filesystem::remove(path);
}

// The exit record of a group (its ranges grown since it settled) merges into the row its settling
// wrote; a record from another process of the same family widens what the family frees.
TEST(KernelDbGroups, RecordsOfOneGroupMerge) {
  const std::string path = temp_db("merge");
  std::mt19937 rng(5);
  KernelTimeDb db(path, kModel);
  Recorder r{.db = db};
  for (int i = 0; i < 30; ++i) r.launch(signature_of(garbage_args(rng, 4096)), duration_of(4096));
  const int64_t rows = db.group_count();
  std::vector<SettledGroup> at_exit = r.table.export_groups();
  ASSERT_TRUE(db.record_groups(at_exit));
  ASSERT_TRUE(db.record_groups(at_exit));
  EXPECT_EQ(db.group_count(), static_cast<int64_t>(at_exit.size()));
  EXPECT_GE(db.group_count(), rows);
  std::filesystem::remove(path);
}

// Why a lookup missed, and the form the list of misses aggregates by: launches that differ only
// in the words the recording freed share it.
TEST(KernelDbGroups, AMissSaysWhyAndDropsTheFreedWords) {
  const std::string path = temp_db("why");
  std::mt19937 rng(8);
  record_garbage_launches(path, rng);
  KernelTimeDb db(path, kModel);
  LaunchSignature a, b;
  EXPECT_EQ(db.explain_miss(signature_of(garbage_args(rng, 2048)), &a), SettlingSignatures::Uncovered::keyed_words);
  EXPECT_EQ(db.explain_miss(signature_of(garbage_args(rng, 2048)), &b), SettlingSignatures::Uncovered::keyed_words);
  EXPECT_EQ(a, b) << "the garbage words are zeroed";
  std::string detail;
  db.explain_miss(signature_of(garbage_args(rng, 2048)), &a, &detail);
  EXPECT_EQ(detail.rfind("w0=0x800/", 0), 0u) << detail << ": n, the only keyed word that differs";
  EXPECT_EQ(detail.find(','), std::string::npos) << detail;
  EXPECT_NE(a, signature_of(garbage_args(rng, 2048)));
  // Another kernel: unknown, listed by its own signature.
  const ParamSlot slots[] = {{0, 4}};
  const uint8_t params[4] = {1, 2, 3, 4};
  const LaunchSignature other = build_launch_signature("other_kernel", LaunchShape{}, slots, params, nullptr);
  LaunchSignature c;
  EXPECT_EQ(db.explain_miss(other, &c), SettlingSignatures::Uncovered::family);
  EXPECT_EQ(c, other);
  std::filesystem::remove(path);
}

// A size freed because 1000 and 1001 elements took the same time covers only what was measured
// (signature_settling.h): a replay of 10^6 elements is not given their time, and says why.
TEST(KernelDbGroups, AFreedSizeOutsideItsRangeIsAMissOfRanges) {
  const std::string path = temp_db("range");
  {
    KernelTimeDb db(path, kModel);
    Recorder r{.db = db};
    for (int i = 0; i < 12; ++i) {
      Args a{};
      a.n = 1000 + (i % 2);
      r.launch(signature_of(a), 3e-6);
    }
    ASSERT_TRUE(db.record_groups(r.table.export_groups()));
  }
  KernelTimeDb fresh(path, kModel);
  Args a{};
  a.n = 1001;
  EXPECT_EQ(fresh.lookup(signature_of(a)), 3000u);
  a.n = 1'000'000;
  EXPECT_FALSE(fresh.lookup(signature_of(a)).has_value());
  LaunchSignature keyed;
  std::string detail;
  EXPECT_EQ(fresh.explain_miss(signature_of(a), &keyed, &detail), SettlingSignatures::Uncovered::ranges);
  EXPECT_EQ(detail.rfind("w0=0xf4240 outside 0x3e8..0x3e", 0), 0u) << detail;
  std::filesystem::remove(path);
}

// The sim backend looks up from many threads while a passthrough in the same process may record
// (thread-safety: run under TSan in CI's sanitizer builds).
TEST(KernelDbGroups, LookupsAndRecordsFromSeveralThreads) {
  const std::string path = temp_db("threads");
  std::mt19937 rng(31);
  record_garbage_launches(path, rng);
  KernelTimeDb db(path, kModel);
  SettlingSignatures t(1);
  Args a{};
  a.n = 512;
  t.add_sample(signature_of(a), 1e-6);
  const std::vector<SettledGroup> more = t.export_groups();
  std::vector<std::thread> threads;
  std::atomic<int> found{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&db, &found, k] {
      std::mt19937 r(100 + k);
      for (int i = 0; i < 200; ++i) {
        found += db.lookup(signature_of(garbage_args(r, 4096))).has_value();
        LaunchSignature keyed;
        db.explain_miss(signature_of(garbage_args(r, 2048)), &keyed);
      }
    });
  }
  threads.emplace_back([&db, &more] {
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(db.record_groups(more));
  });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(found.load(), 800);
  EXPECT_EQ(db.lookup(signature_of(a)), 1000u);
  std::filesystem::remove(path);
}

// Settled durations offered by several ranks (and recordings) keep the least, as the
// passthrough's timeline does across processes; CUPTI's per-launch samples keep their mean.
TEST(KernelDbGroups, SettledExactRowsKeepTheLeast) {
  const std::string path = temp_db("least");
  Args a{};
  a.n = 4096;
  Args b = a;
  b.n = 1024;
  KernelTimeDb db(path, kModel);
  ASSERT_TRUE(db.record(signature_of(a), 9000, KernelTimeDb::Merge::least));
  ASSERT_TRUE(db.record(signature_of(a), 8000, KernelTimeDb::Merge::least));
  ASSERT_TRUE(db.record(signature_of(a), 8500, KernelTimeDb::Merge::least));
  ASSERT_TRUE(db.record(signature_of(b), 1000));
  ASSERT_TRUE(db.record(signature_of(b), 2000));
  KernelTimeDb fresh(path, kModel);
  EXPECT_EQ(fresh.lookup(signature_of(a)), 8000u);
  EXPECT_EQ(fresh.lookup(signature_of(b)), 1500u);
  std::filesystem::remove(path);
}

// A database written before groups existed (schema version 1) is read as before: exact rows
// answer, other launches miss, and recording into it adds the group tables.
TEST(KernelDbGroups, AVersionOneDatabaseStaysReadable) {
  const std::string path = temp_db("v1");
  Args a{};
  a.n = 4096;
  const LaunchSignature sig = signature_of(a);
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h,
                           "CREATE TABLE kernel_times(gpu_model TEXT NOT NULL, signature BLOB NOT NULL,"
                           " kernel_name TEXT NOT NULL, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,"
                           " block_x INTEGER, block_y INTEGER, block_z INTEGER, shared_bytes INTEGER,"
                           " duration_ns INTEGER NOT NULL, samples INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
                           " PRIMARY KEY (gpu_model, signature)); PRAGMA user_version = 1;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(h,
                                 "INSERT INTO kernel_times(gpu_model, signature, kernel_name, duration_ns, samples,"
                                 " updated_at) VALUES(?1, ?2, 'elementwise_kernel', 7777, 1, 0);",
                                 -1, &st, nullptr),
              SQLITE_OK);
    sqlite3_bind_text(st, 1, kModel, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, sig.bytes.data(), static_cast<int>(sig.bytes.size()), SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(h);
  }
  KernelTimeDb db(path, kModel);
  EXPECT_EQ(db.lookup(sig), 7777u);
  Args other = a;
  other.n = 1024;
  EXPECT_FALSE(db.lookup(signature_of(other)).has_value());
  EXPECT_TRUE(db.available());
  EXPECT_EQ(db.group_count(), 0);
  SettlingSignatures t(1);
  t.add_sample(signature_of(other), 2e-6);
  ASSERT_TRUE(db.record_groups(t.export_groups()));
  KernelTimeDb fresh(path, kModel);
  EXPECT_EQ(fresh.lookup(sig), 7777u);
  EXPECT_EQ(fresh.lookup(signature_of(other)), 2000u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vgpu
