// Reading the test inputs: images nvcc built at build time (VGPU_MODULE_TEST_BUILD) and files
// committed beside the tests (VGPU_MODULE_TEST_SRC).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace module_test {

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

#ifdef VGPU_MODULE_TEST_BUILD
inline std::string built(const std::string& name) { return std::string(VGPU_MODULE_TEST_BUILD) + "/" + name; }
inline std::vector<uint8_t> built_image(const std::string& name) { return read_file(built(name)); }
#endif

inline std::string source(const std::string& name) { return std::string(VGPU_MODULE_TEST_SRC) + "/" + name; }

}  // namespace module_test
