// vgpu-netsim end to end: the built binary on small traces whose answers are worked out by hand.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#ifndef VGPU_NETSIM_PATH
#error "VGPU_NETSIM_PATH must name the built vgpu-netsim"
#endif

namespace {

// 2 nodes x 4 GPUs under one leaf. NVLink 400 GB/s with 1 us latency, all of it payload; NICs
// 400 Gb/s = 50 GB/s with 2 us latency, plus 0.5 us for the leaf hop.
constexpr const char* kConfig = R"(
[cluster]
nodes = 2
gpus_per_node = 4
gpu_model = "H100-SXM-80GB"
[nvlink]
bandwidth = "400GB/s"
latency = "1us"
efficiency = 1.0
[nic]
bandwidth = "400Gb/s"
latency = "2us"
[fabric]
kind = "leaf-spine"
nodes_per_leaf = 2
latency = "0.5us"
)";

struct Result {
  int status = -1;
  std::string out, err;
};

class NetsimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "netsim_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    // Emptied first: a folder of an earlier run whose process had the same pid keeps its files
    // (a named pipe left there failed mkfifo in a CI run).
    std::string mk = "rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'";
    ASSERT_EQ(std::system(mk.c_str()), 0);
    write("cluster.toml", kConfig);
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  Result run(const std::string& args) {
    const std::string cmd = "env -u VGPU_CONFIG -u VGPU_NODES -u VGPU_GPUS_PER_NODE -u VGPU_DEVICE_COUNT "
                            "-u VGPU_GPU_MODEL '" VGPU_NETSIM_PATH "' --config '" + dir_ +
                            "/cluster.toml' " + args + " > '" + dir_ + "/out' 2> '" + dir_ + "/err'";
    Result r;
    const int raw = std::system(cmd.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(dir_ + "/out");
    r.err = slurp(dir_ + "/err");
    return r;
  }

  // id -> (start_us, finish_us), checking that ids come out in input order.
  static std::map<std::string, std::pair<double, double>> parse(const std::string& out,
                                                                std::vector<std::string>* order = nullptr) {
    std::map<std::string, std::pair<double, double>> m;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      m[j.at("id").get<std::string>()] = {j.at("start_us").get<double>(), j.at("finish_us").get<double>()};
      if (order) order->push_back(j.at("id").get<std::string>());
    }
    return m;
  }

  std::string dir_;
};

TEST_F(NetsimCli, HandComputedAnswers) {
  // a: 0->1, 4 MB at 400 GB/s. b: 2->1 shares GPU 1's NVLink down link from time 0: both run
  // at 200 GB/s for 20 us, then 1 us latency. c: 0->4 crosses the NICs: 1 MB at 50 GB/s = 20 us,
  // plus 2 us + 0.5 us. d starts after a (21 us): alone, 4 MB at 400 GB/s = 10 us, +1 us.
  // k: a 7 us task after c and d.
  const std::string trace = write("t.jsonl", R"({"id": "a", "src": 0, "dst": 1, "bytes": 4000000}
{"id": "b", "src": 2, "dst": 1, "bytes": 4000000, "start_us": 0}

# comments and blank lines are skipped
{"id": "c", "src": 0, "dst": 4, "bytes": 1000000}
{"id": "d", "src": 3, "dst": 1, "bytes": 4000000, "after": ["a"]}
{"id": "k", "gpu": 1, "duration_us": 7, "after": ["c", "d"]}
)");
  const Result r = run("'" + trace + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> order;
  auto m = parse(r.out, &order);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c", "d", "k"}));
  EXPECT_NEAR(m["a"].second, 21.0, 1e-6);
  EXPECT_NEAR(m["b"].second, 21.0, 1e-6);
  EXPECT_NEAR(m["c"].second, 22.5, 1e-6);
  EXPECT_NEAR(m["d"].first, 21.0, 1e-6);
  EXPECT_NEAR(m["d"].second, 32.0, 1e-6);
  EXPECT_NEAR(m["k"].first, 32.0, 1e-6);
  EXPECT_NEAR(m["k"].second, 39.0, 1e-6);
}

TEST_F(NetsimCli, FileOrderDoesNotChangeTheAnswer) {
  // The late-arriving line "x" starts in the virtual past of "y" and "z" and slows them down.
  const std::string sorted = write("sorted.jsonl", R"({"id": "x", "src": 0, "dst": 1, "bytes": 4000000}
{"id": "y", "src": 0, "dst": 2, "bytes": 4000000, "start_us": 5}
{"id": "z", "src": 3, "dst": 2, "bytes": 2000000, "start_us": 6, "after": ["y"]}
)");
  const std::string shuffled = write("shuffled.jsonl", R"({"id": "y", "src": 0, "dst": 2, "bytes": 4000000, "start_us": 5}
{"id": "z", "src": 3, "dst": 2, "bytes": 2000000, "start_us": 6, "after": ["y"]}
{"id": "x", "src": 0, "dst": 1, "bytes": 4000000}
)");
  const Result a = run("'" + sorted + "'");
  const Result b = run("--stats '" + shuffled + "'");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  auto ma = parse(a.out), mb = parse(b.out);
  for (const char* id : {"x", "y", "z"}) {
    EXPECT_NEAR(ma[id].first, mb[id].first, 1e-6) << id;
    EXPECT_NEAR(ma[id].second, mb[id].second, 1e-6) << id;
  }
  // x alone for 5 us (2 MB), then x and y share up(0): x's last 2 MB at 200 GB/s -> 15 us, +1.
  // y: 2 MB by 15 us, then 2 MB alone -> 20 us, +1 = 21. z after y: 2 MB -> 26, +1 = 27.
  EXPECT_NEAR(ma["x"].second, 16.0, 1e-6);
  EXPECT_NEAR(ma["y"].second, 21.0, 1e-6);
  EXPECT_NEAR(ma["z"].second, 27.0, 1e-6);
  EXPECT_NE(b.err.find("1 rollbacks"), std::string::npos) << b.err;
}

// A file is read twice and its replay promises floors block by block (1024 lines), reclaiming
// history; standard input is read once and keeps everything. Both must give the same answer, on
// a trace long enough for many promises: back-to-back ring all-reduces over the 8 GPUs, with
// tasks that start at given times and some that wait on much older lines.
std::string long_trace(int& line) {
  std::string text;
  line = 0;
  std::vector<std::string> prev(8), cur(8);
  for (int iter = 0; iter < 110; ++iter) {
    for (int s = 0; s < 14; ++s) {
      for (int i = 0; i < 8; ++i) {
        cur[i] = "r" + std::to_string(iter) + "_" + std::to_string(s) + "_" + std::to_string(i);
        text += "{\"id\": \"" + cur[i] + "\", \"src\": " + std::to_string(i) + ", \"dst\": " +
                std::to_string((i + 1) % 8) + ", \"bytes\": 65536";
        if (!prev[i].empty())
          text += ", \"after\": [\"" + prev[(i + 7) % 8] + "\", \"" + prev[i] + "\"]";
        text += "}\n";
        ++line;
      }
      prev.swap(cur);
      if (s % 5 == 0) {
        // A task at a given time, and one waiting on a line about 3000 lines back.
        text += "{\"id\": " + std::to_string(line) + ", \"gpu\": 3, \"duration_us\": 2, "
                "\"start_us\": " + std::to_string(iter * 60 + s) + "}\n";
        ++line;
        if (iter >= 30) {
          text += "{\"id\": \"late" + std::to_string(line) + "\", \"gpu\": 2, \"duration_us\": 3, "
                  "\"after\": [\"r" + std::to_string(iter - 25) + "_0_2\"]}\n";
          ++line;
        }
      }
    }
  }
  return text;
}

TEST_F(NetsimCli, FloorsFromAFileDoNotChangeTheAnswer) {
  int line = 0;
  const std::string trace = write("long.jsonl", long_trace(line));
  const Result file = run("--stats '" + trace + "'");
  const Result piped = run("- < '" + trace + "'");
  ASSERT_EQ(file.status, 0) << file.err;
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_GT(line, 12 * 1024);
  EXPECT_EQ(file.out, piped.out);
  EXPECT_TRUE(file.err.find("warn") == std::string::npos) << file.err;
  // A pipe named as a file can only be read once: it is read as standard input is.
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(std::system(("mkfifo '" + fifo + "' && (cat '" + trace + "' > '" + fifo + "' &)").c_str()), 0);
  const Result named_pipe = run("'" + fifo + "'");
  ASSERT_EQ(named_pipe.status, 0) << named_pipe.err;
  EXPECT_EQ(named_pipe.out, piped.out);
  // The promises did reclaim history ("N events live at the end", --stats); standard input's run
  // keeps every event. (The tasks waiting on lines 3000 back hold the floor that far back.)
  const Result piped_stats = run("--stats - < '" + trace + "'");
  auto live = [](const std::string& err) {
    const size_t at = err.find(" events live at the end");
    const size_t from = err.rfind(' ', at - 1);
    return at == std::string::npos ? -1.0 : std::stod(err.substr(from + 1, at - from - 1));
  };
  EXPECT_EQ(live(piped_stats.err), line);
  EXPECT_GT(live(file.err), 0);
  EXPECT_LT(live(file.err), 0.6 * line) << file.err;
}

// From a file, the outline says which events no later line names: once final, their lines are
// written and their ids released to the engine as the replay goes ("N events released during the
// replay", --stats), with the same output as standard input's run, which releases nothing. (The
// tasks waiting on lines 3000 back keep that many ids named.)
TEST_F(NetsimCli, AFileReplayReleasesTheIdsNoLaterLineNames) {
  int line = 0;
  const std::string trace = write("long.jsonl", long_trace(line));
  const std::string bin = dir_ + "/long.bin";
  ASSERT_EQ(run("--to-binary '" + bin + "' '" + trace + "'").status, 0);
  const Result file = run("--stats '" + trace + "'");
  const Result piped = run("--stats - < '" + trace + "'");
  const Result bin_file = run("--stats '" + bin + "'");
  const Result bin_piped = run("- < '" + bin + "'");
  ASSERT_EQ(file.status, 0) << file.err;
  ASSERT_EQ(piped.status, 0) << piped.err;
  ASSERT_EQ(bin_file.status, 0) << bin_file.err;
  ASSERT_EQ(bin_piped.status, 0) << bin_piped.err;
  EXPECT_EQ(file.out, piped.out);
  EXPECT_EQ(bin_file.out, bin_piped.out);
  auto released = [](const std::string& err) {
    const size_t at = err.find(" events released during the replay");
    const size_t from = err.rfind(' ', at - 1);
    return at == std::string::npos ? -1.0 : std::stod(err.substr(from + 1, at - from - 1));
  };
  EXPECT_GT(released(file.err), 0.3 * line) << file.err;
  EXPECT_GT(released(bin_file.err), 0.3 * line) << bin_file.err;
  EXPECT_EQ(released(piped.err), 0) << piped.err;
}

// Consecutive flow lines go to the engine in one add_flows() call (a ring step's like flows
// become flow groups, which the max-min solver never sees); --one-by-one submits each line
// alone. The answers are the same to the last digit, from a file (floors promised) and from
// standard input, with tasks and dependencies on old lines between the calls.
TEST_F(NetsimCli, FlowLinesGoToTheEngineTogetherWithTheSameAnswers) {
  int line = 0;
  const std::string trace = write("long.jsonl", long_trace(line));
  const Result together = run("--stats '" + trace + "'");
  const Result alone = run("--stats --one-by-one '" + trace + "'");
  const Result piped = run("--stats - < '" + trace + "'");
  ASSERT_EQ(together.status, 0) << together.err;
  ASSERT_EQ(alone.status, 0) << alone.err;
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_EQ(together.out, alone.out);
  EXPECT_EQ(piped.out, alone.out);
  // "... max-min fillings over N flows": flows the solver gave a rate.
  auto solved = [](const std::string& err) {
    const size_t at = err.find(" flows\n");
    const size_t from = err.rfind(' ', at - 1);
    return at == std::string::npos ? -1.0 : std::stod(err.substr(from + 1, at - from - 1));
  };
  EXPECT_GT(solved(alone.err), 0.5 * line) << alone.err;
  EXPECT_GE(solved(together.err), 0);
  EXPECT_LT(solved(together.err), 0.5 * solved(alone.err)) << together.err;
  EXPECT_GE(solved(piped.err), 0);
  EXPECT_LT(solved(piped.err), 0.5 * solved(alone.err)) << piped.err;
}

// Everything after the id of each output line (start and finish), in order.
std::vector<std::string> times(const std::string& out) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) v.push_back(line.substr(line.find(',')));
  return v;
}

// The binary format (netsim_binary.h), converted from JSON lines by --to-binary, replays to the
// same times, from a file (floors promised) and from standard input; its ids are the indices.
TEST_F(NetsimCli, BinaryTraceGivesTheJsonAnswers) {
  int line = 0;
  const std::string json = write("long.jsonl", long_trace(line));
  const std::string bin = dir_ + "/long.bin";
  const Result conv = run("--to-binary '" + bin + "' '" + json + "'");
  ASSERT_EQ(conv.status, 0) << conv.err;
  const Result from_json = run("'" + json + "'");
  const Result from_file = run("--stats '" + bin + "'");
  const Result piped = run("- < '" + bin + "'");
  ASSERT_EQ(from_json.status, 0) << from_json.err;
  ASSERT_EQ(from_file.status, 0) << from_file.err;
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_EQ(from_file.out, piped.out);
  const auto want = times(from_json.out);
  ASSERT_EQ(want.size(), static_cast<size_t>(line));
  EXPECT_EQ(times(from_file.out), want);
  std::istringstream in(from_file.out);
  std::string first, last;
  std::getline(in, first);
  EXPECT_EQ(nlohmann::json::parse(first).at("id"), 0);
  for (std::string l; std::getline(in, l);) last = l;
  EXPECT_EQ(nlohmann::json::parse(last).at("id"), line - 1);
  // The floors reclaimed history as with JSON lines.
  EXPECT_EQ(from_file.err.find(" " + std::to_string(line) + " events live"), std::string::npos)
      << from_file.err;

  // The hand-computed trace: tasks, start times and dependencies survive the conversion.
  const std::string hand = write("t.jsonl", R"({"id": "a", "src": 0, "dst": 1, "bytes": 4000000}
{"id": "b", "src": 2, "dst": 1, "bytes": 4000000, "start_us": 0}
{"id": "c", "src": 0, "dst": 4, "bytes": 1000000}
{"id": "d", "src": 3, "dst": 1, "bytes": 4000000, "after": ["a"]}
{"id": "k", "gpu": 1, "duration_us": 7, "after": ["c", "d"]}
{"id": "y", "src": 0, "dst": 2, "bytes": 4000000, "start_us": 50}
)");
  ASSERT_EQ(run("--to-binary '" + dir_ + "/t.bin' '" + hand + "'").status, 0);
  const Result r = run("'" + dir_ + "/t.bin'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(times(r.out), times(run("'" + hand + "'").out));
  std::istringstream rin(r.out);
  std::vector<nlohmann::json> rows;
  for (std::string l; std::getline(rin, l);) rows.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_NEAR(rows[4].at("start_us").get<double>(), 32.0, 1e-6);
  EXPECT_NEAR(rows[4].at("finish_us").get<double>(), 39.0, 1e-6);
  EXPECT_NEAR(rows[5].at("start_us").get<double>(), 50.0, 1e-6);

  // Damaged files: cut inside an event, a dependency on a later event, a GPU out of range.
  const std::string whole = slurp(dir_ + "/t.bin");
  const std::string cut = write("cut.bin", whole.substr(0, whole.size() - 3));
  Result e = run("'" + cut + "'");
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find(cut + ":event 6: the file ends inside an event"), std::string::npos) << e.err;
  std::string forward = whole;
  const size_t d_after = 8 + 3 * 40 + 40;  // d's only dependency (a = 0) -> 7
  forward[d_after] = 7;
  e = run("'" + write("forward.bin", forward) + "'");
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find(":event 4: after names event 7"), std::string::npos) << e.err;
  std::string gpu = whole;
  gpu[8 + 8] = 8;  // a's src
  e = run("'" + write("gpu.bin", gpu) + "'");
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find(":event 1: GPU 8 is out of range"), std::string::npos) << e.err;
}

TEST_F(NetsimCli, TimelineFile) {
  const std::string trace = write("t.jsonl", R"({"id": "a", "src": 0, "dst": 5, "bytes": 1000})");
  const Result r = run("--trace-out '" + dir_ + "/tl.json' '" + trace + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto tl = nlohmann::json::parse(slurp(dir_ + "/tl.json"));
  bool found = false;
  for (const auto& e : tl.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("name") == "a") found = true;
  EXPECT_TRUE(found);
}

TEST_F(NetsimCli, ErrorsNameFileAndLine) {
  struct Case {
    const char* text;
    int line;
    const char* words;
  };
  const Case cases[] = {
      {"{\"id\": \"a\", \"src\": 0, \"dst\": 1, \"bytes\": 1}\n{\"id\": \"b\" \"src\": 0}\n", 2, "bad JSON"},
      {"{\"id\": \"a\", \"src\": 0, \"dst\": 1, \"bytes\": 1, \"after\": [\"nope\"]}\n", 1, "nope"},
      {"\n{\"id\": \"a\", \"src\": 0, \"dst\": 8, \"bytes\": 1}\n", 2, "out of range"},
      {"{\"id\": \"a\", \"src\": 0, \"dst\": 1, \"bytes\": -5}\n", 1, "bytes"},
      {"{\"id\": \"a\", \"src\": 0, \"dst\": 1, \"bytes\": 1, \"strat_us\": 3}\n", 1, "unknown key"},
      {"{\"id\": \"a\", \"src\": 0, \"dst\": 1, \"bytes\": 1}\n{\"id\": \"a\", \"src\": 0, \"dst\": 1, \"bytes\": 1}\n", 2, "duplicate"},
      {"[1, 2]\n", 1, "object"},
      {"{\"id\": \"a\", \"src\": 0, \"bytes\": 1}\n", 1, "dst"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path = write("bad" + std::to_string(n++) + ".jsonl", c.text);
    const Result r = run("'" + path + "'");
    EXPECT_EQ(r.status, 2) << c.text;
    EXPECT_NE(r.err.find(path + ":" + std::to_string(c.line) + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.words), std::string::npos) << r.err;
  }
  // Standard input is named as such.
  const Result r = run("- < /dev/null");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "");
  const std::string bad = write("bad.jsonl", "oops\n");
  const Result s = run("- < '" + bad + "'");
  EXPECT_EQ(s.status, 2);
  EXPECT_NE(s.err.find("<stdin>:1: "), std::string::npos) << s.err;
}

TEST_F(NetsimCli, BadConfigAndUsage) {
  write("cluster.toml", "[cluster]\nnodes = \"many\"\n");
  const std::string trace = write("t.jsonl", "");
  const Result r = run("'" + trace + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cluster.toml"), std::string::npos) << r.err;
  write("cluster.toml", kConfig);
  EXPECT_EQ(run("--bogus").status, 2);
  EXPECT_EQ(run("'" + dir_ + "/missing.jsonl'").status, 1);
}

}  // namespace
