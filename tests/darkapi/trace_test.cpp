// VGPU_TRACE=1 (set for this test by meson.build): every lookup and every private slot call is
// one line on stderr, with the UUID, table, slot, argument names and values, and the result.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "darkapi_test_util.h"

using namespace darkapi_test;

namespace {
std::string traced(const std::function<void()>& f) {
  testing::internal::CaptureStderr();
  f();
  return testing::internal::GetCapturedStderr();
}
}  // namespace

TEST(DarkApiTrace, LookupsAndSlotCallsAreLogged) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);

  std::string err = traced([] {
    const void* const* t;
    lookup(expected("6bd5fb6c").uuid, &t);
  });
  EXPECT_NE(err.find("[vgpu trace "), std::string::npos) << err;
  EXPECT_NE(err.find("cuGetExportTable(6bd5fb6c-5bf4-e74a-8987-d93912fd9df9) cudart_interface"),
            std::string::npos)
      << err;

  const uint8_t unknown[16] = {0xde, 0xad, 0xbe, 0xef};
  err = traced([&] {
    const void* const* t;
    lookup(unknown, &t);
  });
  EXPECT_NE(err.find("cuGetExportTable(deadbeef-0000-0000-0000-000000000000) unknown -> 1"),
            std::string::npos)
      << err;

  err = traced([] {
    CUcontext ctx;
    slot<CUresult (*)(CUcontext*, CUdevice)>("6bd5fb6c", 2)(&ctx, 3);
  });
  EXPECT_NE(err.find("6bd5fb6c[2] cudart_interface.primary_context(out=0x"), std::string::npos) << err;
  EXPECT_NE(err.find(", device=3) -> 0"), std::string::npos) << err;

  err = traced([] {
    slot<CUresult (*)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t)>(
        "69a28e9f", 21)(0x10, 0x20, 0, 0, 0, 0);
  });
  EXPECT_NE(err.find("69a28e9f[21] runtime_69a28e9f.unknown(first six registers: 0x10, 0x20"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("-> 801"), std::string::npos) << err;

  err = traced([] {
    uint64_t out[2];
    slot<CUresult (*)(uint32_t, uint64_t, uint64_t*)>("d4082055", 1)(13001, 42, out);
  });
  EXPECT_NE(err.find("integrity_check.integrity_check(version=13001, unix_seconds=42, out=0x"),
            std::string::npos)
      << err;
}
