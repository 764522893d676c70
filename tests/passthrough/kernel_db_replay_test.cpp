// Record once, simulate (issue 23): launches whose by-value struct carries different stack garbage
// every time, recorded into the kernel-time database by the passthrough (over the stand-in GPU,
// the sim backend's library), are found by a later process on the sim backend although their
// garbage differs again: they take the duration recorded for their settling group and are not
// listed among the misses; a launch whose size field differs is listed. A recording whose
// garbage never varied (one process, one stack) keeps those words keyed in its groups: the
// replay's launches then find the duration under their work key (kernel_time_db.h, schema 3).
//
// One executable plays three processes: the test (parent), and children started with
// VGPU_REPLAY_CHILD=record (on the passthrough) or =replay (LD_LIBRARY_PATH = the sim's folder,
// which precedes the executable's RUNPATH).
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>
#include "on_passthrough.h"

namespace {

struct GemmArgs {  // struct_kernel.cu
  int m, n, k;
  uint32_t tail[13];
};

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

// ---- the children ---------------------------------------------------------------------------

// Launches struct_gemm `count` times with sizes `dim` and fresh garbage (seeded by `seed`; with
// `fixed`, the same garbage at every launch), then twice more and once between two events; prints
// the virtual duration of that last launch.
void launches(int dim, int count, unsigned seed, bool fixed = false) {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction f = nullptr;
  CUdeviceptr c = 0;
  CUevent a = nullptr, b = nullptr;
  OK(cuInit(0));
  OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  OK(cuCtxSetCurrent(ctx));
  std::ifstream in(STRUCT_KERNEL_FATBIN, std::ios::binary);
  const std::vector<char> image{std::istreambuf_iterator<char>(in), {}};
  ASSERT_FALSE(image.empty());
  OK(cuModuleLoadData(&module, image.data()));
  OK(cuModuleGetFunction(&f, module, "struct_gemm"));
  OK(cuMemAlloc(&c, 16 << 20));
  OK(cuEventCreate(&a, CU_EVENT_DEFAULT));
  OK(cuEventCreate(&b, CU_EVENT_DEFAULT));
  std::mt19937 rng(seed);
  auto launch = [&] {
    if (fixed) rng.seed(seed);
    GemmArgs args{dim, dim, dim, {}};
    for (uint32_t& w : args.tail) w = static_cast<uint32_t>(rng()) | 0x80000000u;
    void* params[] = {&args, &c};
    const char* grid = std::getenv("VGPU_REPLAY_GRID");  // another shape of the same work
    return cuLaunchKernel(f, grid ? std::atoi(grid) : 8, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr);
  };
  for (int i = 0; i < count; ++i) {
    OK(launch());
    OK(cuCtxSynchronize());
  }
  // The stream is kept busy behind two more launches, so that the timed one starts at its
  // predecessor's end: on an idle stream it would start after this thread's host time for the
  // launch (its lookups), which a TSan build on a loaded machine stretched to 72 us (2026-11-28).
  OK(launch());
  OK(launch());
  OK(cuEventRecord(a, nullptr));
  OK(launch());
  OK(cuEventRecord(b, nullptr));
  OK(cuEventSynchronize(b));
  float ms = -1;
  OK(cuEventElapsedTime(&ms, a, b));
  std::printf("elapsed_ms=%.6f\n", ms);
  cuEventDestroy(a);
  cuEventDestroy(b);
  cuMemFree(c);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(0);
}

TEST(ReplayChild, Run) {
  const char* mode = std::getenv("VGPU_REPLAY_CHILD");
  if (mode == nullptr) GTEST_SKIP() << "started by the test below";
  const std::string m = mode;
  const int dim = std::atoi(std::getenv("VGPU_REPLAY_DIM"));
  if (m == "record" || m == "record-fixed") {
    ASSERT_TRUE(running_on_passthrough());
    launches(dim, 16, 21 + static_cast<unsigned>(dim), m == "record-fixed");
  } else {
    ASSERT_FALSE(running_on_passthrough()) << "the replay runs on the sim backend";
    launches(dim, 8, 1000 + static_cast<unsigned>(dim));  // other garbage than recorded
  }
}

// ---- the test -------------------------------------------------------------------------------

std::string temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("vgpu_replay_" + name + "_" + std::to_string(::getpid())))
      .string();
}

// Starts this executable's child test with `vars`; finish() returns its output (and its exit
// status in *rc).
FILE* start_child(const std::string& vars) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "env " + vars + " " + self + " --gtest_filter=ReplayChild.Run 2>&1";
  return ::popen(cmd.c_str(), "r");
}

std::string finish(FILE* p, int* rc) {
  std::string out;
  *rc = -1;
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string run_child(const std::string& vars, int* rc) { return finish(start_child(vars), rc); }

double elapsed_ms(const std::string& out) {
  const size_t at = out.rfind("elapsed_ms=");
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + 11);
}

// The lines that list missed signatures (not the "#answered" count of each level).
int listed_lines(const std::string& listed) {
  int n = 0;
  std::istringstream in(listed);
  for (std::string line; std::getline(in, line);) n += !line.empty() && line[0] != '#';
  return n;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Sets every struct_gemm group's duration to `ns`: the replay's duration can then only come
// from the groups (the stand-in GPU's own durations are the sim's, which the sim would
// estimate alike).
void mark_groups(const std::string& db, int64_t ns, const char* table = "settled_groups") {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  const std::string sql = std::string("UPDATE ") + table + " SET duration_ns = " + std::to_string(ns) +
                          " WHERE kernel_name = 'struct_gemm';";
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_GT(sqlite3_changes(h), 0) << "no group of struct_gemm was recorded";
  sqlite3_close(h);
}

// The number of `table`'s rows of struct_gemm in the database file `path` (-1: no such table).
int struct_gemm_rows(const std::string& path, const char* table) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(path.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return -1;
  }
  const std::string sql = std::string("SELECT COUNT(*) FROM ") + table + " WHERE kernel_name = 'struct_gemm';";
  sqlite3_stmt* st = nullptr;
  int n = -1;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

// The passthrough keeps its database handle until the process exits, never closing it; at exit
// its records go from the write-ahead log into the file itself, so that a copy of the file
// alone (a user's `cp` of a recording) holds them. (It lacked them: 64 rows of a GPT-2 recording that holds ~99.)
TEST(KernelDbReplay, ACopyOfTheFileAloneHoldsTheRecording) {
  const std::string db = temp("ckpt.sqlite"), copy = temp("ckpt_copy.sqlite");
  for (const std::string& f : {db, db + "-wal", db + "-shm", copy}) std::filesystem::remove(f);
  int rc = -1;
  const std::string out =
      run_child("-u LD_LIBRARY_PATH VGPU_REPLAY_CHILD=record VGPU_REPLAY_DIM=4096 VGPU_KERNEL_DB=" + db, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::filesystem::copy_file(db, copy);  // the file alone, as `cp` copies it
  EXPECT_GT(struct_gemm_rows(copy, "kernel_times"), 0) << "the exact rows stayed in the write-ahead log";
  EXPECT_GT(struct_gemm_rows(copy, "settled_groups"), 0) << "the groups stayed in the write-ahead log";
  for (const std::string& f : {db, db + "-wal", db + "-shm", copy}) std::filesystem::remove(f);
}

TEST(KernelDbReplay, GarbageRecordedOnThePassthroughIsFoundOnTheSim) {
  const std::string db = temp("db.sqlite"), misses = temp("misses.tsv");
  std::filesystem::remove(db);
  int rc = -1;
  // Record: 4096 and 1024 (a size that takes another time, so the size words keep keying), by
  // two processes at once into one file, as the ranks of a job do.
  std::vector<FILE*> recorders;
  for (const char* dim : {"4096", "1024"})
    recorders.push_back(start_child("-u LD_LIBRARY_PATH VGPU_REPLAY_CHILD=record VGPU_REPLAY_DIM=" +
                                    std::string(dim) + " VGPU_KERNEL_DB=" + db));
  for (FILE* p : recorders) {
    const std::string out = finish(p, &rc);
    ASSERT_EQ(rc, 0) << out;
  }
  constexpr int64_t kMarkNs = 777'000;
  mark_groups(db, kMarkNs);
  const std::string sim = std::string("LD_LIBRARY_PATH=") + SIM_LIBCUDA_DIR + " VGPU_REPLAY_CHILD=replay" +
                          " VGPU_KERNEL_DB=" + db + " VGPU_KERNEL_DB_MISSES=" + misses + " VGPU_REPLAY_DIM=";

  // Replay with new garbage: every launch finds its group.
  std::filesystem::remove(misses);
  std::string out = run_child(sim + "4096", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(read_all(misses).find("struct_gemm"), std::string::npos)
      << "launches with new garbage were not found:\n" << read_all(misses);
  EXPECT_NE(read_all(misses).find("#answered\texact=0\tgroup=11\t"), std::string::npos) << read_all(misses);
  const double ms = elapsed_ms(out);
  EXPECT_NEAR(ms, kMarkNs * 1e-6, 0.02) << out;

  // A size never recorded: listed as a miss, with its launches.
  std::filesystem::remove(misses);
  out = run_child(sim + "2048", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string listed = read_all(misses);
  EXPECT_NE(listed.find("struct_gemm"), std::string::npos) << "size 2048 was recorded nowhere";
  // Its 11 launches differ only in garbage the recording freed: one line, and the cause says
  // the kernel is known with other sizes.
  EXPECT_EQ(listed_lines(listed), 1) << listed;
  EXPECT_NE(listed.find("\tfallback=11\n"), std::string::npos) << listed;
  EXPECT_EQ(listed.rfind("11\t", 0), 0u) << listed;
  // ... and names the words it differs in from the nearest recorded group: k (word 2), and m
  // and n (words 0, 1) unless their 8 bytes read as a host address and were left out (under
  // ASan, whose shadow memory maps the range of 0x0000080000000800).
  EXPECT_NE(listed.find("\tkeyed-words w"), std::string::npos) << listed;
  EXPECT_NE(listed.find("w2=0x800/"), std::string::npos) << listed;
  std::printf("replayed 4096 with new garbage: %.4f ms (group marked %.4f ms), no miss; 2048: %s...\n", ms,
              kMarkNs * 1e-6, listed.substr(0, 40).c_str());
  std::filesystem::remove(db);
  std::filesystem::remove(db + "-wal");
  std::filesystem::remove(db + "-shm");
  std::filesystem::remove(misses);
}

}  // namespace

namespace {

TEST(KernelDbReplay, GarbageTheRecordingNeverVariedIsFoundByWorkKey) {
  const std::string db = temp("fixed.sqlite"), misses = temp("fixed_misses.tsv");
  std::filesystem::remove(db);
  int rc = -1;
  std::string out = run_child("-u LD_LIBRARY_PATH VGPU_REPLAY_CHILD=record-fixed VGPU_REPLAY_DIM=4096 VGPU_KERNEL_DB=" + db,
                              &rc);
  ASSERT_EQ(rc, 0) << out;
  // Only the work key can give this duration: the groups keep the recording's garbage keyed.
  constexpr int64_t kMarkNs = 555'000;
  mark_groups(db, kMarkNs, "work_keys");
  const std::string sim = std::string("LD_LIBRARY_PATH=") + SIM_LIBCUDA_DIR + " VGPU_REPLAY_CHILD=replay" +
                          " VGPU_KERNEL_DB=" + db + " VGPU_KERNEL_DB_MISSES=" + misses + " VGPU_REPLAY_DIM=";
  std::filesystem::remove(misses);
  out = run_child(sim + "4096", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string listed = read_all(misses);
  EXPECT_EQ(listed.find("struct_gemm"), std::string::npos) << "not found by work key:\n" << listed;
  EXPECT_NE(listed.find("#answered\texact=0\tgroup=0\twork-key=11\tfamily=0\tfallback=0\n"), std::string::npos) << listed;
  const double ms = elapsed_ms(out);
  EXPECT_NEAR(ms, kMarkNs * 1e-6, 0.02) << out;
  // Another size has another work key: listed, timed by the model.
  std::filesystem::remove(misses);
  out = run_child(sim + "2048", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(read_all(misses).find("struct_gemm"), std::string::npos) << read_all(misses);
  EXPECT_NE(read_all(misses).find("\twork-key=0\tfamily=0\tfallback=11\n"), std::string::npos) << read_all(misses);
  const double other_size_ms = elapsed_ms(out);
  // So has another grid: a kernel shape never recorded.
  std::filesystem::remove(misses);
  out = run_child("VGPU_REPLAY_GRID=16 " + sim + "4096", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(read_all(misses).find("\tnew-kernel"), std::string::npos) << read_all(misses);
  EXPECT_NE(read_all(misses).find("\twork-key=0\tfamily=0\tfallback=11\n"), std::string::npos) << read_all(misses);
  std::printf("fixed garbage recorded, replayed with other garbage: %.4f ms (work key marked %.4f ms); "
              "2048: %.4f ms (the model's)\n", ms, kMarkNs * 1e-6, other_size_ms);
  for (const std::string& f : {db, db + "-wal", db + "-shm", misses}) std::filesystem::remove(f);
}

}  // namespace
