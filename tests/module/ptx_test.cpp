// PTX text written by hand: the syntax nvcc output does not show (comments anywhere, pointer
// attributes, multi-dimensional arrays, declarator lists, every literal form), and bad input.
#include "module/image.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <string>

namespace {

using namespace vgpu::module;

ParseResult parse(const std::string& text, int sm = 90) {
  return parse_image(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), sm);
}

const char* const kPtx = R"PTX(
// leading comment
/* block
   comment */ .version 8.5
.target sm_80, texmode_independent
.address_size 64
.file 1 "x.cu", 1700000000, 1234

.extern .func (.param .b32 r) ext_fn (.param .b32 a);
.visible .func (.param .b32 r) helper(.param .b32 a) { ret; }

.global .align 8 .u64 g_a = 5, g_b[2] = {1, 2};
.const .f32 c_one = 0f3F800000;
.global .f64 g_two = 0d4000000000000000;
.global .f32 g_dec = 1.5e+1;
.global .s32 g_neg = -5;
.global .u8 g_arr[] = {1, 2, 3};
.global .u16 g_oct = 010, g_hex = 0x1fU, g_bin = 0b101;
.global .u64 g_ptr = generic(g_a)+8;
.global .v2 .u32 g_vec = {7, 8};
.global .b8 g_nested[2][2] = {{1, 2}, {3, 4}};
.extern .global .b8 g_ext[];
.global .attribute(.managed) .align 4 .b32 g_managed;
.shared .align 4 .b8 module_shared[64];

.visible .entry k_one(
    .param .u64 .ptr .global .align 16 p,   // pointee alignment, not the parameter's
    .param /* inline comment */ .align 8 .b8 s[24],
    .param .b8 arr[3][5],
    .param .u32 n
)
.maxntid 128
.reqntid 32, 4
.minnctapersm 3
.maxnreg 64
{
    .reg .b32 %r<4>;
    .shared .align 16 .b8 sh1[100];
    .shared .u32 sh2;
    { // nested scope with a string "}" and braces
      .pragma "nounroll";
    }
    ld.shared.u32 %r1, [sh2];
    ret;
}

.entry k_two
{
  ret;
}

.weak .entry k_three() .reqnctapercluster 2, 1, 1 .explicitcluster { }
.extern .entry k_declared(.param .u32 x);
)PTX";

template <class T>
T read_as(const std::vector<uint8_t>& init) {
  T v{};
  std::memcpy(&v, init.data(), std::min(sizeof(T), init.size()));
  return v;
}

TEST(Ptx, KernelsParametersAndDirectives) {
  const ParseResult r = parse(kPtx);
  ASSERT_TRUE(r.ok()) << r.message();
  const ModuleImage& m = r.value();
  EXPECT_EQ(m.sm_arch, 80);
  EXPECT_TRUE(m.from_ptx);
  ASSERT_EQ(m.kernels.size(), 3u);
  EXPECT_EQ(m.kernels[0].name, "k_one");
  EXPECT_EQ(m.kernels[1].name, "k_two");
  EXPECT_EQ(m.kernels[2].name, "k_three");

  const KernelInfo& k = m.kernels[0];
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[0].offset, 0u);
  EXPECT_EQ(k.params[0].size, 8u);
  EXPECT_EQ(k.params[1].offset, 8u);
  EXPECT_EQ(k.params[1].size, 24u);
  EXPECT_EQ(k.params[2].offset, 32u);
  EXPECT_EQ(k.params[2].size, 15u);
  EXPECT_EQ(k.params[3].offset, 48u);
  EXPECT_EQ(k.params[3].size, 4u);
  EXPECT_EQ(k.param_bytes, 52u);
  EXPECT_EQ(k.max_ntid, (std::array<uint32_t, 3>{128, 1, 1}));
  EXPECT_EQ(k.req_ntid, (std::array<uint32_t, 3>{32, 4, 1}));
  EXPECT_EQ(k.max_threads, 128u);
  EXPECT_EQ(k.min_blocks_per_sm, 3u);
  EXPECT_EQ(k.max_registers, 64);
  EXPECT_EQ(k.registers, -1);
  EXPECT_EQ(k.shared_bytes, 104u);  // 100 bytes, then a u32 at offset 100

  EXPECT_TRUE(m.kernels[1].params.empty());
  EXPECT_EQ(m.kernels[1].param_bytes, 0u);
  EXPECT_EQ(m.kernels[2].cluster_dims, (std::array<uint32_t, 3>{2, 1, 1}));
}

TEST(Ptx, GlobalsAndInitialisers) {
  const ParseResult r = parse(kPtx);
  ASSERT_TRUE(r.ok()) << r.message();
  const ModuleImage& m = r.value();
  auto g = [&](const char* name) {
    const GlobalInfo* v = m.find_global(name);
    EXPECT_NE(v, nullptr) << name;
    static const GlobalInfo empty;
    return v ? *v : empty;
  };
  EXPECT_EQ(read_as<uint64_t>(g("g_a").init), 5u);
  EXPECT_EQ(g("g_b").size, 16u);
  EXPECT_EQ(g("g_b").init, (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(g("c_one").space, GlobalSpace::constant);
  EXPECT_EQ(read_as<float>(g("c_one").init), 1.0f);
  EXPECT_EQ(read_as<double>(g("g_two").init), 2.0);
  EXPECT_EQ(read_as<float>(g("g_dec").init), 15.0f);
  EXPECT_EQ(read_as<int32_t>(g("g_neg").init), -5);
  EXPECT_EQ(g("g_arr").size, 3u);
  EXPECT_EQ(g("g_arr").init, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(read_as<uint16_t>(g("g_oct").init), 8u);
  EXPECT_EQ(read_as<uint16_t>(g("g_hex").init), 31u);
  EXPECT_EQ(read_as<uint16_t>(g("g_bin").init), 5u);
  EXPECT_EQ(g("g_ptr").size, 8u);
  EXPECT_EQ(read_as<uint64_t>(g("g_ptr").init), 0u);  // an address: unknown until placed
  EXPECT_EQ(g("g_vec").size, 8u);
  EXPECT_EQ(g("g_vec").init, (std::vector<uint8_t>{7, 0, 0, 0, 8, 0, 0, 0}));
  EXPECT_EQ(g("g_nested").init, (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_TRUE(g("g_managed").managed);
  EXPECT_EQ(g("g_managed").size, 4u);
  EXPECT_TRUE(g("g_managed").init.empty());
  EXPECT_EQ(m.find_global("g_ext"), nullptr) << "an extern declaration defines nothing";
  EXPECT_EQ(m.find_global("module_shared"), nullptr) << "shared memory is not a global";
  EXPECT_EQ(m.globals.size(), 14u);
}

TEST(Ptx, CrLfAndNulTerminator) {
  std::string text = ".version 9.0\r\n.target sm_90\r\n.address_size 64\r\n.visible .entry k(.param .u32 a)\r\n{\r\nret;\r\n}\r\n";
  text.push_back('\0');
  text += "garbage after the terminator";
  const ParseResult r = parse(text);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r.value().kernels.size(), 1u);
  EXPECT_EQ(r.value().kernels[0].param_bytes, 4u);
}

TEST(Ptx, BadTextIsRefused) {
  struct Case {
    const char* text;
    ErrorKind kind;
  };
  const Case cases[] = {
      {"", ErrorKind::invalid_image},
      {".target sm_90\n.version 9.0\n", ErrorKind::invalid_image},  // .version must come first
      {"hello world", ErrorKind::invalid_image},
      {".version 9.0\n.target sm_90\n.entry k() { ret;", ErrorKind::invalid_ptx},
      {".version 9.0\n.target sm_90\n.entry k() { ret; } }", ErrorKind::invalid_ptx},
      {".version 9.0\n/* open comment", ErrorKind::invalid_ptx},
      {".version 9.0\n.target sm_90\n.entry k(.param p) {}", ErrorKind::invalid_ptx},
      {".version 9.0\n.target sm_90\n.entry k(.param .u32 a .param .u32 b) {}", ErrorKind::invalid_ptx},
      {".version 9.0\n.target sm_90\n.entry k(.param .align 3 .u32 a) {}", ErrorKind::invalid_ptx},
      {".version 9.0\n.target sm_90\n.global .u8 g[2] = {1, 2, 3};", ErrorKind::invalid_ptx},
      {".version 9.0\n.target sm_90\n.global .u8 g = \x01;", ErrorKind::invalid_ptx},
      {".version 9.0\n.target sm_100\n.entry k() {}", ErrorKind::invalid_ptx},  // newer than sm_90
  };
  for (const Case& c : cases) {
    const ParseResult r = parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().kind, c.kind) << c.text << ": " << r.message();
    EXPECT_FALSE(r.message().empty());
  }
  std::string deep = ".version 9.0\n.target sm_90\n.global .u8 g[1] = ";
  deep += std::string(100, '{') + "1" + std::string(100, '}') + ";";
  EXPECT_FALSE(parse(deep).ok());
}

TEST(Ptx, DamagedTextNeverCrashes) {
  const std::string text = kPtx;
  std::mt19937 rng(21);
  int ok = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = text;
    if (i % 3 == 0) {
      m.resize(rng() % m.size());
    } else {
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k)
        m[rng() % m.size()] = "{}()[];,.=\"/*-+0 \nxq"[rng() % 20];
    }
    // parse_image stops at a NUL, so an exactly-sized copy shows overreads under ASan.
    const std::vector<uint8_t> exact(m.begin(), m.end());
    (parse_image(exact, 90).ok() ? ok : refused)++;
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(ok, 0);
}

}  // namespace
