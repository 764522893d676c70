// The fat binary an nvcc-built host object registers at start-up (kernels.cu compiled with
// -c and linked into this test; fake_cudart.cpp receives the calls cudart would): parsing the
// wrapper pointer exactly as the driver receives it yields the kernels and variables cudart
// registers by name.
#include "expected_kernels.h"
#include "fake_cudart.h"
#include "module/image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace {

using namespace vgpu::module;
using namespace module_test;

struct Wrapper {
  int magic;
  int version;
  const void* data;
  const void* filename_or_fatbins;
};

TEST(Registration, WrapperParsesToWhatCudartRegisters) {
  const Registrations& reg = registrations();
  ASSERT_EQ(reg.fatbins.size(), 1u);
  const auto* w = static_cast<const Wrapper*>(reg.fatbins[0]);
  EXPECT_EQ(static_cast<uint32_t>(w->magic), 0x466243b1u);

  const ParseResult r = parse_image_at(w, 90);
  ASSERT_TRUE(r.ok()) << r.message();
  const ModuleImage& m = r.value();
  EXPECT_EQ(m.kind, ImageKind::fatbin);
  expect_kernels_cu(m, false);

  std::set<std::string> parsed, registered(reg.functions.begin(), reg.functions.end());
  for (const KernelInfo& k : m.kernels) parsed.insert(k.name);
  EXPECT_EQ(parsed, registered);

  ASSERT_EQ(reg.vars.size(), expected_globals().size());
  for (const RegisteredVar& v : reg.vars) {
    SCOPED_TRACE(v.name);
    const GlobalInfo* g = m.find_global(v.name);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->size, v.size);
    EXPECT_EQ(g->space == GlobalSpace::constant, v.constant);
    EXPECT_EQ(g->managed, v.managed);
  }

  // The same through the fat binary pointer itself, and through its PTX for another major.
  const ParseResult direct = parse_image_at(w->data, 90);
  ASSERT_TRUE(direct.ok()) << direct.message();
  expect_kernels_cu(direct.value(), false);
  const ParseResult jit = parse_image_at(w, 120);
  ASSERT_TRUE(jit.ok()) << jit.message();
  expect_kernels_cu(jit.value(), true);

  // The wrapper's bytes alone are refused by the sized entry point (they hold a pointer).
  const ParseResult sized = parse_image(std::span(reinterpret_cast<const uint8_t*>(w), sizeof(Wrapper)), 90);
  ASSERT_FALSE(sized.ok());
  EXPECT_NE(sized.message().find("parse_image_at"), std::string::npos) << sized.message();
}

TEST(Registration, WrapperWithBadPointerIsRefused) {
  Wrapper w{0x466243b1, 1, nullptr, nullptr};
  EXPECT_FALSE(parse_image_at(&w, 90).ok());
  const uint8_t not_a_fatbin[16] = {1, 2, 3, 4};
  w.data = not_a_fatbin;
  EXPECT_FALSE(parse_image_at(&w, 90).ok());
  EXPECT_FALSE(parse_image_at(nullptr, 90).ok());
}

}  // namespace
