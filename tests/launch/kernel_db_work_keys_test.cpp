// The kernel-time database's work keys (schema 3, issue 23): a replay process's by-value structs
// carry its own stack garbage in words that the recording's process never varied, so settling
// kept those words keyed and no group covers the replay's launches ("keyed-words" misses, most of
// the 575 / 1,907 signatures a GPT-2 DDP replay missed). Every recorded duration is also kept
// under its signature's work key (signature_work_key: words of 2^24 or more count only as
// "large"), and lookup() falls back to it after the exact row and the groups: the replay finds
// the least duration recorded for the same work, while a different size or shape still misses.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "front/launch/kernel_time_db.h"
#include "front/launch/launch_signature.h"
#include "front/launch/signature_settling.h"
#include "garbage_launch.h"

namespace vgpu {
namespace {

constexpr const char* kModel = "NVIDIA H100 80GB HBM3";

using test_launch::Args;
using test_launch::signature_of;

// One process's launch: size `n`, the rest of the struct this process's own stack garbage
// (the same at every launch of the process, as a frame reused at the same depth leaves it).
Args process_args(uint32_t n, uint32_t process_seed) {
  std::mt19937 rng(process_seed);
  return test_launch::garbage_args(rng, n);
}

std::string temp_db(const char* tag) { return test_launch::temp_db("vgpu_ktw", tag); }

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// The passthrough's side (kernel_recording.cpp record_measured): measure until settled, then the
// exact row at the settled duration and its group.
void record_process(KernelTimeDb& db, uint32_t n, uint32_t process_seed, double seconds, int launches = 8) {
  SettlingSignatures table(3);
  const LaunchSignature s = signature_of(process_args(n, process_seed));
  for (int i = 0; i < launches && !table.settled(s); ++i) {
    const std::optional<double> settled = table.add_sample(s, seconds + (i == 0 ? 20e-6 : 0));
    if (!settled) continue;
    ASSERT_TRUE(db.record(s, static_cast<uint64_t>(*settled * 1e9 + 0.5), KernelTimeDb::Merge::least));
    const std::optional<SettledGroup> g = table.settled_group(s);
    ASSERT_TRUE(g.has_value());
    ASSERT_TRUE(db.record_groups({&*g, 1}));
  }
  ASSERT_TRUE(table.settled(s).has_value());
}

TEST(KernelDbWorkKeys, GarbageTheRecordingNeverVariedIsFoundByWorkKey) {
  const std::string path = temp_db("garbage");
  {
    KernelTimeDb db(path, kModel);
    record_process(db, 4096, 1, 8e-6);
  }
  KernelTimeDb replay(path, kModel);
  const LaunchSignature s = signature_of(process_args(4096, 2));  // another process's garbage
  // What the groups alone answer: nothing, the garbage words are keyed.
  EXPECT_FALSE(replay.lookup_group(s).has_value());
  LaunchSignature keyed;
  EXPECT_EQ(replay.explain_miss(s, &keyed), SettlingSignatures::Uncovered::keyed_words);
  KernelDbLevel level = KernelDbLevel::exact;
  EXPECT_EQ(replay.lookup(s, &level), 8000u);
  EXPECT_EQ(level, KernelDbLevel::work_key);
  EXPECT_EQ(replay.lookup_work_key(s), 8000u);
  EXPECT_EQ(replay.work_key_count(), 1);
  // The recorded launch itself is still its exact row.
  EXPECT_EQ(replay.lookup(signature_of(process_args(4096, 1)), &level), 8000u);
  EXPECT_EQ(level, KernelDbLevel::exact);
  remove_db(path);
}

TEST(KernelDbWorkKeys, AnotherSizeOrShapeIsNotFound) {
  const std::string path = temp_db("shape");
  {
    KernelTimeDb db(path, kModel);
    record_process(db, 4096, 1, 8e-6);
  }
  KernelTimeDb replay(path, kModel);
  KernelDbLevel level = KernelDbLevel::exact;
  EXPECT_FALSE(replay.lookup(signature_of(process_args(2048, 2)), &level).has_value()) << "another size";
  EXPECT_EQ(level, KernelDbLevel::none);
  EXPECT_FALSE(replay.lookup(signature_of(process_args(4096, 2), 128), &level).has_value()) << "another grid";
  EXPECT_FALSE(replay.lookup(signature_of(process_args(4096 + (1u << 20), 2)), &level).has_value());
  // Another kernel with the same parameters.
  Args a = process_args(4096, 2);
  const ParamSlot slots[] = {{0, sizeof(Args)}};
  const LaunchSignature other = build_launch_signature(
      "other_kernel", LaunchShape{{64, 1, 1}, {256, 1, 1}, 0}, slots,
      {reinterpret_cast<const uint8_t*>(&a), sizeof a}, nullptr);
  EXPECT_FALSE(replay.lookup(other).has_value());
  remove_db(path);
}

// The ranks of a recording (and later recordings) each offer their duration for the same work:
// the least is kept, as the passthrough's timeline takes the least of the job's ranks; CUPTI's
// per-launch samples (Merge::mean) count alike.
TEST(KernelDbWorkKeys, TheLeastOverProcessesAndSamplesIsKept) {
  const std::string path = temp_db("least");
  {
    KernelTimeDb rank0(path, kModel);
    KernelTimeDb rank1(path, kModel);
    record_process(rank0, 4096, 1, 9e-6);
    record_process(rank1, 4096, 2, 8e-6);
    ASSERT_TRUE(rank1.record(signature_of(process_args(4096, 3)), 8'500));
  }
  KernelTimeDb replay(path, kModel);
  EXPECT_EQ(replay.lookup(signature_of(process_args(4096, 4))), 8000u);
  EXPECT_EQ(replay.work_key_count(), 1);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT samples, kernel_name FROM work_keys;", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 5) << "two settled rows, their two groups, one CUPTI sample";
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)), "elementwise_kernel");
  sqlite3_finalize(st);
  sqlite3_close(h);
  remove_db(path);
}

// A handle's own records reach its work keys at once (the file's other writers: at the next
// miss, through PRAGMA data_version).
TEST(KernelDbWorkKeys, RecordsOfThisHandleAndOthersAreSeen) {
  const std::string path = temp_db("seen");
  KernelTimeDb db(path, kModel);
  const LaunchSignature replayed = signature_of(process_args(4096, 9));
  EXPECT_FALSE(db.lookup(replayed).has_value());
  ASSERT_TRUE(db.record(signature_of(process_args(4096, 1)), 7'000, KernelTimeDb::Merge::least));
  EXPECT_EQ(db.lookup(replayed), 7000u);
  {
    KernelTimeDb other(path, kModel);
    ASSERT_TRUE(other.record(signature_of(process_args(1024, 1)), 2'000, KernelTimeDb::Merge::least));
  }
  EXPECT_EQ(db.lookup(signature_of(process_args(1024, 9))), 2000u);
  remove_db(path);
}

// A file recorded before work keys (version 2) is read as before, and its rows answer through
// work keys derived in memory; the first writable open adds the table and fills it.
TEST(KernelDbWorkKeys, AVersionTwoFileGetsWorkKeys) {
  const std::string path = temp_db("v2");
  {
    KernelTimeDb db(path, kModel);
    record_process(db, 4096, 1, 8e-6);
  }
  {  // make it the file a version-2 build wrote
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "DROP TABLE work_keys; PRAGMA user_version = 2;", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(h);
  }
  const LaunchSignature replayed = signature_of(process_args(4096, 2));
  {
    KernelTimeDb reader(path, kModel);
    EXPECT_EQ(reader.work_key_count(), 0);
    KernelDbLevel level = KernelDbLevel::none;
    EXPECT_EQ(reader.lookup(replayed, &level), 8000u);
    EXPECT_EQ(level, KernelDbLevel::work_key);
  }
  {
    KernelTimeDb writer(path, kModel);
    ASSERT_TRUE(writer.record(signature_of(process_args(1024, 1)), 2'000, KernelTimeDb::Merge::least));
    EXPECT_EQ(writer.work_key_count(), 2) << "the old rows' key and the new one";
  }
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "PRAGMA user_version;", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 3);
  sqlite3_finalize(st);
  sqlite3_close(h);
  KernelTimeDb reader(path, kModel);
  EXPECT_EQ(reader.lookup(replayed), 8000u);
  EXPECT_EQ(reader.lookup(signature_of(process_args(1024, 2))), 2000u);
  remove_db(path);
}

// Launches whose garbage varied while recording are answered by their group, before the work key.
TEST(KernelDbWorkKeys, GroupsAnswerBeforeWorkKeys) {
  const std::string path = temp_db("order");
  {
    KernelTimeDb db(path, kModel);
    SettlingSignatures table(3);
    std::mt19937 rng(7);
    for (int i = 0; i < 30; ++i) {
      const LaunchSignature s = signature_of(process_args(4096, static_cast<uint32_t>(rng())));
      if (table.settled(s)) continue;
      if (const std::optional<double> settled = table.add_sample(s, 8e-6 + (i == 0 ? 20e-6 : 0))) {
        ASSERT_TRUE(db.record(s, static_cast<uint64_t>(*settled * 1e9 + 0.5), KernelTimeDb::Merge::least));
        const std::optional<SettledGroup> g = table.settled_group(s);
        ASSERT_TRUE(db.record_groups({&*g, 1}));
      }
    }
    // A work key with a smaller duration than the group's: the group still answers first.
    ASSERT_TRUE(db.record(signature_of(process_args(4096, 77)), 1'000, KernelTimeDb::Merge::least));
  }
  KernelTimeDb replay(path, kModel);
  KernelDbLevel level = KernelDbLevel::none;
  EXPECT_EQ(replay.lookup(signature_of(process_args(4096, 12345)), &level), 8000u);
  EXPECT_EQ(level, KernelDbLevel::group);
  EXPECT_EQ(replay.lookup_work_key(signature_of(process_args(4096, 12345))), 1000u);
  remove_db(path);
}

// Lookups through work keys from several threads while the same handle records (TSan in the
// sanitizer builds).
TEST(KernelDbWorkKeys, LookupsAndRecordsFromSeveralThreads) {
  const std::string path = temp_db("threads");
  KernelTimeDb db(path, kModel);
  record_process(db, 4096, 1, 8e-6);
  std::atomic<int> found{0};
  std::vector<std::thread> threads;
  for (uint32_t k = 0; k < 4; ++k)
    threads.emplace_back([&db, &found, k] {
      for (uint32_t i = 0; i < 200; ++i) found += db.lookup(signature_of(process_args(4096, 100 + k * 1000 + i))) == 8000u;
    });
  threads.emplace_back([&db] {
    for (uint32_t i = 0; i < 20; ++i) EXPECT_TRUE(db.record(signature_of(process_args(1024 + i, 1)), 1'000 + i));
  });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(found.load(), 800);
  EXPECT_EQ(db.lookup(signature_of(process_args(1030, 5))), 1006u);
  remove_db(path);
}

// The family level: another size of the same kernel, grid, block and parameter layout finds
// no row, group or work key, but the family's recorded durations (their median); another grid or
// kernel finds nothing. recorded_or_estimated() takes it where the model infers no work (its
// launch floor), and keeps the model's answer where it does (another size is other work).
TEST(KernelDbWorkKeys, TheSameKernelAndShapeAnswersWithItsMedian) {
  const std::string path = temp_db("family");
  {
    KernelTimeDb db(path, kModel);
    record_process(db, 4096, 1, 8e-6);
    record_process(db, 8192, 1, 30e-6);
    record_process(db, 16384, 1, 50e-6);
  }
  KernelTimeDb replay(path, kModel);
  const LaunchSignature s = signature_of(process_args(2048, 2));
  KernelDbLevel level = KernelDbLevel::exact;
  EXPECT_FALSE(replay.lookup(s, &level).has_value());
  // Each recording left an exact row and a group: 8, 8, 30, 30, 50, 50 us; the upper median.
  EXPECT_EQ(replay.lookup_family(s), 30000u);
  EXPECT_FALSE(replay.lookup_family(signature_of(process_args(2048, 2), 128)).has_value()) << "another grid";
  const GpuFigures gpu{3.35e12, 67e12, 495e12, 989e12};
  bool from_db = true;
  EXPECT_DOUBLE_EQ(recorded_or_estimated(replay, gpu, s, &from_db, {}, &level), 30e-6);
  EXPECT_EQ(level, KernelDbLevel::family);
  EXPECT_FALSE(from_db);
  const GpuFigures slow{1e6, 1e6, 0, 0};  // the model infers work above its floor: its answer
  EXPECT_DOUBLE_EQ(recorded_or_estimated(replay, slow, s, &from_db, {}, &level), KernelTimeModel::estimate(slow, s));
  EXPECT_EQ(level, KernelDbLevel::none);
  remove_db(path);
}

// PyTorch's elementwise kernels take (int n, functor f, pointers): the functor is an empty lambda
// whose one byte is whatever the host's stack held there, one value under the passthrough that
// recorded and another under the sim that replays (GeluBackward: 287 launches of a 2-rank DDP job
// fell to the fallback model, 83.9 us against the 40.5 recorded, 2026-11-28). The replay takes
// the row that differs from it only in one-byte parameters; a size that differs still misses.
LaunchSignature elementwise(uint32_t n, uint8_t functor_byte, uint8_t flag = 1) {
  std::vector<uint8_t> params(24, 0);
  std::memcpy(params.data(), &n, 4);
  params[4] = functor_byte;
  params[5] = 0x5a;  // padding the host left: not a parameter's byte
  const uint64_t pointer = 0x7f0000001000;
  std::memcpy(params.data() + 8, &pointer, 8);
  params[16] = flag;
  const ParamSlot slots[] = {{0, 4}, {4, 1}, {8, 8}, {16, 1}};
  const LaunchShape shape{{24576, 1, 1}, {128, 1, 1}, 0};
  return build_launch_signature("vectorized_elementwise_kernel_gelu_backward", shape, slots, params,
                                [](uint64_t v) { return v == 0x7f0000001000; });
}

TEST(KernelDbWorkKeys, AReplayTakesTheRowThatDiffersOnlyInOneByteParameters) {
  const std::string path = temp_db("flags");
  {
    KernelTimeDb db(path, kModel);
    ASSERT_TRUE(db.record(elementwise(3145728, 0xec), 40508));
    ASSERT_TRUE(db.record(elementwise(1048576, 0xec), 14000));
  }
  KernelTimeDb replay(path, kModel);
  const LaunchSignature s = elementwise(3145728, 0x00);
  KernelDbLevel level = KernelDbLevel::exact;
  EXPECT_FALSE(replay.lookup(s, &level).has_value()) << "the functor's byte is keyed: no exact row or group";
  EXPECT_EQ(replay.lookup_flags_aside(s), 40508u);
  EXPECT_EQ(replay.lookup_flags_aside(elementwise(3145728, 0x38, 0)), 40508u) << "a flag too";
  EXPECT_FALSE(replay.lookup_flags_aside(elementwise(2097152, 0x00)).has_value()) << "another size";
  const GpuFigures gpu{3.35e12, 67e12, 495e12, 989e12};
  bool from_db = true;
  EXPECT_DOUBLE_EQ(recorded_or_estimated(replay, gpu, s, &from_db, {}, &level), 40508e-9);
  EXPECT_EQ(level, KernelDbLevel::family);
  // Another size: the model's answer, as before.
  const LaunchSignature other = elementwise(2097152, 0x00);
  EXPECT_DOUBLE_EQ(recorded_or_estimated(replay, gpu, other, &from_db, {}, &level), KernelTimeModel::estimate(gpu, other));
  EXPECT_EQ(level, KernelDbLevel::none);
  // The byte zeroed is the parameter's, not the padding beside it: both give one key.
  EXPECT_EQ(without_flag_bytes(elementwise(3145728, 0xec))->bytes, without_flag_bytes(s)->bytes);
  EXPECT_FALSE(without_flag_bytes(LaunchSignature{"not a signature"}).has_value());
  remove_db(path);
}

// The same functor byte beside a struct whose stack garbage differs at every launch (PyTorch's
// dtype-casting copy of the logits, 411.7 M elements: each rank of a 2-rank DDP replay fell to the
// fallback model's 1,372 us once a step, 2026-11-28, "keyed-words w1=0x1f/0x4d"): the recording
// kept no exact row a replay can match, only its settled group, where the functor's word stayed
// keyed. The replay takes the group with the one-byte parameter's word not compared.
LaunchSignature cast_copy(uint32_t n, uint8_t functor_byte, std::mt19937& garbage) {
  std::vector<uint8_t> params(48, 0);
  std::memcpy(params.data(), &n, 4);
  params[4] = functor_byte;
  for (size_t at = 8; at < params.size(); at += 4) {
    const uint32_t w = static_cast<uint32_t>(garbage()) | 0x80000000u;
    std::memcpy(params.data() + at, &w, 4);
  }
  const ParamSlot slots[] = {{0, 4}, {4, 1}, {8, 40}};
  const LaunchShape shape{{804112, 1, 1}, {128, 1, 1}, 0};
  return build_launch_signature("unrolled_elementwise_kernel_direct_copy", shape, slots, params,
                                [](uint64_t) { return false; });
}

TEST(KernelDbWorkKeys, AReplayTakesTheGroupThatDiffersOnlyInOneByteParameters) {
  const std::string path = temp_db("flag_groups");
  std::mt19937 recording_stack(7);
  {
    KernelTimeDb db(path, kModel);
    SettlingSignatures table(3);
    for (int i = 0; i < 8; ++i) {
      const LaunchSignature s = cast_copy(411705344, 0x4d, recording_stack);
      const std::optional<double> settled = table.add_sample(s, 620e-6 + (i == 0 ? 20e-6 : 0));
      if (!settled) continue;
      ASSERT_TRUE(db.record(s, static_cast<uint64_t>(*settled * 1e9 + 0.5), KernelTimeDb::Merge::least));
      const std::optional<SettledGroup> g = table.settled_group(s);
      ASSERT_TRUE(g.has_value());
      ASSERT_TRUE(db.record_groups({&*g, 1}));
    }
    ASSERT_EQ(db.group_count(), 1);
  }
  KernelTimeDb replay(path, kModel);
  std::mt19937 replay_stack(99);
  const LaunchSignature recorded_byte = cast_copy(411705344, 0x4d, replay_stack);
  const LaunchSignature s = cast_copy(411705344, 0x1f, replay_stack);
  KernelDbLevel level = KernelDbLevel::exact;
  EXPECT_EQ(replay.lookup(recorded_byte, &level), 620000u) << "the group covers the recorded functor byte";
  EXPECT_EQ(level, KernelDbLevel::group);
  EXPECT_FALSE(replay.lookup(s, &level).has_value()) << "the functor's word stayed keyed";
  EXPECT_EQ(replay.lookup_flags_aside(s), 620000u);
  EXPECT_FALSE(replay.lookup_flags_aside(cast_copy(205852672, 0x1f, replay_stack)).has_value()) << "another size";
  const GpuFigures gpu{4.8e12, 67e12, 495e12, 989e12};
  bool from_db = true;
  EXPECT_DOUBLE_EQ(recorded_or_estimated(replay, gpu, s, &from_db, {}, &level), 620e-6);
  EXPECT_EQ(level, KernelDbLevel::family);
  EXPECT_FALSE(from_db);
  remove_db(path);
}

TEST(KernelDbWorkKeys, LevelNames) {
  EXPECT_STREQ(kernel_db_level_name(KernelDbLevel::exact), "exact");
  EXPECT_STREQ(kernel_db_level_name(KernelDbLevel::group), "group");
  EXPECT_STREQ(kernel_db_level_name(KernelDbLevel::work_key), "work-key");
  EXPECT_STREQ(kernel_db_level_name(KernelDbLevel::family), "family");
  EXPECT_STREQ(kernel_db_level_name(KernelDbLevel::none), "fallback");
}

}  // namespace
}  // namespace vgpu
