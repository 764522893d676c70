// Memory of the sim backend through the driver ABI, on the embedded default cluster (8 x
// H100 80GB): allocation, cuMemGetInfo, pointer queries, every kind of copy and set with the
// bytes checked, arrays, managed memory, bad input, and many threads at once.
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace {

class Memory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx0_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx1_, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(1);
    cuDevicePrimaryCtxRelease(0);
  }
  static size_t free_mem() {
    size_t f = 0, t = 0;
    EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
  }
  CUcontext ctx0_ = nullptr, ctx1_ = nullptr;
};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed) & 0xff);
  return v;
}

TEST_F(Memory, FreeMemoryAfterPrimaryContextMatchesH100) {
  size_t f = 0, t = 0;
  ASSERT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
  EXPECT_EQ(t, 85'017'493'504u);
  EXPECT_EQ(f, 84'465'090'560u);  // measured on a real H100 right after its primary context
}

TEST_F(Memory, TenthEightGiBChunkFails) {
  std::vector<CUdeviceptr> chunks;
  CUresult r = CUDA_SUCCESS;
  while (chunks.size() < 20) {
    CUdeviceptr p;
    r = cuMemAlloc(&p, 8ull << 30);
    if (r != CUDA_SUCCESS) break;
    chunks.push_back(p);
  }
  EXPECT_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(chunks.size(), 9u);
  for (auto p : chunks) EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(Memory, GetInfoFollowsAllocationsAtTwoMiBGranularity) {
  const size_t f0 = free_mem();
  CUdeviceptr a, b;
  ASSERT_EQ(cuMemAlloc(&a, 1), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 2u << 20);
  ASSERT_EQ(cuMemAlloc(&b, (2u << 20) + 1), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 6u << 20);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(b), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  // Memory of another device is charged to that device only.
  ASSERT_EQ(cuCtxSetCurrent(ctx1_), CUDA_SUCCESS);
  const size_t g0 = free_mem();
  ASSERT_EQ(cuMemAlloc(&a, 10 << 20), CUDA_SUCCESS);
  EXPECT_EQ(g0 - free_mem(), 10u << 20);
  ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
}

TEST_F(Memory, HostDeviceRoundTrip) {
  const size_t n = 1 << 20;
  auto in = pattern(n, 7);
  std::vector<unsigned char> out(n, 0);
  CUdeviceptr d, e;
  ASSERT_EQ(cuMemAlloc(&d, n), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&e, n), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(d, in.data(), n), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoD(e, d, n), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), e, n), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  // Unified cuMemcpy infers the direction.
  std::vector<unsigned char> out2(n, 0);
  ASSERT_EQ(cuMemcpy(reinterpret_cast<CUdeviceptr>(out2.data()), e, n), CUDA_SUCCESS);
  EXPECT_EQ(in, out2);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(e), CUDA_SUCCESS);
}

TEST_F(Memory, PeerCopyBetweenDevices) {
  const size_t n = 4096;
  auto in = pattern(n, 3);
  CUdeviceptr a, b;
  ASSERT_EQ(cuMemAlloc(&a, n), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx1_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, n), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(a, in.data(), n), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyPeer(b, ctx1_, a, ctx0_, n), CUDA_SUCCESS);
  std::vector<unsigned char> out(n);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), b, n), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  EXPECT_EQ(cuMemcpyPeer(b, reinterpret_cast<CUcontext>(0x99), a, ctx0_, n), CUDA_ERROR_INVALID_CONTEXT);
  CUdevice dev = -1;
  ASSERT_EQ(cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(b), CUDA_SUCCESS);
}

TEST_F(Memory, TwoDAndThreeDCopies) {
  CUdeviceptr d;
  size_t pitch = 0;
  const size_t w = 100, h = 7;
  ASSERT_EQ(cuMemAllocPitch(&d, &pitch, w, h, 4), CUDA_SUCCESS);
  EXPECT_GE(pitch, w);
  EXPECT_EQ(pitch % 512, 0u);
  auto in = pattern(w * h, 11);
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = in.data(); c.srcPitch = w;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE; c.dstDevice = d; c.dstPitch = pitch;
  c.WidthInBytes = w; c.Height = h;
  ASSERT_EQ(cuMemcpy2D(&c), CUDA_SUCCESS);
  std::vector<unsigned char> out(w * h, 0);
  CUDA_MEMCPY2D back{};
  back.srcMemoryType = CU_MEMORYTYPE_DEVICE; back.srcDevice = d; back.srcPitch = pitch;
  back.dstMemoryType = CU_MEMORYTYPE_HOST; back.dstHost = out.data(); back.dstPitch = w;
  back.WidthInBytes = w; back.Height = h;
  ASSERT_EQ(cuMemcpy2DUnaligned(&back), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  // A row past the allocation is refused before anything is written.
  back.Height = h + 100;
  EXPECT_EQ(cuMemcpy2D(&back), CUDA_ERROR_INVALID_VALUE);
  c.WidthInBytes = pitch + 1;
  EXPECT_EQ(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);

  // 3D: a 8x4x3 box out of a 16x8x5 volume, host -> array -> device -> host.
  const size_t X = 16, Y = 8, Z = 5;
  auto vol = pattern(X * Y * Z, 5);
  CUarray arr;
  CUDA_ARRAY3D_DESCRIPTOR ad{};
  ad.Width = X; ad.Height = Y; ad.Depth = Z; ad.Format = CU_AD_FORMAT_UNSIGNED_INT8; ad.NumChannels = 1;
  ASSERT_EQ(cuArray3DCreate(&arr, &ad), CUDA_SUCCESS);
  CUDA_MEMCPY3D p{};
  p.srcMemoryType = CU_MEMORYTYPE_HOST; p.srcHost = vol.data(); p.srcPitch = X; p.srcHeight = Y;
  p.dstMemoryType = CU_MEMORYTYPE_ARRAY; p.dstArray = arr;
  p.WidthInBytes = X; p.Height = Y; p.Depth = Z;
  ASSERT_EQ(cuMemcpy3D(&p), CUDA_SUCCESS);
  CUdeviceptr lin;
  ASSERT_EQ(cuMemAlloc(&lin, 8 * 4 * 3), CUDA_SUCCESS);
  CUDA_MEMCPY3D q{};
  q.srcMemoryType = CU_MEMORYTYPE_ARRAY; q.srcArray = arr; q.srcXInBytes = 2; q.srcY = 1; q.srcZ = 1;
  q.dstMemoryType = CU_MEMORYTYPE_DEVICE; q.dstDevice = lin; q.dstPitch = 8; q.dstHeight = 4;
  q.WidthInBytes = 8; q.Height = 4; q.Depth = 3;
  ASSERT_EQ(cuMemcpy3D(&q), CUDA_SUCCESS);
  std::vector<unsigned char> box(8 * 4 * 3);
  ASSERT_EQ(cuMemcpyDtoH(box.data(), lin, box.size()), CUDA_SUCCESS);
  for (size_t z = 0; z < 3; ++z)
    for (size_t y = 0; y < 4; ++y)
      for (size_t x = 0; x < 8; ++x)
        ASSERT_EQ(box[z * 32 + y * 8 + x], vol[(z + 1) * X * Y + (y + 1) * X + (x + 2)]) << x << "," << y << "," << z;
  q.srcZ = 3;  // 3 + 3 > 5 layers
  EXPECT_EQ(cuMemcpy3D(&q), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR got{};
  ASSERT_EQ(cuArray3DGetDescriptor(&got, arr), CUDA_SUCCESS);
  EXPECT_EQ(got.Depth, Z);
  EXPECT_EQ(cuArrayDestroy(arr), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(arr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemFree(lin), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
}

// A mipmapped array: each level is an array of its own size (copies reach it), all levels are
// charged at once, a level cannot be destroyed alone, and the mipmap goes with its context.
TEST_F(Memory, MipmappedArrayLevelsAreArrays) {
  const size_t f0 = free_mem();
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 1024; d.Height = 512; d.Format = CU_AD_FORMAT_FLOAT; d.NumChannels = 4;
  CUmipmappedArray m;
  EXPECT_EQ(cuMipmappedArrayCreate(&m, &d, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMipmappedArrayCreate(&m, &d, 12), CUDA_ERROR_INVALID_VALUE);  // 1024 wide: 11 levels
  ASSERT_EQ(cuMipmappedArrayCreate(&m, &d, 11), CUDA_SUCCESS);
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  ASSERT_EQ(cuMipmappedArrayCreate(&m, &d, 3), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 12u << 20);  // 8 + 2 + 0.5 MiB, in 2 MiB granules
  CUarray level[3];
  for (unsigned l = 0; l < 3; ++l) {
    ASSERT_EQ(cuMipmappedArrayGetLevel(&level[l], m, l), CUDA_SUCCESS);
    CUDA_ARRAY3D_DESCRIPTOR got{};
    ASSERT_EQ(cuArray3DGetDescriptor(&got, level[l]), CUDA_SUCCESS);
    EXPECT_EQ(got.Width, 1024u >> l);
    EXPECT_EQ(got.Height, 512u >> l);
    EXPECT_EQ(got.Format, CU_AD_FORMAT_FLOAT);
  }
  EXPECT_EQ(cuMipmappedArrayGetLevel(&level[0], m, 3), CUDA_ERROR_INVALID_VALUE);
  auto in = pattern(256 * 128 * 16, 7);  // all of level 2
  ASSERT_EQ(cuMemcpyHtoA(level[2], 0, in.data(), in.size()), CUDA_SUCCESS);
  std::vector<unsigned char> out(in.size());
  ASSERT_EQ(cuMemcpyAtoH(out.data(), level[2], 0, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  EXPECT_EQ(cuMemcpyHtoA(level[2], 1, in.data(), in.size()), CUDA_ERROR_INVALID_VALUE);  // one byte past
  EXPECT_EQ(cuArrayDestroy(level[1]), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMipmappedArrayGetLevel(&level[0], m, 0), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemcpyAtoH(out.data(), level[2], 0, 16), CUDA_ERROR_INVALID_VALUE);  // gone with it

  // A mipmap left in a destroyed context gives its memory back.
  CUcontext c;
  ASSERT_EQ(cuCtxCreate(&c, nullptr, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMipmappedArrayCreate(&m, &d, 2), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Memory, ArrayLinearCopies) {
  CUarray a, b;
  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = 64; ad.Height = 4; ad.Format = CU_AD_FORMAT_FLOAT; ad.NumChannels = 1;
  ASSERT_EQ(cuArrayCreate(&a, &ad), CUDA_SUCCESS);
  ASSERT_EQ(cuArrayCreate(&b, &ad), CUDA_SUCCESS);
  auto in = pattern(256, 1);
  ASSERT_EQ(cuMemcpyHtoA(a, 16, in.data(), in.size()), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAtoA(b, 0, a, 16, in.size()), CUDA_SUCCESS);
  std::vector<unsigned char> out(256);
  ASSERT_EQ(cuMemcpyAtoH(out.data(), b, 0, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  EXPECT_EQ(cuMemcpyHtoA(a, 900, in.data(), in.size()), CUDA_ERROR_INVALID_VALUE);  // past the end
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(b), CUDA_SUCCESS);
}

// Every CUarray_format of cuda.h makes an array, charged by the array-size rule both backends
// share; a block-compressed array is copied in rows of 4x4 blocks, a planar video array as its
// luma rows followed by its chroma rows.
TEST_F(Memory, CompressedAndVideoArrays) {
  const size_t f0 = free_mem();
  CUarray a;
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 16; d.Height = 8; d.Format = CU_AD_FORMAT_BC1_UNORM; d.NumChannels = 4;
  ASSERT_EQ(cuArray3DCreate(&a, &d), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 2u << 20);
  auto blocks = pattern(4 * 8 * 2, 3);  // 4 blocks of 8 bytes a row, 2 rows of blocks
  CUDA_MEMCPY2D p{};
  p.srcMemoryType = CU_MEMORYTYPE_HOST; p.srcHost = blocks.data(); p.srcPitch = 32;
  p.dstMemoryType = CU_MEMORYTYPE_ARRAY; p.dstArray = a;
  p.WidthInBytes = 32; p.Height = 2;
  ASSERT_EQ(cuMemcpy2D(&p), CUDA_SUCCESS);
  std::vector<unsigned char> out(blocks.size());
  ASSERT_EQ(cuMemcpyAtoH(out.data(), a, 0, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(out, blocks);
  p.Height = 3;  // only 2 rows of blocks
  EXPECT_EQ(cuMemcpy2D(&p), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);

  d.Width = 1920; d.Height = 1080; d.Format = CU_AD_FORMAT_NV12; d.NumChannels = 3;
  ASSERT_EQ(cuArray3DCreate(&a, &d), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 4u << 20);  // 2880-byte rows, 1152 rows
  auto frame = pattern(1920 * 1620, 4);  // 1080 luma rows, 540 chroma rows
  p.srcHost = frame.data(); p.srcPitch = 1920; p.WidthInBytes = 1920; p.Height = 1620;
  p.dstArray = a;
  ASSERT_EQ(cuMemcpy2D(&p), CUDA_SUCCESS);
  out.resize(frame.size());
  ASSERT_EQ(cuMemcpyAtoH(out.data(), a, 0, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(out, frame);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);

  d.Width = 64; d.Height = 64; d.Format = static_cast<CUarray_format>(0x7f); d.NumChannels = 1;
  EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);  // no such format
  EXPECT_EQ(free_mem(), f0);
}

TEST_F(Memory, MemsetsOfEachWidth) {
  const size_t n = 1000;
  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, n * 4), CUDA_SUCCESS);
  std::vector<unsigned char> b(n * 4);
  ASSERT_EQ(cuMemsetD8(d, 0xab, n * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(b.data(), d, b.size()), CUDA_SUCCESS);
  for (auto x : b) ASSERT_EQ(x, 0xab);
  ASSERT_EQ(cuMemsetD16(d, 0x1234, n * 2), CUDA_SUCCESS);
  std::vector<uint16_t> s(n * 2);
  ASSERT_EQ(cuMemcpyDtoH(s.data(), d, b.size()), CUDA_SUCCESS);
  for (auto x : s) ASSERT_EQ(x, 0x1234);
  ASSERT_EQ(cuMemsetD32(d, 0xdeadbeef, n), CUDA_SUCCESS);
  std::vector<uint32_t> w(n);
  ASSERT_EQ(cuMemcpyDtoH(w.data(), d, b.size()), CUDA_SUCCESS);
  for (auto x : w) ASSERT_EQ(x, 0xdeadbeefu);
  // 2D: 10 rows of 20 x u16 with pitch 100 bytes leave the gaps untouched.
  ASSERT_EQ(cuMemsetD8(d, 0, n * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD2D16(d, 100, 0xbeef, 20, 10), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(b.data(), d, b.size()), CUDA_SUCCESS);
  for (size_t y = 0; y < 10; ++y)
    for (size_t x = 0; x < 100; ++x) {
      uint16_t v;
      if (x % 2) continue;
      std::memcpy(&v, &b[y * 100 + x], 2);
      ASSERT_EQ(v, x < 40 ? 0xbeef : 0) << y << "," << x;
    }
  EXPECT_EQ(cuMemsetD32(d + 2, 1, 4), CUDA_ERROR_INVALID_VALUE);   // misaligned
  EXPECT_EQ(cuMemsetD32(d, 1, n + 1), CUDA_ERROR_INVALID_VALUE);   // one past the end
  EXPECT_EQ(cuMemsetD2D8(d, 10, 1, 11, 2), CUDA_ERROR_INVALID_VALUE);  // width > pitch
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
}

TEST_F(Memory, PinnedRegisteredAndPointerAttributes) {
  void* h = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&h, 8192, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  unsigned flags = 0;
  ASSERT_EQ(cuMemHostGetFlags(&flags, h), CUDA_SUCCESS);
  EXPECT_TRUE(flags & CU_MEMHOSTALLOC_PORTABLE);
  CUdeviceptr hd;
  ASSERT_EQ(cuMemHostGetDevicePointer(&hd, h, 0), CUDA_SUCCESS);
  unsigned type = 0;
  ASSERT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, hd), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_HOST));

  std::vector<char> user(4096);
  ASSERT_EQ(cuMemHostRegister(user.data(), user.size(), 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemHostRegister(user.data(), user.size(), 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(cuMemHostUnregister(user.data()), CUDA_SUCCESS);
  EXPECT_EQ(cuMemHostUnregister(user.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, 5000), CUDA_SUCCESS);
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_EQ(cuMemGetAddressRange(&base, &size, d + 100), CUDA_SUCCESS);
  EXPECT_EQ(base, d);
  EXPECT_EQ(size, 5000u);
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_BUFFER_ID};
  unsigned mt = 0;
  CUcontext pc = nullptr;
  int ord = -1, managed = 7;
  CUdeviceptr start = 0;
  size_t rsize = 0;
  unsigned long long id = 0;
  void* data[] = {&mt, &pc, &ord, &start, &rsize, &managed, &id};
  ASSERT_EQ(cuPointerGetAttributes(7, attrs, data, d + 10), CUDA_SUCCESS);
  EXPECT_EQ(mt, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(pc, ctx0_);
  EXPECT_EQ(ord, 0);
  EXPECT_EQ(start, d);
  EXPECT_EQ(rsize, 5000u);
  EXPECT_EQ(managed, 0);
  EXPECT_NE(id, 0u);
  // Unknown memory: cuPointerGetAttributes answers empty values, cuPointerGetAttribute refuses.
  int local = 0;
  ASSERT_EQ(cuPointerGetAttributes(7, attrs, data, reinterpret_cast<CUdeviceptr>(&local)), CUDA_SUCCESS);
  EXPECT_EQ(mt, 0u);
  EXPECT_EQ(pc, nullptr);
  EXPECT_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(&local)),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(&local)), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(h), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
}

CUmemLocation on_device(int id) {
  CUmemLocation l{};
  l.type = CU_MEM_LOCATION_TYPE_DEVICE;
  l.id = id;
  return l;
}

TEST_F(Memory, ManagedMemory) {
  const size_t f0 = free_mem();
  CUdeviceptr m;
  ASSERT_EQ(cuMemAllocManaged(&m, 3 << 20, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 4u << 20);
  // Host-accessible at the same address.
  std::memset(reinterpret_cast<void*>(m), 0x5a, 3 << 20);
  unsigned char b = 0;
  ASSERT_EQ(cuMemcpyDtoH(&b, m + 12345, 1), CUDA_SUCCESS);
  EXPECT_EQ(b, 0x5a);
  int is_managed = 0;
  ASSERT_EQ(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m), CUDA_SUCCESS);
  EXPECT_EQ(is_managed, 1);
  ASSERT_EQ(cuMemAdvise(m, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, on_device(0)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAdvise(m, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, on_device(1)), CUDA_SUCCESS);
  int rm = 0, pref = 0;
  ASSERT_EQ(cuMemRangeGetAttribute(&rm, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 4096), CUDA_SUCCESS);
  EXPECT_EQ(rm, 1);
  ASSERT_EQ(cuMemRangeGetAttribute(&pref, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 4096), CUDA_SUCCESS);
  EXPECT_EQ(pref, 1);
  EXPECT_EQ(cuMemAllocManaged(&m, 16, 0x10), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(m + (4 << 20), 16, CU_MEM_ADVISE_SET_READ_MOSTLY, on_device(0)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(m), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

TEST_F(Memory, BadInput) {
  CUdeviceptr d;
  EXPECT_EQ(cuMemAlloc(nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAlloc(&d, 1ull << 40), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAlloc(&d, SIZE_MAX), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree(0xdead0000), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemAlloc(&d, 100), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(d + 4), CUDA_ERROR_INVALID_VALUE);  // not the start
  char buf[256] = {};
  EXPECT_EQ(cuMemcpyHtoD(d + 50, buf, 51), CUDA_ERROR_INVALID_VALUE);  // one byte past
  EXPECT_EQ(cuMemcpyHtoD(d, buf, 100), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyDtoH(buf, d + 1, 100), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyDtoD(d, 0x1000, 4), CUDA_ERROR_INVALID_VALUE);  // unknown source
  EXPECT_EQ(cuMemcpyHtoD(d, nullptr, 4), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy2D(nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD8(0x1000, 0, 4), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemGetInfo(nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);  // double free
  EXPECT_EQ(cuMemcpyHtoD(d, buf, 4), CUDA_ERROR_INVALID_VALUE);  // use after free
}

TEST_F(Memory, DestroyedContextFreesItsMemory) {
  CUcontext c;
  ASSERT_EQ(cuCtxCreate(&c, nullptr, 0, 0), CUDA_SUCCESS);  // same device as the primary
  const size_t f0 = free_mem();
  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, 100 << 20), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 100u << 20);
  ASSERT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx0_), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Memory, EightThreadsAllocateCopyAndFree) {
  std::atomic<int> failures{0};
  const size_t f0 = free_mem();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &failures, this] {
      if (cuCtxSetCurrent(t % 2 ? ctx1_ : ctx0_) != CUDA_SUCCESS) { ++failures; return; }
      for (int i = 0; i < 50; ++i) {
        const size_t n = 1024 + 97 * static_cast<size_t>(i + t);
        auto in = pattern(n, static_cast<unsigned>(t * 100 + i));
        std::vector<unsigned char> out(n);
        CUdeviceptr d;
        if (cuMemAlloc(&d, n) != CUDA_SUCCESS) { ++failures; return; }
        if (cuMemcpyHtoD(d, in.data(), n) != CUDA_SUCCESS || cuMemcpyDtoH(out.data(), d, n) != CUDA_SUCCESS ||
            in != out)
          ++failures;
        if (cuMemFree(d) != CUDA_SUCCESS) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(free_mem(), f0);
}

TEST_F(Memory, VmmDoubleMappingShowsTheSameBytes) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t g = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  EXPECT_EQ(g, 2u << 20);
  const size_t f0 = free_mem();
  CUmemGenericAllocationHandle h;
  ASSERT_EQ(cuMemCreate(&h, 2 * g, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 2 * g);
  EXPECT_EQ(cuMemCreate(&h, g + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr va, vb;
  ASSERT_EQ(cuMemAddressReserve(&va, 2 * g, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&vb, 2 * g, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 2 * g, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(vb, 2 * g, 0, h, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va, 2 * g, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // already mapped
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 2 * g, &acc, 1), CUDA_SUCCESS);
  unsigned long long af = 0;
  ASSERT_EQ(cuMemGetAccess(&af, &prop.location, va), CUDA_SUCCESS);
  EXPECT_EQ(af, static_cast<unsigned long long>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  auto in = pattern(3 * g / 2, 9);
  ASSERT_EQ(cuMemcpyHtoD(va + 100, in.data(), in.size()), CUDA_SUCCESS);
  std::vector<unsigned char> out(in.size());
  ASSERT_EQ(cuMemcpyDtoH(out.data(), vb + 100, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  CUmemGenericAllocationHandle back;
  ASSERT_EQ(cuMemRetainAllocationHandle(&back, reinterpret_cast<void*>(vb + 5)), CUDA_SUCCESS);
  EXPECT_EQ(back, h);
  EXPECT_EQ(cuMemRelease(back), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 2 * g);  // still mapped: still charged
  EXPECT_EQ(cuMemUnmap(va, 2 * g), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyDtoH(out.data(), va, 16), CUDA_ERROR_INVALID_VALUE);  // unmapped
  EXPECT_EQ(cuMemUnmap(vb, 2 * g), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuMemAddressFree(va, 2 * g), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(vb, 2 * g), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
}

// The real driver maps whole handles only (an H100 with driver 580 answers a part of one with
// CUDA_ERROR_NOT_SUPPORTED): so does the sim, and the refused map leaves nothing mapped.
TEST_F(Memory, VmmMapsOnlyWholeHandles) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t g = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  CUmemGenericAllocationHandle h;
  ASSERT_EQ(cuMemCreate(&h, 4 * g, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * g, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va, 2 * g, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);      // the first half
  EXPECT_EQ(cuMemMap(va, 2 * g, 2 * g, h, 0), CUDA_ERROR_NOT_SUPPORTED);  // the second half
  EXPECT_EQ(cuMemMap(va, 3 * g, g, h, 0), CUDA_ERROR_NOT_SUPPORTED);      // from an offset to the end
  EXPECT_EQ(cuMemMap(va, 4 * g, g, h, 0), CUDA_ERROR_INVALID_VALUE);      // past the allocation
  unsigned char byte = 0;
  EXPECT_EQ(cuMemcpyDtoH(&byte, va, 1), CUDA_ERROR_INVALID_VALUE);        // nothing was mapped
  ASSERT_EQ(cuMemMap(va, 4 * g, 0, h, 0), CUDA_SUCCESS);                  // the whole handle
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 4 * g, &acc, 1), CUDA_SUCCESS);
  auto in = pattern(4 * g, 5);
  std::vector<unsigned char> out(in.size());
  ASSERT_EQ(cuMemcpyHtoD(va, in.data(), in.size()), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), va, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  EXPECT_EQ(cuMemUnmap(va, 4 * g), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(va, 4 * g), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
}

TEST_F(Memory, AsyncCopiesAndSetsRoundTrip) {
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const size_t n = 1 << 16;
  auto in = pattern(n, 21);
  std::vector<unsigned char> out(n, 0);
  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, n), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(d, 0, n / 4, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(d, in.data(), n, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(out.data(), d, n, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  EXPECT_EQ(cuMemcpyHtoDAsync(d + 1, in.data(), n, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
}

}  // namespace
