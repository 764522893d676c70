// The GPU catalog. Figures and sources:
//  - cuDeviceGetAttribute answers of H100 and H200 were measured on real parts (SXM, driver
//    580.159.04, CUDA 13.0) with tests/cluster/probe_attributes.cpp; the raw output is kept in
//    tests/cluster/data/{h100,h200}_real_attributes.txt and the tests compare the tables to it.
//  - A100 and B200 were not measured: their model-specific rows come from published deviceQuery
//    / cudaDeviceProp dumps, NVIDIA data sheets, the CUDA programming guide's compute-capability
//    table and the PCI ids of NVIDIA's open kernel module README; each row says where it came
//    from, and rows that are estimates say so.
//  - Rates (bandwidth, FLOP/s) are NVIDIA data-sheet peaks, dense (sparsity halved).
#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <utility>
#include <vector>

#include "cu_attribute_ids.h"
#include "simcore/gpu_catalog.h"

namespace simcore {
namespace {

#define A(x) cu_attr::CU_DEVICE_ATTRIBUTE_##x
using Row = std::pair<int, int>;  // CUdevice_attribute value, answer

// What every catalog model answers alike: the H100 measurement without its model-specific rows
// (listed per model below) and without the per-device ones (PCI location, board group, host NUMA
// node), which the driver answers per virtual device. Capability flags are those of a datacenter
// part on an x86 host with the open kernel modules.
constexpr Row kDatacenterBaseline[] = {
    {A(MAX_THREADS_PER_BLOCK),                             1024},
    {A(MAX_BLOCK_DIM_X),                                   1024},
    {A(MAX_BLOCK_DIM_Y),                                   1024},
    {A(MAX_BLOCK_DIM_Z),                                   64},
    {A(MAX_GRID_DIM_X),                                    2147483647},
    {A(MAX_GRID_DIM_Y),                                    65535},
    {A(MAX_GRID_DIM_Z),                                    65535},
    {A(MAX_SHARED_MEMORY_PER_BLOCK),                       49152},
    {A(TOTAL_CONSTANT_MEMORY),                             65536},
    {A(WARP_SIZE),                                         32},
    {A(MAX_PITCH),                                         2147483647},
    {A(MAX_REGISTERS_PER_BLOCK),                           65536},
    {A(TEXTURE_ALIGNMENT),                                 512},
    {A(GPU_OVERLAP),                                       1},
    {A(KERNEL_EXEC_TIMEOUT),                               0},
    {A(INTEGRATED),                                        0},
    {A(CAN_MAP_HOST_MEMORY),                               1},
    {A(COMPUTE_MODE),                                      0},
    {A(MAXIMUM_TEXTURE1D_WIDTH),                           131072},
    {A(MAXIMUM_TEXTURE2D_WIDTH),                           131072},
    {A(MAXIMUM_TEXTURE2D_HEIGHT),                          65536},
    {A(MAXIMUM_TEXTURE3D_WIDTH),                           16384},
    {A(MAXIMUM_TEXTURE3D_HEIGHT),                          16384},
    {A(MAXIMUM_TEXTURE3D_DEPTH),                           16384},
    {A(MAXIMUM_TEXTURE2D_LAYERED_WIDTH),                   32768},
    {A(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT),                  32768},
    {A(MAXIMUM_TEXTURE2D_LAYERED_LAYERS),                  2048},
    {A(SURFACE_ALIGNMENT),                                 512},
    {A(CONCURRENT_KERNELS),                                1},
    {A(ECC_ENABLED),                                       1},
    {A(TCC_DRIVER),                                        0},
    {A(MAX_THREADS_PER_MULTIPROCESSOR),                    2048},
    {A(ASYNC_ENGINE_COUNT),                                3},
    {A(UNIFIED_ADDRESSING),                                1},
    {A(MAXIMUM_TEXTURE1D_LAYERED_WIDTH),                   32768},
    {A(MAXIMUM_TEXTURE1D_LAYERED_LAYERS),                  2048},
    {A(CAN_TEX2D_GATHER),                                  1},
    {A(MAXIMUM_TEXTURE2D_GATHER_WIDTH),                    32768},
    {A(MAXIMUM_TEXTURE2D_GATHER_HEIGHT),                   32768},
    {A(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE),                 8192},
    {A(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE),                8192},
    {A(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE),                 32768},
    {A(TEXTURE_PITCH_ALIGNMENT),                           32},
    {A(MAXIMUM_TEXTURECUBEMAP_WIDTH),                      32768},
    {A(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH),              32768},
    {A(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS),             2046},
    {A(MAXIMUM_SURFACE1D_WIDTH),                           32768},
    {A(MAXIMUM_SURFACE2D_WIDTH),                           131072},
    {A(MAXIMUM_SURFACE2D_HEIGHT),                          65536},
    {A(MAXIMUM_SURFACE3D_WIDTH),                           16384},
    {A(MAXIMUM_SURFACE3D_HEIGHT),                          16384},
    {A(MAXIMUM_SURFACE3D_DEPTH),                           16384},
    {A(MAXIMUM_SURFACE1D_LAYERED_WIDTH),                   32768},
    {A(MAXIMUM_SURFACE1D_LAYERED_LAYERS),                  2048},
    {A(MAXIMUM_SURFACE2D_LAYERED_WIDTH),                   32768},
    {A(MAXIMUM_SURFACE2D_LAYERED_HEIGHT),                  32768},
    {A(MAXIMUM_SURFACE2D_LAYERED_LAYERS),                  2048},
    {A(MAXIMUM_SURFACECUBEMAP_WIDTH),                      32768},
    {A(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH),              32768},
    {A(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS),             2046},
    {A(MAXIMUM_TEXTURE1D_LINEAR_WIDTH),                    268435456},
    {A(MAXIMUM_TEXTURE2D_LINEAR_WIDTH),                    131072},
    {A(MAXIMUM_TEXTURE2D_LINEAR_HEIGHT),                   65000},
    {A(MAXIMUM_TEXTURE2D_LINEAR_PITCH),                    2097120},
    {A(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH),                 32768},
    {A(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT),                32768},
    {A(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH),                 32768},
    {A(STREAM_PRIORITIES_SUPPORTED),                       1},
    {A(GLOBAL_L1_CACHE_SUPPORTED),                         1},
    {A(LOCAL_L1_CACHE_SUPPORTED),                          1},
    {A(MAX_REGISTERS_PER_MULTIPROCESSOR),                  65536},
    {A(MANAGED_MEMORY),                                    1},
    {A(MULTI_GPU_BOARD),                                   0},
    {A(HOST_NATIVE_ATOMIC_SUPPORTED),                      0},
    {A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO),             2},
    {A(PAGEABLE_MEMORY_ACCESS),                            0},
    {A(CONCURRENT_MANAGED_ACCESS),                         1},
    {A(COMPUTE_PREEMPTION_SUPPORTED),                      1},
    {A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM),           1},
    {A(CAN_USE_STREAM_MEM_OPS_V1),                         0},
    {A(CAN_USE_64_BIT_STREAM_MEM_OPS_V1),                  0},
    {A(CAN_USE_STREAM_WAIT_VALUE_NOR_V1),                  0},
    {A(COOPERATIVE_LAUNCH),                                1},
    {A(COOPERATIVE_MULTI_DEVICE_LAUNCH),                   1},
    {A(CAN_FLUSH_REMOTE_WRITES),                           0},
    {A(HOST_REGISTER_SUPPORTED),                           1},
    {A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES),      0},
    {A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST),               0},
    {A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),               1},
    {A(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED),       1},
    {A(HANDLE_TYPE_WIN32_HANDLE_SUPPORTED),                0},
    {A(HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED),            0},
    {A(MAX_BLOCKS_PER_MULTIPROCESSOR),                     32},
    {A(GENERIC_COMPRESSION_SUPPORTED),                     1},
    {A(MAX_ACCESS_POLICY_WINDOW_SIZE),                     134217728},
    {A(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED),           1},
    {A(RESERVED_SHARED_MEMORY_PER_BLOCK),                  1024},
    {A(SPARSE_CUDA_ARRAY_SUPPORTED),                       1},
    {A(READ_ONLY_HOST_REGISTER_SUPPORTED),                 1},
    {A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED),              1},
    {A(MEMORY_POOLS_SUPPORTED),                            1},
    {A(GPU_DIRECT_RDMA_SUPPORTED),                         1},
    {A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS),              1},
    {A(GPU_DIRECT_RDMA_WRITES_ORDERING),                   100},  // CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER
    {A(MEMPOOL_SUPPORTED_HANDLE_TYPES),                    9},  // POSIX fd | fabric
    {A(CLUSTER_LAUNCH),                                    1},
    {A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED),             1},
    {A(CAN_USE_64_BIT_STREAM_MEM_OPS),                     1},
    {A(CAN_USE_STREAM_WAIT_VALUE_NOR),                     1},
    {A(DMA_BUF_SUPPORTED),                                 1},
    {A(IPC_EVENT_SUPPORTED),                               1},
    {A(MEM_SYNC_DOMAIN_COUNT),                             4},
    {A(TENSOR_MAP_ACCESS_SUPPORTED),                       1},
    {A(HANDLE_TYPE_FABRIC_SUPPORTED),                      1},
    {A(UNIFIED_FUNCTION_POINTERS),                         1},
    {A(NUMA_CONFIG),                                       0},
    {A(NUMA_ID),                                           -1},  // x86 host: GPU memory is no NUMA node
    {A(MULTICAST_SUPPORTED),                               0},  // 1 on HGX with fabric manager; off: no NVLS emulation
    {A(MPS_ENABLED),                                       0},
    {A(D3D12_CIG_SUPPORTED),                               0},
    {A(MEM_DECOMPRESS_ALGORITHM_MASK),                     0},
    {A(MEM_DECOMPRESS_MAXIMUM_LENGTH),                     0},
    {A(VULKAN_CIG_SUPPORTED),                              0},
    {A(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),     1},
    {A(HOST_NUMA_MEMORY_POOLS_SUPPORTED),                  1},
    {A(HOST_NUMA_MULTINODE_IPC_SUPPORTED),                 0},
    {A(HOST_MEMORY_POOLS_SUPPORTED),                       1},
    {A(HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),          1},
    {A(HOST_ALLOC_DMA_BUF_SUPPORTED),                      0},
    {A(ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED),         0},
};

// Rows every model must give (the completeness test checks them all): compute capability, SM
// count, clocks, memory bus, L2, shared memory and PCI identity.
constexpr Row kH100[] = {  // measured
    {A(COMPUTE_CAPABILITY_MAJOR),                 9},
    {A(COMPUTE_CAPABILITY_MINOR),                 0},
    {A(MULTIPROCESSOR_COUNT),                     132},
    {A(CLOCK_RATE),                               1980000},     // kHz
    {A(MEMORY_CLOCK_RATE),                        2619000},     // kHz
    {A(GLOBAL_MEMORY_BUS_WIDTH),                  5120},
    {A(L2_CACHE_SIZE),                            52428800},    // 50 MiB
    {A(MAX_PERSISTING_L2_CACHE_SIZE),             32768000},    // 62.5% of L2
    {A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),     233472},      // 228 KiB
    {A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),        232448},      // 227 KiB
    {A(GPU_PCI_DEVICE_ID),                        0x233010DE},
    {A(GPU_PCI_SUBSYSTEM_ID),                     0x16C110DE},  // HGX H100 8-GPU board
};

constexpr Row kH200[] = {  // measured
    {A(COMPUTE_CAPABILITY_MAJOR),                 9},
    {A(COMPUTE_CAPABILITY_MINOR),                 0},
    {A(MULTIPROCESSOR_COUNT),                     132},
    {A(CLOCK_RATE),                               1980000},
    {A(MEMORY_CLOCK_RATE),                        3201000},
    {A(GLOBAL_MEMORY_BUS_WIDTH),                  6016},
    {A(L2_CACHE_SIZE),                            62914560},    // 60 MiB
    {A(MAX_PERSISTING_L2_CACHE_SIZE),             39321600},    // 62.5% of L2
    {A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),     233472},
    {A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),        232448},
    {A(GPU_PCI_DEVICE_ID),                        0x233510DE},
    {A(GPU_PCI_SUBSYSTEM_ID),                     0x18BF10DE},
};

// cuOccupancyMaxActiveClusters on a real H200 (tests/cluster/data/h200_real_clusters.txt): an
// empty kernel with 1, 2 and 4 blocks per SM, clusters of 1 to 16 blocks. The H100 SXM is the
// same 132-SM die but was not measured, so it keeps the GPC estimate.
// Sizes 17 to 32 at one block per SM: cuBLAS's nopClusterDiscoveryTool probes, measured on an
// H200 (driver 580.159.04) on 2026-11-26 (tests/gpu/probe/cublaslt_queries): 17 and 18 fit 2.
const std::vector<std::vector<int>> kHopper132Clusters = {
    {132, 66, 39, 30, 22, 17, 15, 15, 9, 7, 7, 7, 7, 7, 7, 7,
     2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {264, 132, 79, 62, 47, 39, 32, 30, 23, 21, 16, 16, 14, 14, 14, 14},
    {528, 264, 163, 124, 94, 79, 69, 62, 51, 44, 37, 37, 30, 30, 28, 28},
};

// deviceQuery of an A100-SXM4-80GB (driver 555, CUDA 12.5; github.com/thamada/nvidia-smi
// gls/A100SXMx4_deviceQuery.py): SMs, clocks, bus, L2, smem/SM, 3 copy engines. Opt-in
// shared memory 163 KiB: CUDA programming guide, CC 8.0.
constexpr Row kA100[] = {
    {A(COMPUTE_CAPABILITY_MAJOR),                 8},
    {A(COMPUTE_CAPABILITY_MINOR),                 0},
    {A(MULTIPROCESSOR_COUNT),                     108},
    {A(CLOCK_RATE),                               1410000},
    {A(MEMORY_CLOCK_RATE),                        1593000},
    {A(GLOBAL_MEMORY_BUS_WIDTH),                  5120},
    {A(L2_CACHE_SIZE),                            41943040},    // 40 MiB
    {A(MAX_PERSISTING_L2_CACHE_SIZE),             31457280},    // 30 MiB (75% of L2; estimate)
    {A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),     167936},      // 164 KiB
    {A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),        166912},      // 163 KiB
    {A(GPU_PCI_DEVICE_ID),                        0x20B210DE},
    {A(GPU_PCI_SUBSYSTEM_ID),                     0x146310DE},  // HGX A100 80GB board
    // Ampere lacks what Hopper added:
    {A(CLUSTER_LAUNCH),                           0},           // thread-block clusters: 9.0+
    {A(TENSOR_MAP_ACCESS_SUPPORTED),              0},           // TMA: 9.0+
    {A(MEM_SYNC_DOMAIN_COUNT),                    1},           // memory sync domains: 9.0+
    {A(HANDLE_TYPE_FABRIC_SUPPORTED),             0},           // fabric handles: 9.0+
    {A(MEMPOOL_SUPPORTED_HANDLE_TYPES),           1},           // POSIX fd only
    {A(MAXIMUM_TEXTURE1D_LINEAR_WIDTH),           134217728},   // 2^27 below CC 9.0 (guide)
};

// B200 (HGX, 1000 W). SMs, L2 and the clock: cudaDeviceProp of a real B200 as printed in a public
// log (148 SMs, 129536 KiB L2, 1965 MHz); shared memory: CUDA programming guide, CC 10.0; PCI ids:
// NVIDIA open-gpu-kernel-modules README (2901 10DE 1999).
constexpr Row kB200[] = {
    {A(COMPUTE_CAPABILITY_MAJOR),                 10},
    {A(COMPUTE_CAPABILITY_MINOR),                 0},
    {A(MULTIPROCESSOR_COUNT),                     148},
    {A(CLOCK_RATE),                               1965000},
    {A(MEMORY_CLOCK_RATE),                        3906000},     // estimate: 8 TB/s over 8192 bits DDR
    {A(GLOBAL_MEMORY_BUS_WIDTH),                  8192},        // 8 HBM3e stacks
    {A(L2_CACHE_SIZE),                            132644864},   // 126.5 MiB
    {A(MAX_PERSISTING_L2_CACHE_SIZE),             82903040},    // estimate: 62.5% of L2, as Hopper
    {A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),     233472},
    {A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),        232448},
    {A(GPU_PCI_DEVICE_ID),                        0x290110DE},
    {A(GPU_PCI_SUBSYSTEM_ID),                     0x199910DE},
};
#undef A

std::map<int, int> attribute_table(std::initializer_list<std::span<const Row>> layers) {
  std::map<int, int> table;
  for (std::span<const Row> layer : layers)
    for (const auto& [attribute, value] : layer) table[attribute] = value;
  return table;
}

std::vector<GpuModel> build_catalog() {
  constexpr double G = 1e9, T = 1e12;
  std::vector<GpuModel> models;

  GpuModel h100;
  h100.id = "H100-SXM-80GB";
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.cc_major = 9, h100.cc_minor = 0, h100.sm_count = 132;
  h100.memory_bytes = 85'017'493'504;  // measured, driver 580.159.04
  h100.memory_bw = 3.35 * T;
  h100.fp32_flops = 67 * T, h100.fp64_flops = 34 * T;
  h100.tf32_tensor_flops = 494.5 * T, h100.bf16_tensor_flops = 989.5 * T;
  h100.fp8_tensor_flops = 1979 * T;
  h100.pcie_gen = 5, h100.pcie_width = 16, h100.pcie_bw = 63 * G;  // 32 GT/s x16, 128b/130b
  h100.nvlink_bw = 450 * G, h100.nvlink_links = 18;                  // NVLink 4: 18 x 25 GB/s
  h100.tdp_watts = 700;
  h100.attributes = attribute_table({kDatacenterBaseline, kH100});
  models.push_back(h100);

  GpuModel h200 = h100;  // the same Hopper die with more and faster HBM
  h200.id = "H200-141GB";
  h200.name = "NVIDIA H200";
  h200.memory_bytes = 150'109'880'320;  // measured, driver 580.159.04
  h200.memory_bw = 4.8 * T;
  h200.attributes = attribute_table({kDatacenterBaseline, kH200});
  h200.max_active_clusters = kHopper132Clusters;
  models.push_back(h200);

  GpuModel a100;
  a100.id = "A100-SXM-80GB";
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8, a100.cc_minor = 0, a100.sm_count = 108;
  a100.memory_bytes = 85'100'068'864;  // deviceQuery, driver 555 (source of kA100)
  a100.memory_bw = 2.039 * T;
  a100.fp32_flops = 19.5 * T, a100.fp64_flops = 9.7 * T;
  a100.tf32_tensor_flops = 156 * T, a100.bf16_tensor_flops = 312 * T;
  a100.fp8_tensor_flops = 0;
  a100.pcie_gen = 4, a100.pcie_width = 16, a100.pcie_bw = 31.5 * G;
  a100.nvlink_bw = 300 * G, a100.nvlink_links = 12;  // NVLink 3: 12 x 25 GB/s
  a100.tdp_watts = 400;
  a100.attributes = attribute_table({kDatacenterBaseline, kA100});
  models.push_back(a100);

  GpuModel b200;
  b200.id = "B200";
  b200.name = "NVIDIA B200";
  b200.cc_major = 10, b200.cc_minor = 0, b200.sm_count = 148;
  b200.memory_bytes = 191'502'483'456;  // 182631 MiB as a real B200 reported (MiB-rounded)
  b200.memory_bw = 8 * T;
  b200.fp32_flops = 80 * T, b200.fp64_flops = 40 * T;
  b200.tf32_tensor_flops = 1100 * T, b200.bf16_tensor_flops = 2250 * T;
  b200.fp8_tensor_flops = 4500 * T;
  b200.pcie_gen = 5, b200.pcie_width = 16, b200.pcie_bw = 63 * G;  // Gen6-capable; HGX hosts run Gen5
  b200.nvlink_bw = 900 * G, b200.nvlink_links = 18;                  // NVLink 5: 18 x 50 GB/s
  b200.tdp_watts = 1000;
  b200.attributes = attribute_table({kDatacenterBaseline, kB200});
  models.push_back(b200);
  return models;
}

const std::vector<GpuModel>& catalog() {
  static const std::vector<GpuModel> models = build_catalog();
  return models;
}

// Other spellings users type. Matching ignores case and treats '_' and ' ' as '-'.
const std::vector<std::pair<std::string_view, std::string_view>>& aliases() {
  static const std::vector<std::pair<std::string_view, std::string_view>> list = {
      {"H100", "H100-SXM-80GB"},     {"H100-SXM", "H100-SXM-80GB"},
      {"H100-SXM5-80GB", "H100-SXM-80GB"}, {"H100-80GB", "H100-SXM-80GB"},
      {"H200", "H200-141GB"},        {"H200-SXM", "H200-141GB"},
      {"H200-SXM-141GB", "H200-141GB"},
      {"A100", "A100-SXM-80GB"},     {"A100-80GB", "A100-SXM-80GB"},
      {"A100-SXM4-80GB", "A100-SXM-80GB"},
      {"B200-SXM", "B200"},          {"B200-180GB", "B200"},
  };
  return list;
}

std::string normalized(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (c == '_' || c == ' ') ? '-' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::span<const GpuModel> gpu_catalog() { return catalog(); }

const GpuModel* find_gpu_model(std::string_view id_or_alias) {
  const std::string key = normalized(id_or_alias);
  if (key.empty()) return nullptr;
  std::string_view id = key;
  for (const auto& [alias, target] : aliases())
    if (normalized(alias) == key) id = target;
  for (const GpuModel& m : catalog())
    if (normalized(m.id) == id || normalized(m.name) == key) return &m;
  return nullptr;
}

std::string known_gpu_models() {
  std::string out;
  for (const GpuModel& m : catalog()) out += (out.empty() ? "" : ", ") + m.id;
  return out;
}

}  // namespace simcore
