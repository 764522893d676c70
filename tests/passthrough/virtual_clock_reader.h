// The calling thread's virtual clock as a test reads it: through vgpu's own private export table
// (contracts/vgpu_clock_table.h), which both backends serve.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>

namespace vgpu_test {

inline double virtual_now() {
  static constexpr unsigned char kClockTableUuid[16] = {0x73, 0xfc, 0xef, 0x93, 0xcb, 0xc9, 0x45, 0xca,
                                                        0x85, 0x89, 0x2a, 0x4a, 0xa9, 0x9a, 0xea, 0x2c};
  const void* table = nullptr;
  CUuuid id;
  std::memcpy(id.bytes, kClockTableUuid, 16);
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_SUCCESS);
  using NowFn = int (*)(double*);
  const auto now = reinterpret_cast<const NowFn*>(table)[1];
  double s = -1;
  EXPECT_EQ(now(&s), 0);
  return s;
}

}  // namespace vgpu_test
