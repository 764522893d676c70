// The cluster configuration: the embedded default, user files over it, environment overrides and
// precise errors.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "simcore/cluster_config.h"
#include "simcore/gpu_catalog.h"

namespace simcore {
namespace {

// An environment made of a map; nothing of the real environment leaks into the tests.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};
const FakeEnv kNoEnv;

ConfigResult parse(std::string_view text, const FakeEnv& env = kNoEnv) {
  return parse_cluster_config(text, "cluster.toml", env.lookup());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void expect_same_link_collectives(const LinkCollectives& a, const LinkCollectives& b) {
  EXPECT_DOUBLE_EQ(a.ll_max_bytes, b.ll_max_bytes);
  EXPECT_DOUBLE_EQ(a.step_latency_s, b.step_latency_s);
  for (int i = 0; i < kCollectiveKinds; ++i) {
    SCOPED_TRACE(kCollectiveKeys[i]);
    for (const auto* p : {&a.ll, &a.simple}) {
      const ProtocolCosts& q = p == &a.ll ? b.ll : b.simple;
      EXPECT_NEAR(p->op[i].latency_s, q.op[i].latency_s, 1e-12);
      EXPECT_DOUBLE_EQ(p->op[i].link_share, q.op[i].link_share);
      EXPECT_DOUBLE_EQ(p->op[i].fill_bytes, q.op[i].fill_bytes);
    }
  }
}

void expect_same_collectives(const CollectiveSpec& a, const CollectiveSpec& b) {
  expect_same_link_collectives(a.nvlink, b.nvlink);
  expect_same_link_collectives(a.nic, b.nic);
}

void expect_same_cluster(const ClusterSpec& a, const ClusterSpec& b) {
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.gpus_per_node, b.gpus_per_node);
  EXPECT_EQ(a.model.id, b.model.id);
  EXPECT_EQ(a.model.attributes, b.model.attributes);
  EXPECT_EQ(a.memory_bytes, b.memory_bytes);
  EXPECT_EQ(a.nvlink.present, b.nvlink.present);
  EXPECT_EQ(a.nvlink.nvswitch, b.nvlink.nvswitch);
  EXPECT_DOUBLE_EQ(a.nvlink.bw_per_gpu, b.nvlink.bw_per_gpu);
  EXPECT_DOUBLE_EQ(a.nvlink.latency_s, b.nvlink.latency_s);
  EXPECT_DOUBLE_EQ(a.nvlink.efficiency, b.nvlink.efficiency);
  EXPECT_EQ(a.nic.per_node, b.nic.per_node);
  EXPECT_EQ(a.nic.rail_optimized, b.nic.rail_optimized);
  EXPECT_DOUBLE_EQ(a.nic.bw, b.nic.bw);
  EXPECT_DOUBLE_EQ(a.nic.latency_s, b.nic.latency_s);
  EXPECT_DOUBLE_EQ(a.nic.efficiency, b.nic.efficiency);
  EXPECT_EQ(a.fabric.kind, b.fabric.kind);
  EXPECT_EQ(a.fabric.nodes_per_leaf, b.fabric.nodes_per_leaf);
  EXPECT_DOUBLE_EQ(a.fabric.oversubscription, b.fabric.oversubscription);
  EXPECT_DOUBLE_EQ(a.fabric.link_bw, b.fabric.link_bw);
  EXPECT_DOUBLE_EQ(a.pcie.efficiency, b.pcie.efficiency);
  EXPECT_DOUBLE_EQ(a.fabric.latency_s, b.fabric.latency_s);
  expect_same_collectives(a.collectives, b.collectives);
}

TEST(ClusterConfig, DefaultIsOneHgxH100Node) {
  const ClusterSpec c = default_cluster();
  EXPECT_EQ(c.source, "embedded default");
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.total_gpus(), 8);
  EXPECT_EQ(c.model.id, "H100-SXM-80GB");
  EXPECT_EQ(c.model.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(c.memory_bytes, 85'017'493'504u);
  EXPECT_TRUE(c.nvlink.present);
  EXPECT_TRUE(c.nvlink.nvswitch);
  EXPECT_DOUBLE_EQ(c.nvlink.bw_per_gpu, 450e9);
  EXPECT_DOUBLE_EQ(c.nvlink.latency_s, 1e-6);
  EXPECT_EQ(c.nic.per_node, 8);
  EXPECT_TRUE(c.nic.rail_optimized);
  EXPECT_DOUBLE_EQ(c.nic.bw, 50e9);  // 400 Gb/s
  EXPECT_DOUBLE_EQ(c.nic.latency_s, 2e-6);
  EXPECT_EQ(c.fabric.kind, "leaf-spine");
  EXPECT_EQ(c.fabric.nodes_per_leaf, 32);
  EXPECT_DOUBLE_EQ(c.fabric.oversubscription, 1.0);
  EXPECT_DOUBLE_EQ(c.fabric.link_bw, 50e9);
  EXPECT_DOUBLE_EQ(c.fabric.latency_s, 0.5e-6);
}

TEST(ClusterConfig, ShippedDefaultFileParsesToTheDefault) {
  const std::string text = read_file(VGPU_DEFAULT_CLUSTER_TOML);
  ASSERT_FALSE(text.empty());
  const ConfigResult r = parse(text);
  ASSERT_TRUE(r.ok()) << r.error.to_string();
  expect_same_cluster(*r.cluster, default_cluster());
  const ConfigResult from_file = load_cluster_config_file(VGPU_DEFAULT_CLUSTER_TOML, kNoEnv.lookup());
  ASSERT_TRUE(from_file.ok()) << from_file.error.to_string();
  EXPECT_EQ(from_file.cluster->source, VGPU_DEFAULT_CLUSTER_TOML);
  expect_same_cluster(*from_file.cluster, default_cluster());
}

TEST(ClusterConfig, StructDefaultsAgreeWithTheDefaultCluster) {
  const ClusterSpec plain, def = default_cluster();
  EXPECT_EQ(plain.nodes, def.nodes);
  EXPECT_EQ(plain.gpus_per_node, def.gpus_per_node);
  EXPECT_EQ(plain.nvlink.present, def.nvlink.present);
  EXPECT_EQ(plain.nvlink.nvswitch, def.nvlink.nvswitch);
  EXPECT_DOUBLE_EQ(plain.nvlink.latency_s, def.nvlink.latency_s);
  EXPECT_EQ(plain.nic.per_node, def.nic.per_node);
  EXPECT_EQ(plain.nic.rail_optimized, def.nic.rail_optimized);
  EXPECT_DOUBLE_EQ(plain.nic.bw, def.nic.bw);
  EXPECT_DOUBLE_EQ(plain.nic.latency_s, def.nic.latency_s);
  EXPECT_EQ(plain.fabric.kind, def.fabric.kind);
  EXPECT_EQ(plain.fabric.nodes_per_leaf, def.fabric.nodes_per_leaf);
  EXPECT_DOUBLE_EQ(plain.fabric.oversubscription, def.fabric.oversubscription);
  EXPECT_DOUBLE_EQ(plain.fabric.link_bw, def.fabric.link_bw);
  EXPECT_DOUBLE_EQ(plain.fabric.latency_s, def.fabric.latency_s);
  // The fitted collective costs: the embedded file repeats default_collectives().
  expect_same_collectives(plain.collectives, def.collectives);
}


TEST(ClusterConfig, EveryCatalogModelParses) {
  for (const GpuModel& m : gpu_catalog()) {
    const ConfigResult r = parse("[cluster]\ngpu_model = \"" + m.id + "\"\n");
    ASSERT_TRUE(r.ok()) << r.error.to_string();
    EXPECT_EQ(r.cluster->model.id, m.id);
    EXPECT_EQ(r.cluster->memory_bytes, m.memory_bytes) << "capacity follows the model";
    EXPECT_DOUBLE_EQ(r.cluster->nvlink.bw_per_gpu, m.nvlink_bw) << "NVLink follows the model";
  }
  const ConfigResult alias = parse("[cluster]\ngpu_model = \"a100\"\n");
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias.cluster->model.id, "A100-SXM-80GB");
}

TEST(ClusterConfig, FileOverridesTheDefaultKeyByKey) {
  const ConfigResult r = parse(R"(
[cluster]
nodes = 4
gpus_per_node = 4
gpu_model = "B200"
memory = "96 GiB"

[nvlink]
bandwidth = "600GB/s"
latency = "1.5us"
efficiency = 0.8

[nic]
per_node = 2
rail_optimized = false
bandwidth = "800Gbps"
efficiency = 1

[fabric]
nodes_per_leaf = 2
oversubscription = 2
link_bandwidth = "1.6Tb/s"

[pcie]
efficiency = 0.9
)");
  ASSERT_TRUE(r.ok()) << r.error.to_string();
  const ClusterSpec& c = *r.cluster;
  EXPECT_EQ(c.source, "cluster.toml");
  EXPECT_EQ(c.total_gpus(), 16);
  EXPECT_EQ(c.node_of(13), 3);
  EXPECT_EQ(c.local_index(13), 1);
  EXPECT_EQ(c.model.id, "B200");
  EXPECT_EQ(c.memory_bytes, 96ull << 30);
  EXPECT_DOUBLE_EQ(c.nvlink.bw_per_gpu, 600e9);
  EXPECT_DOUBLE_EQ(c.nvlink.latency_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(c.nvlink.efficiency, 0.8);
  EXPECT_DOUBLE_EQ(c.pcie.efficiency, 0.9);
  EXPECT_DOUBLE_EQ(c.nic.efficiency, 1.0);
  EXPECT_TRUE(c.nvlink.nvswitch);  // kept from the default
  EXPECT_EQ(c.nic.per_node, 2);
  EXPECT_FALSE(c.nic.rail_optimized);
  EXPECT_DOUBLE_EQ(c.nic.bw, 100e9);
  EXPECT_DOUBLE_EQ(c.nic.latency_s, 2e-6);  // kept from the default
  EXPECT_EQ(c.fabric.nodes_per_leaf, 2);
  EXPECT_DOUBLE_EQ(c.fabric.oversubscription, 2.0);
  EXPECT_DOUBLE_EQ(c.fabric.link_bw, 200e9);
  // Derived values follow what they derive from.
  const ConfigResult small = parse("[cluster]\ngpus_per_node = 2\n[nic]\nbandwidth = \"200Gb/s\"\n");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small.cluster->nic.per_node, 2);
  EXPECT_DOUBLE_EQ(small.cluster->fabric.link_bw, 25e9);
  const ConfigResult bytes = parse("[cluster]\nmemory = 42949672960\n");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes.cluster->memory_bytes, 40ull << 30);
}

TEST(ClusterConfig, LoadUsesVgpuConfigOrTheDefault) {
  const ConfigResult plain = load_cluster_config(kNoEnv.lookup());
  ASSERT_TRUE(plain.ok());
  expect_same_cluster(*plain.cluster, default_cluster());

  const std::string path = ::testing::TempDir() + "vgpu_cluster_test.toml";
  std::ofstream(path) << "[cluster]\nnodes = 3\n";
  FakeEnv env{{{"VGPU_CONFIG", path}}};
  const ConfigResult r = load_cluster_config(env.lookup());
  ASSERT_TRUE(r.ok()) << r.error.to_string();
  EXPECT_EQ(r.cluster->nodes, 3);
  EXPECT_EQ(r.cluster->source, path);
  env.vars["VGPU_NODES"] = "5";  // the environment beats the file
  EXPECT_EQ(load_cluster_config(env.lookup()).cluster->nodes, 5);
  std::remove(path.c_str());

  const ConfigResult missing = load_cluster_config(env.lookup());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error.file, path);
  EXPECT_EQ(missing.error.to_string(), path + ": no such file");
  EXPECT_EQ(load_cluster_config_file(::testing::TempDir(), kNoEnv.lookup()).error.message, "not a regular file");
}

ClusterSpec with_env(std::map<std::string, std::string> vars, std::string_view file = "") {
  const ConfigResult r = parse(file, FakeEnv{std::move(vars)});
  EXPECT_TRUE(r.ok()) << r.error.to_string();
  return r.ok() ? *r.cluster : ClusterSpec{};
}

ConfigError env_error(std::map<std::string, std::string> vars) {
  const ConfigResult r = parse("", FakeEnv{std::move(vars)});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error.file, "environment");
  EXPECT_EQ(r.error.line, 0);
  return r.error;
}

TEST(ClusterConfig, EnvironmentOverrides) {
  ClusterSpec c = with_env({{"VGPU_NODES", "2"}});
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.total_gpus(), 16);

  c = with_env({{"VGPU_GPUS_PER_NODE", " 4 "}});
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.nic.per_node, 4) << "one NIC per GPU follows the GPU count";

  c = with_env({{"VGPU_DEVICE_COUNT", "4"}});
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.gpus_per_node, 4);
  c = with_env({{"VGPU_DEVICE_COUNT", "16"}, {"VGPU_NODES", "2"}});
  EXPECT_EQ(c.gpus_per_node, 8);
  c = with_env({{"VGPU_DEVICE_COUNT", "16"}, {"VGPU_GPUS_PER_NODE", "4"}});
  EXPECT_EQ(c.nodes, 4);
  c = with_env({{"VGPU_DEVICE_COUNT", "6"}, {"VGPU_NODES", "3"}, {"VGPU_GPUS_PER_NODE", "2"}});
  EXPECT_EQ(c.total_gpus(), 6);
  c = with_env({{"VGPU_DEVICE_COUNT", "2"}}, "[cluster]\nnodes = 4\n");
  EXPECT_EQ(c.nodes, 1) << "VGPU_DEVICE_COUNT alone means one node";

  c = with_env({{"VGPU_GPU_MODEL", "h200"}});
  EXPECT_EQ(c.model.id, "H200-141GB");
  EXPECT_EQ(c.memory_bytes, 150'109'880'320u);
  c = with_env({{"VGPU_GPU_MODEL", "A100"}});
  EXPECT_DOUBLE_EQ(c.nvlink.bw_per_gpu, 300e9);
  c = with_env({{"VGPU_MEMORY", "40GiB"}, {"VGPU_GPU_MODEL", "B200"}});
  EXPECT_EQ(c.memory_bytes, 40ull << 30);
  c = with_env({{"VGPU_GPU_MODEL", "H200"}}, "[cluster]\nmemory = \"80GiB\"\n");
  EXPECT_EQ(c.memory_bytes, 80ull << 30) << "an explicit capacity survives a model override";

  c = with_env({{"VGPU_NODES", ""}, {"VGPU_GPU_MODEL", ""}});  // empty counts as unset
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.model.id, "H100-SXM-80GB");
}

TEST(ClusterConfig, BadEnvironmentNamesTheVariable) {
  EXPECT_EQ(env_error({{"VGPU_NODES", "two"}}).to_string(),
            "environment: VGPU_NODES: expected an integer between 1 and 65536, got \"two\"");
  EXPECT_EQ(env_error({{"VGPU_NODES", "0"}}).message,
            "VGPU_NODES: expected an integer between 1 and 65536, got \"0\"");
  EXPECT_EQ(env_error({{"VGPU_GPUS_PER_NODE", "65"}}).message,
            "VGPU_GPUS_PER_NODE: expected an integer between 1 and 64, got \"65\"");
  EXPECT_EQ(env_error({{"VGPU_DEVICE_COUNT", "8x"}}).message,
            "VGPU_DEVICE_COUNT: expected an integer between 1 and 131072, got \"8x\"");
  EXPECT_EQ(env_error({{"VGPU_DEVICE_COUNT", "128"}}).message,
            "VGPU_DEVICE_COUNT=128 GPUs do not fit in one node (at most 64); set VGPU_NODES or "
            "VGPU_GPUS_PER_NODE too");
  EXPECT_EQ(env_error({{"VGPU_DEVICE_COUNT", "12"}, {"VGPU_NODES", "5"}}).message,
            "VGPU_DEVICE_COUNT=12 cannot be split into VGPU_NODES=5 nodes of at most 64 GPUs each");
  EXPECT_EQ(env_error({{"VGPU_DEVICE_COUNT", "12"}, {"VGPU_GPUS_PER_NODE", "5"}}).message,
            "VGPU_DEVICE_COUNT=12 is not a multiple of VGPU_GPUS_PER_NODE=5");
  EXPECT_EQ(env_error({{"VGPU_DEVICE_COUNT", "12"}, {"VGPU_NODES", "2"}, {"VGPU_GPUS_PER_NODE", "4"}}).message,
            "VGPU_DEVICE_COUNT=12 disagrees with VGPU_NODES=2 x VGPU_GPUS_PER_NODE=4");
  EXPECT_EQ(env_error({{"VGPU_GPU_MODEL", "H300"}}).message,
            "VGPU_GPU_MODEL: unknown GPU model \"H300\"; known models: H100-SXM-80GB, H200-141GB, "
            "A100-SXM-80GB, B200");
  EXPECT_EQ(env_error({{"VGPU_MEMORY", "lots"}}).message,
            "VGPU_MEMORY: expected a capacity like \"80GiB\" (more than 0, at most 4 TiB), got \"lots\"");
  env_error({{"VGPU_MEMORY", "5TiB"}});
  env_error({{"VGPU_MEMORY", "0"}});
}

// Limits (issue 19): a cluster larger than one machine can simulate is refused with the bound in
// the message (4,194,304 GPUs took 25 s and 7 GB at cuInit); near-zero efficiencies and
// bandwidths (infinite transfer times) are refused; the largest allowed cluster loads.
TEST(ClusterConfig, SizesAndRatesAreBoundedWithTheBoundInTheMessage) {
  const ConfigResult huge = parse("", FakeEnv{{{"VGPU_NODES", "65536"}, {"VGPU_GPUS_PER_NODE", "64"}}});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error.message,
            "65536 nodes x 64 GPUs = 4194304 GPUs: more than the 131072 GPUs one machine can "
            "simulate; use fewer nodes or GPUs per node");
  const ConfigResult toml_huge = parse("[cluster]\nnodes = 4096\ngpus_per_node = 64\n");
  ASSERT_FALSE(toml_huge.ok());
  EXPECT_NE(toml_huge.error.message.find("131072"), std::string::npos) << toml_huge.error.message;
  const ConfigResult largest = parse("", FakeEnv{{{"VGPU_NODES", "2048"}, {"VGPU_GPUS_PER_NODE", "64"}}});
  ASSERT_TRUE(largest.ok()) << largest.error.to_string();
  EXPECT_EQ(largest.cluster->total_gpus(), 131072);
  for (const char* text : {"[nvlink]\nefficiency = 1e-300\n", "[nic]\nefficiency = 0.0009\n",
                           "[nic]\nbandwidth = \"1e-300GB/s\"\n", "[nvlink]\nbandwidth = \"999kB/s\"\n"}) {
    const ConfigResult r = parse(text);
    EXPECT_FALSE(r.ok()) << text;
  }
  EXPECT_TRUE(parse("[nic]\nefficiency = 0.001\n").ok());
}

// A 10 MB value in a configuration is not echoed as a 10 MB log line: the line is cut.
TEST(ClusterConfig, AHugeValueIsNotEchoedWhole) {
  const std::string huge(10 << 20, 'x');
  char path[] = "/tmp/vgpu-cluster-log-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  const ConfigResult r = parse("", FakeEnv{{{"VGPU_GPU_MODEL", huge}}});
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ASSERT_FALSE(r.ok());
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  close(fd);
  EXPECT_GT(st.st_size, 0);           // the failure was logged (VGPU_LOG_LEVEL=warn)...
  EXPECT_LT(st.st_size, 8 << 10);     // ...in one cut line, not 10 MB
}

// A bad file: the error names the file, the line and column of the offending text, the key.
void expect_error(std::string_view text, int line, int column, std::string_view message) {
  const ConfigResult r = parse(text);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.error.file, "cluster.toml");
  EXPECT_EQ(r.error.line, line) << r.error.to_string();
  EXPECT_EQ(r.error.column, column) << r.error.to_string();
  EXPECT_EQ(r.error.message, message);
}

TEST(ClusterConfig, BadValuesAreReportedPrecisely) {
  expect_error("[cluster]\nnodes = 2\n\n[nvlink]\npresent = true\nnvswitch = true\nbandwidth = \"fast\"\n", 7, 13,
               "nvlink.bandwidth: expected a bandwidth like \"450GB/s\" or \"400Gb/s\", at least 1MB/s, got \"fast\"");
  EXPECT_EQ(parse("[nvlink]\n  bandwidth = \"fast\"\n").error.to_string(),
            "cluster.toml:2:15: nvlink.bandwidth: expected a bandwidth like \"450GB/s\" or \"400Gb/s\", at least 1MB/s, got \"fast\"");
  expect_error("[cluster]\nnodes = 0\n", 2, 9, "cluster.nodes: expected an integer between 1 and 65536, got 0");
  expect_error("[cluster]\nnodes = \"2\"\n", 2, 9, "cluster.nodes: expected an integer between 1 and 65536, got \"2\"");
  expect_error("[cluster]\ngpus_per_node = 65\n", 2, 17,
               "cluster.gpus_per_node: expected an integer between 1 and 64, got 65");
  expect_error("[cluster]\ngpu_model = \"H300\"\n", 2, 13,
               "cluster.gpu_model: unknown GPU model \"H300\"; known models: H100-SXM-80GB, H200-141GB, "
               "A100-SXM-80GB, B200");
  expect_error("[cluster]\nmemory = \"0GiB\"\n", 2, 10,
               "cluster.memory: expected a capacity like \"80GiB\" (more than 0, at most 4 TiB), got \"0GiB\"");
  expect_error("[cluster]\nmemory = \"5TiB\"\n", 2, 10,
               "cluster.memory: expected a capacity like \"80GiB\" (more than 0, at most 4 TiB), got \"5TiB\"");
  expect_error("[cluster]\nmemory = -1\n", 2, 10,
               "cluster.memory: expected a capacity like \"80GiB\" (more than 0, at most 4 TiB), got -1");
  expect_error("[nvlink]\npresent = \"yes\"\n", 2, 11, "nvlink.present: expected true or false, got \"yes\"");
  expect_error("[nvlink]\nlatency = 1\n", 2, 11, "nvlink.latency: expected a latency like \"1us\" or \"500ns\", got 1");
  expect_error("[nvlink]\nefficiency = 0\n", 2, 14,
               "nvlink.efficiency: expected a fraction from 0.001 to 1, e.g. 0.75, got 0");
  expect_error("[nic]\nefficiency = 1.5\n", 2, 14,
               "nic.efficiency: expected a fraction from 0.001 to 1, e.g. 0.75, got 1.5");
  expect_error("[nic]\nefficiency = \"high\"\n", 2, 14,
               "nic.efficiency: expected a fraction from 0.001 to 1, e.g. 0.75, got \"high\"");
  expect_error("[nic]\nbandwidth = \"400G\"\n", 2, 13,
               "nic.bandwidth: expected a bandwidth like \"450GB/s\" or \"400Gb/s\", at least 1MB/s, got \"400G\"");
  expect_error("[fabric]\nkind = \"torus\"\n", 2, 8,
               "fabric.kind: expected \"leaf-spine\" or \"rail-optimized\", got \"torus\"");
  expect_error("[fabric]\noversubscription = 0.5\n", 2, 20,
               "fabric.oversubscription: expected a ratio between 1 and 1000, e.g. 1.0 or 4, got 0.5");
  expect_error("[nic]\nrail_optimized = false\n[fabric]\nkind = \"rail-optimized\"\n", 4, 8,
               "fabric.kind = \"rail-optimized\" needs nic.rail_optimized = true");
}

TEST(ClusterConfig, UnknownKeysAndTablesAreRejected) {
  expect_error("[cluster]\nnodes = 2\nnode = 3\n", 3, 1,
               "cluster.node: unknown key; keys of [cluster]: nodes, gpus_per_node, gpu_model, memory");
  expect_error("[nic]\n  bandwith = \"400Gb/s\"\n", 2, 3,
               "nic.bandwith: unknown key; keys of [nic]: per_node, rail_optimized, bandwidth, latency, efficiency");
  expect_error("[clustr]\nnodes = 2\n", 1, 2, "unknown table \"clustr\"; known tables: cluster, nvlink, nic, fabric, pcie, collectives");
  expect_error("nodes = 2\n", 1, 1, "unknown key \"nodes\"; known tables: cluster, nvlink, nic, fabric, pcie, collectives");
  expect_error("cluster = 3\n", 1, 11, "cluster: expected a table [cluster], got 3");
  expect_error("[fabric]\nspeed = \"fast\"\n", 2, 1,
               "fabric.speed: unknown key; keys of [fabric]: kind, nodes_per_leaf, oversubscription, "
               "link_bandwidth, latency");
}

TEST(ClusterConfig, MalformedTomlIsReportedWithItsPosition) {
  const ConfigResult r = parse("[cluster]\nnodes = 2\ngpu_model = \"H100\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.file, "cluster.toml");
  EXPECT_EQ(r.error.line, 3);
  EXPECT_GT(r.error.column, 0);
  EXPECT_FALSE(r.error.message.empty());
  const ConfigResult dup = parse("[cluster]\nnodes = 2\nnodes = 3\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error.line, 3);
  EXPECT_TRUE(parse("").ok()) << "an empty file is the default";
}

TEST(ClusterConfig, DescribeSummarizes) {
  const std::string d = describe(default_cluster());
  EXPECT_NE(d.find("1 node x 8 GPUs = 8 x NVIDIA H100 80GB HBM3 (H100-SXM-80GB, sm_90, 132 SMs"), std::string::npos) << d;
  EXPECT_NE(d.find("NVSwitch, 450 GB/s per GPU per direction (75% payload), 1 us latency"), std::string::npos) << d;
  EXPECT_NE(d.find("nic: 8 per node (rail-optimized), 400 Gb/s each"), std::string::npos) << d;
  EXPECT_NE(d.find("fabric: leaf-spine, 32 nodes per leaf"), std::string::npos) << d;
  EXPECT_NE(d.find("source: embedded default"), std::string::npos) << d;
}

TEST(ClusterConfig, CollectiveCostsAreReadAndChecked) {
  const ConfigResult r = parse(
      "[collectives.nvlink]\nll_max = \"1MiB\"\n[collectives.nvlink.simple]\n"
      "all_gather = { latency = \"20us\", link_share = 0.5, fill = \"1MiB\" }\n");
  ASSERT_TRUE(r.cluster) << r.error.to_string();
  const LinkCollectives& nv = r.cluster->collectives.nvlink;
  EXPECT_DOUBLE_EQ(nv.ll_max_bytes, 1024.0 * 1024);
  EXPECT_NEAR(nv.simple.op[1].latency_s, 20e-6, 1e-12);
  EXPECT_DOUBLE_EQ(nv.simple.op[1].link_share, 0.5);
  EXPECT_DOUBLE_EQ(nv.simple.op[1].fill_bytes, 1024.0 * 1024);
  // Keys the file leaves out keep the fitted defaults.
  EXPECT_DOUBLE_EQ(nv.simple.op[0].link_share, default_collectives().nvlink.simple.op[0].link_share);
  expect_error("[collectives.nvlink.simple]\nallreduce = { latency = \"1us\" }\n", 2, 1,
               "collectives.nvlink.simple.allreduce: unknown key; keys of [collectives]: all_reduce, all_gather, "
               "reduce_scatter, broadcast, reduce, send_recv, all_to_all");
  expect_error("[collectives.nvlink.ll]\nall_reduce = { link_share = 1.5 }\n", 2, 29,
               "collectives.nvlink.ll.all_reduce.link_share: expected a fraction from 0.001 to 1, e.g. 0.75, got 1.5");
  expect_error("[collectives.infiniband]\nll_max = \"1MiB\"\n", 1, 14,
               "collectives.infiniband: unknown key; keys of [collectives]: host, nvlink, nic, or a GPU model "
               "(H100-SXM-80GB, H200-141GB, A100-SXM-80GB, B200)");
  expect_error("[collectives.H200-141GB.nvswitch]\nll_max = \"1MiB\"\n", 1, 25,
               "collectives.H200-141GB.nvswitch: unknown key; keys of [collectives]: nvlink, nic");
}

// [collectives.host]: NCCL's host cost of a group (cluster_spec.h, NcclHostCosts), read with its
// units; the embedded default repeats the fitted struct defaults; bad keys and values are named.
TEST(ClusterConfig, NcclHostCostsAreReadAndChecked) {
  const ConfigResult d = parse("");
  ASSERT_TRUE(d.cluster) << d.error.to_string();
  const NcclHostCosts fitted;
  EXPECT_DOUBLE_EQ(d.cluster->collectives.host.group_s, fitted.group_s);
  EXPECT_DOUBLE_EQ(d.cluster->collectives.host.communicator_s, fitted.communicator_s);
  EXPECT_DOUBLE_EQ(d.cluster->collectives.host.all_reduce_communicator_s, fitted.all_reduce_communicator_s);
  EXPECT_DOUBLE_EQ(d.cluster->collectives.host.operation_s, fitted.operation_s);
  EXPECT_TRUE(d.cluster->collectives.host.enabled);
  const ConfigResult r = parse("[collectives.host]\ngroup = \"1us\"\ncommunicator = \"500ns\"\nenabled = false\n");
  ASSERT_TRUE(r.cluster) << r.error.to_string();
  EXPECT_NEAR(r.cluster->collectives.host.group_s, 1e-6, 1e-15);
  EXPECT_NEAR(r.cluster->collectives.host.communicator_s, 0.5e-6, 1e-15);
  EXPECT_DOUBLE_EQ(r.cluster->collectives.host.operation_s, fitted.operation_s);  // left out: the default
  EXPECT_FALSE(r.cluster->collectives.host.enabled);
  expect_error("[collectives.host]\nper_call = \"1us\"\n", 2, 1,
               "collectives.host.per_call: unknown key; keys of [collectives]: group, communicator, "
               "all_reduce_communicator, operation, enabled");
  expect_error("[collectives.host]\ngroup = 3\n", 2, 9,
               "collectives.host.group: expected a latency like \"1us\" or \"500ns\", got 3");
}

// [collectives.<GPU model>...]: the embedded default carries the H200's own fit, which a cluster
// of H200s takes and others do not; a file's own general figures replace it, and a file's own
// model section applies to that model only.
TEST(ClusterConfig, AGpuModelsOwnCollectiveFit) {
  const double h200_fit = 13.78e-6;  // default_cluster.toml, [collectives.H200-141GB.nvlink.simple]
  const double general = default_collectives().nvlink.simple.op[0].latency_s;
  auto all_reduce_latency = [](const ConfigResult& r) { return r.cluster->collectives.nvlink.simple.op[0].latency_s; };
  const ConfigResult h100 = parse("[cluster]\ngpu_model = \"H100-SXM-80GB\"\n");
  const ConfigResult h200 = parse("[cluster]\ngpu_model = \"H200-141GB\"\n");
  ASSERT_TRUE(h100.cluster && h200.cluster);
  EXPECT_DOUBLE_EQ(all_reduce_latency(h100), general);
  EXPECT_NEAR(all_reduce_latency(h200), h200_fit, 1e-12);
  // A file's general figures apply to every model, the H200 too.
  const ConfigResult mine = parse("[cluster]\ngpu_model = \"H200-141GB\"\n[collectives.nvlink.simple]\n"
                                  "all_gather = { latency = \"20us\" }\n");
  ASSERT_TRUE(mine.cluster) << mine.error.to_string();
  EXPECT_DOUBLE_EQ(all_reduce_latency(mine), general);
  EXPECT_NEAR(mine.cluster->collectives.nvlink.simple.op[1].latency_s, 20e-6, 1e-12);
  // A file's model section: for that model only, over the general figures.
  const char* b200_only = "[collectives.B200.nvlink.simple]\nall_reduce = { latency = \"3us\" }\n";
  const ConfigResult b200 = parse(std::string("[cluster]\ngpu_model = \"B200\"\n") + b200_only);
  const ConfigResult h200_too = parse(std::string("[cluster]\ngpu_model = \"H200-141GB\"\n") + b200_only);
  ASSERT_TRUE(b200.cluster && h200_too.cluster) << b200.error.to_string();
  EXPECT_NEAR(all_reduce_latency(b200), 3e-6, 1e-12);
  EXPECT_DOUBLE_EQ(b200.cluster->collectives.nvlink.simple.op[1].latency_s, default_collectives().nvlink.simple.op[1].latency_s);
  EXPECT_NEAR(all_reduce_latency(h200_too), h200_fit, 1e-12);
}

}  // namespace
}  // namespace simcore
