// The GPU catalog: lookup, completeness against cuda.h, published figures, and the H100/H200
// tables against what real devices answered (data/*_real_attributes.txt).
#include <cuda.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "simcore/gpu_catalog.h"

namespace simcore {
namespace {

int attr(const GpuModel& m, CUdevice_attribute a) {
  auto it = m.attributes.find(a);
  return it == m.attributes.end() ? -12345 : it->second;
}

TEST(GpuCatalog, FindsModelsByIdAliasAndDriverName) {
  const std::pair<const char*, const char*> cases[] = {
      {"H100-SXM-80GB", "H100-SXM-80GB"}, {"h100", "H100-SXM-80GB"},
      {"H100_SXM5_80GB", "H100-SXM-80GB"}, {"NVIDIA H100 80GB HBM3", "H100-SXM-80GB"},
      {"H200-141GB", "H200-141GB"}, {"H200", "H200-141GB"}, {"nvidia h200", "H200-141GB"},
      {"A100-SXM-80GB", "A100-SXM-80GB"}, {"a100", "A100-SXM-80GB"},
      {"A100-SXM4-80GB", "A100-SXM-80GB"}, {"B200", "B200"}, {"b200-180gb", "B200"},
  };
  for (const auto& [asked, id] : cases) {
    const GpuModel* m = find_gpu_model(asked);
    ASSERT_NE(m, nullptr) << asked;
    EXPECT_EQ(m->id, id) << asked;
  }
  for (const char* unknown : {"", "H300", "H100-PCIE", "NVIDIA"}) EXPECT_EQ(find_gpu_model(unknown), nullptr) << unknown;
  EXPECT_EQ(known_gpu_models(), "H100-SXM-80GB, H200-141GB, A100-SXM-80GB, B200");
  EXPECT_EQ(gpu_catalog().front().id, "H100-SXM-80GB");
}

TEST(GpuCatalog, AttributeListIsEveryValueOfCudaH) {
  const auto list = cu_device_attributes();
  ASSERT_EQ(list.size(), static_cast<size_t>(CU_DEVICE_ATTRIBUTE_MAX - 1));
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i].value, static_cast<int>(i + 1));
    EXPECT_STREQ(cu_device_attribute_name(list[i].value), list[i].name);
    EXPECT_EQ(cu_device_attribute_value(list[i].name), list[i].value);
  }
  EXPECT_STREQ(cu_device_attribute_name(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
               "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK");
  EXPECT_STREQ(cu_device_attribute_name(102), "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
  EXPECT_EQ(cu_device_attribute_value("SHARED_MEMORY_PER_BLOCK"), 8);  // deprecated alias
  EXPECT_EQ(cu_device_attribute_value("CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED"), 102);
  EXPECT_EQ(cu_device_attribute_value("WARP_SIZE"), CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  EXPECT_FALSE(cu_device_attribute_value("NO_SUCH_ATTRIBUTE"));
  EXPECT_FALSE(cu_device_attribute_value("CU_DEVICE_ATTRIBUTE_"));
  EXPECT_EQ(cu_device_attribute_name(0), nullptr);
  EXPECT_EQ(cu_device_attribute_name(CU_DEVICE_ATTRIBUTE_MAX), nullptr);
}

TEST(GpuCatalog, EveryModelAnswersEveryAttribute) {
  for (const GpuModel& m : gpu_catalog()) {
    for (const CuAttribute& a : cu_device_attributes()) {
      if (is_per_device_attribute(a.value))
        EXPECT_FALSE(m.attributes.contains(a.value)) << m.id << " " << a.name << " is per device";
      else
        EXPECT_TRUE(m.attributes.contains(a.value)) << m.id << " has no value for " << a.name;
    }
    EXPECT_EQ(m.attributes.size(), cu_device_attributes().size() - 5) << m.id << ": stray entries";
    // The struct's figures and the attribute table tell the same story.
    EXPECT_EQ(attr(m, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), m.cc_major) << m.id;
    EXPECT_EQ(attr(m, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), m.cc_minor) << m.id;
    EXPECT_EQ(attr(m, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), m.sm_count) << m.id;
    EXPECT_GT(m.memory_bytes, 79ull << 30) << m.id;  // "80GB" parts report ~79.2 GiB
    EXPECT_GT(m.memory_bw, 0);
    EXPECT_GT(m.bf16_tensor_flops, m.fp32_flops);
    EXPECT_GT(m.pcie_bw, 0);
  }
}

// Published figures: data sheets, the CUDA programming guide's compute-capability table,
// deviceQuery of real parts.
struct Published {
  const char* id;
  const char* name;
  int cc_major, cc_minor, sms;
  uint64_t memory;
  int smem_per_sm, smem_optin, l2, bus_bits;
  double nvlink_bw;
  int nvlink_links;
  double hbm_bw;
};
constexpr Published kPublished[] = {
    {"H100-SXM-80GB", "NVIDIA H100 80GB HBM3", 9, 0, 132, 85'017'493'504, 233472, 232448, 52428800, 5120, 450e9, 18, 3.35e12},
    {"H200-141GB", "NVIDIA H200", 9, 0, 132, 150'109'880'320, 233472, 232448, 62914560, 6016, 450e9, 18, 4.8e12},
    {"A100-SXM-80GB", "NVIDIA A100-SXM4-80GB", 8, 0, 108, 85'100'068'864, 167936, 166912, 41943040, 5120, 300e9, 12, 2.039e12},
    {"B200", "NVIDIA B200", 10, 0, 148, 191'502'483'456, 233472, 232448, 132644864, 8192, 900e9, 18, 8e12},
};

TEST(GpuCatalog, PublishedFiguresPerModel) {
  for (const Published& p : kPublished) {
    const GpuModel* m = find_gpu_model(p.id);
    ASSERT_NE(m, nullptr) << p.id;
    SCOPED_TRACE(p.id);
    EXPECT_EQ(m->name, p.name);
    EXPECT_EQ(m->cc_major, p.cc_major);
    EXPECT_EQ(m->cc_minor, p.cc_minor);
    EXPECT_EQ(m->sm_count, p.sms);
    EXPECT_EQ(m->memory_bytes, p.memory);
    EXPECT_DOUBLE_EQ(m->nvlink_bw, p.nvlink_bw);
    EXPECT_EQ(m->nvlink_links, p.nvlink_links);
    EXPECT_DOUBLE_EQ(m->memory_bw, p.hbm_bw);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR), p.smem_per_sm);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), p.smem_optin);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), p.l2);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH), p.bus_bits);
    // Alike on all four: CC 8.0, 9.0 and 10.0 share these limits.
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_WARP_SIZE), 32);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR), 2048);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR), 32);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR), 65536);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK), 65536);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK), 49152);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY), 65536);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING), 1);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY), 1);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), 1);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED), 1);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS), 1);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_ECC_ENABLED), 1);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_INTEGRATED), 0);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH), p.cc_major >= 9 ? 1 : 0);
    EXPECT_EQ(attr(*m, CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID) & 0xFFFF, 0x10DE);  // NVIDIA's vendor id
  }
}

// A device's recorded answers: "# name ...", "# total_mem N", "CU_DEVICE_ATTRIBUTE_X value".
struct Recorded {
  std::string name;
  uint64_t total_mem = 0;
  std::vector<std::pair<std::string, int>> attributes;
};

Recorded read_recorded(const std::string& path) {
  Recorded r;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# name ", 0) == 0) r.name = line.substr(7);
    else if (line.rfind("# total_mem ", 0) == 0) r.total_mem = std::stoull(line.substr(12));
    else if (!line.empty() && line[0] != '#') {
      std::istringstream fields(line);
      std::string attribute;
      int value = 0;
      if (fields >> attribute >> value) r.attributes.emplace_back(attribute, value);
    }
  }
  return r;
}

void expect_matches_real_device(const std::string& file, const char* model_id) {
  SCOPED_TRACE(file);
  const Recorded real = read_recorded(std::string(VGPU_CLUSTER_TEST_DATA) + "/" + file);
  const GpuModel* m = find_gpu_model(model_id);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(find_gpu_model(real.name), m) << "the recorded device is a " << real.name;
  EXPECT_EQ(real.total_mem, m->memory_bytes);
  EXPECT_EQ(real.attributes.size(), cu_device_attributes().size());
  size_t compared = 0;
  for (const auto& [name, value] : real.attributes) {
    const auto id = cu_device_attribute_value(name);
    ASSERT_TRUE(id) << name << " is not in cuda.h";
    if (is_per_device_attribute(*id)) continue;
    EXPECT_EQ(attr(*m, static_cast<CUdevice_attribute>(*id)), value) << name;
    ++compared;
  }
  EXPECT_EQ(compared, cu_device_attributes().size() - 5);
}

TEST(GpuCatalog, H100TableMatchesARealH100) { expect_matches_real_device("h100_real_attributes.txt", "H100-SXM-80GB"); }
TEST(GpuCatalog, H200TableMatchesARealH200) { expect_matches_real_device("h200_real_attributes.txt", "H200-141GB"); }

}  // namespace
}  // namespace simcore
