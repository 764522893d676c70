// What building a launch signature costs for PyTorch's kernels whose structs are cleaned
// (front/launch/elementwise_metadata.h, cat_array_metadata.h), against a baseline in the same run:
// the same parameter bytes under a kernel name outside at::native of the same length, which no
// cleaner looks at. Rows: a cast copy (a loader and a storer of 8 bytes), the legacy elementwise
// closure of 648 bytes (an offset calculator), torch.cat's 2,720-byte input struct. The sim
// backend builds a signature for every launch; the passthrough for every launch whose raw
// parameters it has not seen (recent_signatures.h).
//
//   build/bench/driver/launch_signature_bench [builds]      (default 200000; --quick: 20000)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "front/launch/launch_signature.h"

using namespace vgpu;

namespace {

struct Case {
  const char* label;
  std::string name;
  std::vector<ParamSlot> slots;
  std::vector<uint8_t> params;
  LaunchShape shape;
};

// A name of the same length outside at::native: the cleaners' first compare rejects it.
std::string baseline_name(const std::string& name) { return "_Z" + std::string(name.size() - 2, 'x'); }

double ns_per_build(const Case& c, const std::string& name, int n) {
  LaunchSignature sig;
  auto is_pointer = [](uint64_t v) { return v >= 0x7f0000000000ull && v < 0x7f1000000000ull; };
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) build_launch_signature(name, c.shape, c.slots, c.params, is_pointer, &sig);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 200000;
  for (int i = 1; i < argc; ++i) n = std::strcmp(argv[i], "--quick") == 0 ? 20000 : std::atoi(argv[i]);
  if (n < 1) n = 1;
  std::mt19937 rng(1);
  auto bytes = [&rng](size_t size) {
    std::vector<uint8_t> b(size);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
  };
  std::vector<Case> cases;
  {
    Case c{"cast copy (LoadWithCast<1>, StoreWithCast<1>)",
           "_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_"
           "clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EELi4E23TrivialOffsetCalculatorILi1EjESB_NS0_6memory12LoadWithCastILi1EEENSC_"
           "13StoreWithCastILi1EEEEEviT_T0_T2_T3_T4_T5_",
           {{0, 4}, {4, 1}, {8, 16}, {24, 1}, {25, 1}, {28, 8}, {36, 8}}, bytes(44), {}};
    const uint32_t two = 2, four = 4;
    c.params[28] = 15, c.params[36] = 6;
    std::memcpy(&c.params[32], &two, 4);
    std::memcpy(&c.params[40], &four, 4);
    c.shape.grid = {804112, 1, 1};
    c.shape.block = {128, 1, 1};
    cases.push_back(c);
  }
  {
    Case c{"legacy elementwise closure (OffsetCalculator<3>)",
           "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_15CUDAFunctor_addIfEEEEvRNS_"
           "18TensorIteratorBaseERKT_EUliE_EEviT1_",
           {{0, 4}, {8, 648}}, bytes(656), {}};
    const uint32_t dims = 2, divider[6] = {786432, 0x55555556u, 20, 8, 1, 3};
    std::memcpy(&c.params[8], &dims, 4);
    std::memcpy(&c.params[12], divider, sizeof divider);
    c.shape.grid = {24576, 1, 1};
    c.shape.block = {128, 1, 1};
    cases.push_back(c);
  }
  {
    Case c{"torch.cat input struct (n 128, 2,720 bytes)",
           "_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391c30CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj2EEE"
           "jLi3ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEE"
           "iS8_",
           {{0, 8}, {16, 2720}, {2736, 32}, {2768, 4}, {2772, 4}}, bytes(2776), {}};
    c.shape.grid = {4224, 3, 1};
    c.shape.block = {128, 1, 1};
    cases.push_back(c);
  }
  std::printf("%d signature builds a row, each row's baseline the same bytes under a name no cleaner reads\n", n);
  std::printf("%-50s %12s %12s %8s\n", "kernel", "ns/build", "baseline", "ratio");
  for (const Case& c : cases) {
    ns_per_build(c, c.name, n / 10);  // warm-up
    const double base = ns_per_build(c, baseline_name(c.name), n);
    const double cleaned = ns_per_build(c, c.name, n);
    std::printf("%-50s %12.1f %12.1f %8.3f\n", c.label, cleaned, base, cleaned / base);
  }
  return 0;
}
