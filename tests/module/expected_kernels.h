// What tests/module/kernels.cu declares, as the parser must report it. Parameter offsets follow
// the CUDA ABI (each parameter at its natural alignment; structs at their alignas).
#pragma once

#include "module/image.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

namespace module_test {

using vgpu::module::GlobalInfo;
using vgpu::module::GlobalSpace;
using vgpu::module::KernelInfo;
using vgpu::module::ModuleImage;

struct ExpectedKernel {
  std::string name;
  std::vector<std::pair<uint32_t, uint32_t>> params;  // offset, size
  uint32_t param_bytes;
  uint32_t shared_bytes;
};

inline const std::vector<ExpectedKernel>& expected_kernels() {
  static const std::vector<ExpectedKernel> k = {
      {"k_noparams", {}, 0, 0},
      {"k_axpy", {{0, 4}, {8, 8}, {16, 8}, {24, 4}}, 28, 0},
      {"k_struct", {{0, 1}, {16, 32}, {48, 4}, {56, 8}}, 64, 0},
      {"k_array", {{0, 20}, {24, 8}}, 32, 0},
      {"k_huge", {{0, 20000}, {20000, 8}}, 20008, 0},
      {"k_int_types", {{0, 1}, {2, 2}, {8, 8}, {16, 8}, {24, 1}, {32, 8}}, 40, 0},
      {"_Z6k_tmplIfLi64EEvPT_S0_", {{0, 8}, {8, 4}}, 12, 64 * 4},
      {"_Z6k_tmplIdLi128EEvPT_S0_", {{0, 8}, {8, 8}}, 16, 128 * 8},
      {"k_dynshared", {{0, 8}}, 8, 0},
      {"k_bounded", {{0, 8}}, 8, 0},
  };
  return k;
}

struct ExpectedGlobal {
  std::string name;
  uint64_t size;
  GlobalSpace space;
  bool managed;
  std::vector<uint8_t> contents;  // all `size` bytes
};

template <class T>
std::vector<uint8_t> bytes_of(std::initializer_list<T> values) {
  std::vector<uint8_t> out;
  for (T v : values) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  return out;
}

inline const std::vector<ExpectedGlobal>& expected_globals() {
  static const std::vector<ExpectedGlobal> g = {
      {"c_scale", 16, GlobalSpace::constant, false, bytes_of<float>({1.0f, 2.0f, 3.0f, 4.0f})},
      {"c_table", 256, GlobalSpace::constant, false, std::vector<uint8_t>(256, 0)},
      {"d_counter", 4, GlobalSpace::global, false, bytes_of<int32_t>({42})},
      {"d_table", 64, GlobalSpace::global, false, std::vector<uint8_t>(64, 0)},
      {"d_big", 24, GlobalSpace::global, false, bytes_of<uint64_t>({1, 0x1122334455667788ull, 3})},
      {"m_value", 4, GlobalSpace::global, true, bytes_of<int32_t>({7})},
  };
  return g;
}

// The parameter layout, names and shared sizes of every kernel, and every global with its
// initial contents (an `init` shorter than `size` stands for trailing zeros).
inline void expect_kernels_cu(const ModuleImage& image, bool from_ptx) {
  EXPECT_EQ(image.from_ptx, from_ptx);
  EXPECT_EQ(image.kernels.size(), expected_kernels().size());
  for (const ExpectedKernel& e : expected_kernels()) {
    SCOPED_TRACE(e.name);
    const KernelInfo* k = image.find_kernel(e.name);
    ASSERT_NE(k, nullptr);
    ASSERT_EQ(k->params.size(), e.params.size());
    for (size_t i = 0; i < e.params.size(); ++i) {
      EXPECT_EQ(k->params[i].offset, e.params[i].first) << "param " << i;
      EXPECT_EQ(k->params[i].size, e.params[i].second) << "param " << i;
    }
    EXPECT_EQ(k->param_bytes, e.param_bytes);
    EXPECT_EQ(k->shared_bytes, e.shared_bytes);
    if (from_ptx) {
      EXPECT_EQ(k->registers, -1);
    } else {
      EXPECT_GT(k->registers, 0);
      EXPECT_LE(k->registers, 255);
    }
  }
  EXPECT_EQ(image.find_kernel("_Z6helperi"), nullptr) << "a device function is not a kernel";
  if (const KernelInfo* b = image.find_kernel("k_bounded")) {
    EXPECT_EQ(b->max_threads, 256u);
    EXPECT_EQ(b->max_ntid, (std::array<uint32_t, 3>{256, 1, 1}));
    if (from_ptx) {
      EXPECT_EQ(b->min_blocks_per_sm, 2u);
    } else {
      EXPECT_EQ(b->max_registers, 128);  // 64K registers / (256 threads * 2 blocks)
    }
  }
  if (const KernelInfo* a = image.find_kernel("k_axpy")) {
    EXPECT_EQ(a->max_threads, 0u);
    EXPECT_EQ(a->max_registers, -1);
  }

  EXPECT_EQ(image.globals.size(), expected_globals().size());
  for (const ExpectedGlobal& e : expected_globals()) {
    SCOPED_TRACE(e.name);
    const GlobalInfo* g = image.find_global(e.name);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->size, e.size);
    EXPECT_EQ(g->space, e.space);
    EXPECT_EQ(g->managed, e.managed);
    ASSERT_LE(g->init.size(), g->size);
    std::vector<uint8_t> contents = g->init;
    contents.resize(g->size, 0);
    EXPECT_EQ(contents, e.contents);
  }
}

}  // namespace module_test
