// Every form nvcc 13 gives tests/module/kernels.cu in (cubins for three architectures, PTX, fat
// binaries with each compression setting and several architectures) parses to what the source
// declares, through both entry points.
#include "expected_kernels.h"
#include "module/fatbin.h"
#include "module/image.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

namespace {

using namespace vgpu::module;
using namespace module_test;

ModuleImage parse_ok(const std::vector<uint8_t>& bytes, int sm) {
  ParseResult r = parse_image(bytes, sm);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? std::move(r).value() : ModuleImage{};
}

TEST(NvccImages, CubinSm90) {
  const ModuleImage m = parse_ok(built_image("kernels_sm90.cubin"), 90);
  EXPECT_EQ(m.kind, ImageKind::cubin);
  EXPECT_EQ(m.sm_arch, 90);
  expect_kernels_cu(m, false);
}

TEST(NvccImages, CubinSm80HasNoReservedSharedMemory) {
  const ModuleImage m = parse_ok(built_image("kernels_sm80.cubin"), 80);
  EXPECT_EQ(m.sm_arch, 80);
  expect_kernels_cu(m, false);
  // SASS runs on a later minor of the same major (sm_86), not on another major.
  EXPECT_TRUE(parse_image(built_image("kernels_sm80.cubin"), 86).ok());
  const ParseResult other = parse_image(built_image("kernels_sm80.cubin"), 90);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().kind, ErrorKind::no_binary_for_gpu);
}

TEST(NvccImages, CubinSm100) {
  const ModuleImage m = parse_ok(built_image("kernels_sm100.cubin"), 100);
  EXPECT_EQ(m.sm_arch, 100);
  expect_kernels_cu(m, false);
}

TEST(NvccImages, Ptx) {
  const ModuleImage m = parse_ok(built_image("kernels.ptx"), 90);
  EXPECT_EQ(m.kind, ImageKind::ptx);
  EXPECT_EQ(m.sm_arch, 90);
  expect_kernels_cu(m, true);
  // A device can JIT PTX for an older target, not for a newer one.
  EXPECT_TRUE(parse_image(built_image("kernels.ptx"), 100).ok());
  const ParseResult old = parse_image(built_image("kernels.ptx"), 80);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().kind, ErrorKind::invalid_ptx);
}

TEST(NvccImages, ClusterDimensions) {
  for (const char* name : {"cluster_sm90.cubin", "cluster.ptx"}) {
    SCOPED_TRACE(name);
    const ModuleImage m = parse_ok(built_image(name), 90);
    ASSERT_EQ(m.kernels.size(), 2u);
    const KernelInfo* c = m.find_kernel("k_cluster");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->cluster_dims, (std::array<uint32_t, 3>{2, 1, 1}));
    const KernelInfo* r = m.find_kernel("k_cluster_rank");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->cluster_dims, (std::array<uint32_t, 3>{0, 0, 0}));
    EXPECT_EQ(r->max_threads, 128u);
  }
}

// The entries each compression setting produces, and that every one parses to the same module
// (sm_90 takes the SASS; sm_100, another major, takes the compute_90 PTX).
struct FatbinCase {
  const char* file;
  bool elf_zstd, ptx_zstd, ptx_lz4;
};

class Fatbins : public ::testing::TestWithParam<FatbinCase> {};

TEST_P(Fatbins, EntriesAndContents) {
  const FatbinCase c = GetParam();
  const std::vector<uint8_t> bytes = built_image(c.file);
  const std::vector<FatbinEntry> entries = parse_fatbin(bytes);
  ASSERT_EQ(entries.size(), 2u);
  for (const FatbinEntry& e : entries) {
    EXPECT_EQ(e.arch, 90u);
    if (e.is_elf()) {
      EXPECT_EQ(e.zstd(), c.elf_zstd) << e.describe();
      EXPECT_FALSE(e.lz4());
    } else {
      ASSERT_TRUE(e.is_ptx());
      EXPECT_EQ(e.zstd(), c.ptx_zstd) << e.describe();
      EXPECT_EQ(e.lz4(), c.ptx_lz4) << e.describe();
    }
  }
  const ModuleImage sass = parse_ok(bytes, 90);
  EXPECT_EQ(sass.kind, ImageKind::fatbin);
  EXPECT_EQ(sass.sm_arch, 90);
  expect_kernels_cu(sass, false);

  const ModuleImage ptx = parse_ok(bytes, 100);
  EXPECT_EQ(ptx.sm_arch, 90);
  expect_kernels_cu(ptx, true);
}

INSTANTIATE_TEST_SUITE_P(Compression, Fatbins,
                         ::testing::Values(
                             // nvcc's default: what cudart programs hand the driver.
                             FatbinCase{"kernels_default.fatbin", false, true, false},
                             FatbinCase{"kernels_compress_all.fatbin", true, true, false},
                             FatbinCase{"kernels_no_compress.fatbin", false, false, false},
                             FatbinCase{"kernels_mode_size.fatbin", true, true, false},
                             FatbinCase{"kernels_mode_speed.fatbin", false, false, true}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           return n.substr(8, n.find('.') - 8);
                         });

TEST(NvccImages, MultiArchitectureSelection) {
  const std::vector<uint8_t> bytes = built_image("kernels_multi.fatbin");
  struct Want {
    int device;
    int code;
    bool ptx;
  };
  // Exact SASS first, then SASS of an older minor of the same major, then the newest PTX.
  for (const Want w : {Want{80, 80, false}, Want{86, 80, false}, Want{89, 80, false}, Want{90, 90, false},
                       Want{100, 100, false}, Want{103, 100, false}, Want{120, 100, true}}) {
    SCOPED_TRACE(w.device);
    const ModuleImage m = parse_ok(bytes, w.device);
    EXPECT_EQ(m.sm_arch, w.code);
    expect_kernels_cu(m, w.ptx);
  }
  const ParseResult none = parse_image(bytes, 75);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::no_binary_for_gpu);
  EXPECT_NE(none.message().find("sm_90 ELF"), std::string::npos) << none.message();
  // Without an architecture the newest SASS is taken.
  EXPECT_EQ(parse_ok(bytes, 0).sm_arch, 100);
}

TEST(NvccImages, PtxOnlyFatbin) {
  const std::vector<uint8_t> bytes = built_image("kernels_ptx_only.fatbin");
  const ModuleImage m = parse_ok(bytes, 90);
  EXPECT_EQ(m.sm_arch, 80);
  expect_kernels_cu(m, true);
  EXPECT_EQ(parse_image(bytes, 75).error().kind, ErrorKind::no_binary_for_gpu);
}

// cuModuleLoadData gets only a pointer: the extent must come from the image itself.
TEST(NvccImages, PointerEntryPointAndProbe) {
  for (const char* name : {"kernels_sm90.cubin", "kernels_sm100.cubin", "kernels_default.fatbin",
                           "kernels_multi.fatbin", "kernels_mode_size.fatbin"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = built_image(name);
    const Result<uint64_t> size = probe_image_size(bytes.data());
    ASSERT_TRUE(size.ok()) << size.message();
    EXPECT_EQ(size.value(), bytes.size());
    const int sm = std::string(name).find("sm100") != std::string::npos ? 100 : 90;
    const ParseResult r = parse_image_at(bytes.data(), sm);
    ASSERT_TRUE(r.ok()) << r.message();
    expect_kernels_cu(r.value(), false);
  }
  std::vector<uint8_t> ptx = built_image("kernels.ptx");
  const size_t text_size = ptx.size();
  ptx.push_back(0);
  EXPECT_EQ(probe_image_size(ptx.data()).value(), text_size + 1);
  const ParseResult r = parse_image_at(ptx.data(), 90);
  ASSERT_TRUE(r.ok()) << r.message();
  expect_kernels_cu(r.value(), true);
}

// The parser keeps no shared state: threads parsing at once all get the whole module.
TEST(NvccImages, ConcurrentParses) {
  const std::vector<uint8_t> fatbin = built_image("kernels_default.fatbin");
  std::vector<std::thread> threads;
  std::vector<int> good(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const ParseResult r = parse_image(fatbin, t % 2 ? 90 : 100);  // SASS and PTX paths
        good[t] += r.ok() && r.value().kernels.size() == expected_kernels().size();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(good, std::vector<int>(4, 20));
}

TEST(NvccImages, Files) {
  const ParseResult r = parse_image_file(built("kernels_default.fatbin"), 90);
  ASSERT_TRUE(r.ok()) << r.message();
  expect_kernels_cu(r.value(), false);
  const ParseResult missing = parse_image_file(built("no_such_image.cubin"), 90);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::file_not_found);
  EXPECT_EQ(parse_image_file(VGPU_MODULE_TEST_BUILD, 90).error().kind, ErrorKind::invalid_image);  // a directory
}

}  // namespace
