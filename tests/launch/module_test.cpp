// Modules, libraries, functions, globals, attributes and occupancy of the sim backend, against
// libcuda.so.1, with kernels nvcc built at build time (KERNELS_CUBIN/_FATBIN/_PTX).
#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

// The first ABI version of cuModuleGetGlobal (32-bit pointer and size), which cuda.h renames.
#undef cuModuleGetGlobal
extern "C" CUresult CUDAAPI cuModuleGetGlobal(unsigned int* dptr, unsigned int* bytes, CUmodule hmod,
                                              const char* name);

namespace {

std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

const std::set<std::string> kKernelNames = {
    "axpy", "by_struct", "no_params", "bounded", "static_shared", "dynamic_shared",
    "sgemm_naive", "mixed", "_Z4fillIfEvPT_S0_i", "_Z4fillIdEvPT_S0_i"};

class Module : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    cubin_ = new std::vector<char>(read_file(KERNELS_CUBIN));
    fatbin_ = new std::vector<char>(read_file(KERNELS_FATBIN));
    ptx_ = new std::vector<char>(read_file(KERNELS_PTX));
    ptx_->push_back('\0');
    ASSERT_GT(cubin_->size(), 1000u);
    ASSERT_GT(fatbin_->size(), 1000u);
  }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  }
  void TearDown() override { cuDevicePrimaryCtxRelease(0); }

  static std::vector<char>* cubin_;
  static std::vector<char>* fatbin_;
  static std::vector<char>* ptx_;
  CUcontext ctx_ = nullptr;
};
std::vector<char>* Module::cubin_ = nullptr;
std::vector<char>* Module::fatbin_ = nullptr;
std::vector<char>* Module::ptx_ = nullptr;

void expect_all_kernels(CUmodule m) {
  unsigned int n = 0;
  ASSERT_EQ(cuModuleGetFunctionCount(&n, m), CUDA_SUCCESS);
  ASSERT_EQ(n, kKernelNames.size());
  std::vector<CUfunction> fns(n);
  ASSERT_EQ(cuModuleEnumerateFunctions(fns.data(), n, m), CUDA_SUCCESS);
  std::set<std::string> names;
  for (CUfunction f : fns) {
    const char* name = nullptr;
    ASSERT_EQ(cuFuncGetName(&name, f), CUDA_SUCCESS);
    names.insert(name);
    CUmodule owner = nullptr;
    ASSERT_EQ(cuFuncGetModule(&owner, f), CUDA_SUCCESS);
    EXPECT_EQ(owner, m);
  }
  EXPECT_EQ(names, kKernelNames);
  EXPECT_EQ(cuModuleEnumerateFunctions(fns.data(), n - 1, m), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Module, LoadsEveryForm) {
  for (const std::vector<char>* image : {cubin_, fatbin_, ptx_}) {
    CUmodule m = nullptr;
    ASSERT_EQ(cuModuleLoadData(&m, image->data()), CUDA_SUCCESS);
    expect_all_kernels(m);
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, m, "axpy"), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
  }
  CUmodule m = nullptr;
  ASSERT_EQ(cuModuleLoadFatBinary(&m, fatbin_->data()), CUDA_SUCCESS);
  expect_all_kernels(m);
  cuModuleUnload(m);
  ASSERT_EQ(cuModuleLoad(&m, KERNELS_CUBIN), CUDA_SUCCESS);
  expect_all_kernels(m);
  cuModuleUnload(m);
  CUjit_option opts[2] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  char log[64] = "untouched";
  void* vals[2] = {log, reinterpret_cast<void*>(sizeof log)};
  ASSERT_EQ(cuModuleLoadDataEx(&m, ptx_->data(), 2, opts, vals), CUDA_SUCCESS);
  EXPECT_STREQ(log, "");
  cuModuleUnload(m);
  CUmoduleLoadingMode mode;
  EXPECT_EQ(cuModuleGetLoadingMode(&mode), CUDA_SUCCESS);
}

TEST_F(Module, RefusesMissingFilesNullsAndNoContext) {
  CUmodule m = nullptr;
  EXPECT_EQ(cuModuleLoad(&m, "/nonexistent/kernels.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
  EXPECT_EQ(cuModuleLoadData(&m, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleLoadData(nullptr, cubin_->data()), CUDA_ERROR_INVALID_VALUE);
  CUlibrary lib = nullptr;
  EXPECT_EQ(cuLibraryLoadFromFile(&lib, "/nonexistent/x.fatbin", nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_ERROR_FILE_NOT_FOUND);
  std::thread([&] {
    CUmodule mm = nullptr;
    EXPECT_EQ(cuModuleLoadData(&mm, cubin_->data()), CUDA_ERROR_INVALID_CONTEXT);
  }).join();
}

TEST_F(Module, ParamInfoFromTheBinary) {
  for (const std::vector<char>* image : {cubin_, ptx_}) {
    CUmodule m = nullptr;
    ASSERT_EQ(cuModuleLoadData(&m, image->data()), CUDA_SUCCESS);
    struct Expect {
      const char* name;
      std::vector<std::pair<size_t, size_t>> params;
    };
    const Expect cases[] = {
        {"axpy", {{0, 4}, {8, 8}, {16, 8}, {24, 4}}},
        {"by_struct", {{0, 32}, {32, 8}}},
        {"no_params", {}},
        {"mixed", {{0, 1}, {8, 8}, {16, 2}, {24, 8}, {32, 8}}},
        {"_Z4fillIdEvPT_S0_i", {{0, 8}, {8, 8}, {16, 4}}},
    };
    for (const Expect& e : cases) {
      CUfunction f = nullptr;
      ASSERT_EQ(cuModuleGetFunction(&f, m, e.name), CUDA_SUCCESS) << e.name;
      for (size_t i = 0; i < e.params.size(); ++i) {
        size_t off = 99, size = 99;
        ASSERT_EQ(cuFuncGetParamInfo(f, i, &off, &size), CUDA_SUCCESS) << e.name << " " << i;
        EXPECT_EQ(off, e.params[i].first) << e.name << " " << i;
        EXPECT_EQ(size, e.params[i].second) << e.name << " " << i;
      }
      size_t off, size;
      EXPECT_EQ(cuFuncGetParamInfo(f, e.params.size(), &off, &size), CUDA_ERROR_INVALID_VALUE);
    }
    cuModuleUnload(m);
  }
}

TEST_F(Module, FunctionAttributes) {
  CUmodule m = nullptr;
  ASSERT_EQ(cuModuleLoadData(&m, cubin_->data()), CUDA_SUCCESS);
  CUfunction bounded, shared, axpy;
  ASSERT_EQ(cuModuleGetFunction(&bounded, m, "bounded"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&shared, m, "static_shared"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&axpy, m, "axpy"), CUDA_SUCCESS);
  int v = 0;
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, bounded), CUDA_SUCCESS);
  EXPECT_EQ(v, 128);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, axpy), CUDA_SUCCESS);
  EXPECT_EQ(v, 1024);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, shared), CUDA_SUCCESS);
  EXPECT_EQ(v, 8192);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, axpy), CUDA_SUCCESS);
  EXPECT_EQ(v, 90);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, axpy), CUDA_SUCCESS);
  EXPECT_GT(v, 0);
  EXPECT_LE(v, 255);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, axpy), CUDA_SUCCESS);
  EXPECT_GE(v, 16);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared), CUDA_SUCCESS);
  EXPECT_EQ(v, 49152 - 8192);
  EXPECT_EQ(cuFuncSetAttribute(shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared), CUDA_SUCCESS);
  EXPECT_EQ(v, 100000);
  EXPECT_EQ(cuFuncSetAttribute(shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232448 - 8192 + 1),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetAttribute(shared, CU_FUNC_ATTRIBUTE_NUM_REGS, 3), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncGetAttribute(&v, static_cast<CUfunction_attribute>(999), axpy), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetCacheConfig(axpy, CU_FUNC_CACHE_PREFER_SHARED), CUDA_SUCCESS);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(cuFuncSetSharedMemConfig(axpy, CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE), CUDA_SUCCESS);
#pragma GCC diagnostic pop
  CUfunctionLoadingState state;
  EXPECT_EQ(cuFuncIsLoaded(&state, axpy), CUDA_SUCCESS);
  EXPECT_EQ(state, CU_FUNCTION_LOADING_STATE_LOADED);
  EXPECT_EQ(cuFuncLoad(axpy), CUDA_SUCCESS);
  cuModuleUnload(m);
}

// A zero-initialised global is backed by host memory only where written (issue 23: host memory
// per rank): the sim backend's device pointer is the host address of its backing, so mincore()
// tells which pages exist. 8 MiB of zeros, then 4 bytes written.
TEST_F(Module, ZeroGlobalsCostNoHostMemory) {
  const char* ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .global .align 4 .b8 g_zero[8388608];
.visible .global .align 4 .u32 g_init = 7;
.visible .entry nothing() { ret; }
)";
  CUmodule m = nullptr;
  ASSERT_EQ(cuModuleLoadData(&m, ptx), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  size_t bytes = 0;
  ASSERT_EQ(cuModuleGetGlobal_v2(&p, &bytes, m, "g_zero"), CUDA_SUCCESS);
  ASSERT_EQ(bytes, size_t{8} << 20);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto resident = [&] {
    const uintptr_t first = p / page * page;
    std::vector<unsigned char> v((p + bytes - first + page - 1) / page);
    if (mincore(reinterpret_cast<void*>(first), v.size() * page, v.data()) != 0) return size_t{SIZE_MAX};
    size_t n = 0;
    for (unsigned char c : v) n += c & 1;
    return n;
  };
  EXPECT_EQ(resident(), 0u);
  const uint32_t word = 0xabcd;
  ASSERT_EQ(cuMemcpyHtoD_v2(p + bytes / 2, &word, 4), CUDA_SUCCESS);
  EXPECT_EQ(resident(), 1u);
  uint32_t back = 1, zero = 1;
  ASSERT_EQ(cuMemcpyDtoH_v2(&back, p + bytes / 2, 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH_v2(&zero, p + bytes - 4, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, word);
  EXPECT_EQ(zero, 0u);
  ASSERT_EQ(cuModuleGetGlobal_v2(&p, &bytes, m, "g_init"), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH_v2(&back, p, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 7u);
  cuModuleUnload(m);
}

TEST_F(Module, GlobalsHoldTheirInitialValues) {
  CUmodule m = nullptr;
  ASSERT_EQ(cuModuleLoadData(&m, fatbin_->data()), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  size_t bytes = 0;
  ASSERT_EQ(cuModuleGetGlobal_v2(&p, &bytes, m, "g_counter"), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 4u);
  int counter = 0;
  ASSERT_EQ(cuMemcpyDtoH_v2(&counter, p, 4), CUDA_SUCCESS);
  EXPECT_EQ(counter, 42);
  ASSERT_EQ(cuModuleGetGlobal_v2(&p, &bytes, m, "c_table"), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 16u);
  float table[4] = {};
  ASSERT_EQ(cuMemcpyDtoH_v2(table, p, 16), CUDA_SUCCESS);
  EXPECT_EQ(table[0], 1.5f);
  EXPECT_EQ(table[3], 4.5f);
  ASSERT_EQ(cuModuleGetGlobal_v2(&p, &bytes, m, "g_array"), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 1024u);
  std::vector<float> arr(256, 1.0f);
  ASSERT_EQ(cuMemcpyDtoH_v2(arr.data(), p, 1024), CUDA_SUCCESS);
  EXPECT_EQ(*std::max_element(arr.begin(), arr.end()), 0.0f);
  // Writes stick; the old API narrows.
  counter = 7;
  ASSERT_EQ(cuModuleGetGlobal_v2(&p, nullptr, m, "g_counter"), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD_v2(p, &counter, 4), CUDA_SUCCESS);
  unsigned int small = 0;
  unsigned int p1 = 0;
  EXPECT_EQ(cuModuleGetGlobal(&p1, &small, m, "g_counter"), CUDA_SUCCESS);
  EXPECT_EQ(small, 4u);
  EXPECT_EQ(cuModuleGetGlobal_v2(&p, &bytes, m, "nope"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleUnload(m), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetGlobal_v2(&p, &bytes, m, "g_counter"), CUDA_ERROR_INVALID_HANDLE);
}

// cuDNN loads cubins with CU_LIBRARY_BINARY_IS_PRESERVED, a flag, and no value array: accepted
// (as the real driver does). An option that takes a value still needs the array.
TEST_F(Module, LibraryFlagOptionsNeedNoValueArray) {
  CUlibrary lib = nullptr;
  CUlibraryOption preserved = CU_LIBRARY_BINARY_IS_PRESERVED;
  ASSERT_EQ(cuLibraryLoadData(&lib, fatbin_->data(), nullptr, nullptr, 0, &preserved, nullptr, 1), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  CUlibraryOption table = CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE;
  EXPECT_EQ(cuLibraryLoadData(&lib, fatbin_->data(), nullptr, nullptr, 0, &table, nullptr, 1),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLibraryLoadData(&lib, fatbin_->data(), nullptr, nullptr, 0, nullptr, nullptr, 1),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Module, Libraries) {
  CUlibrary lib = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&lib, fatbin_->data(), nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  unsigned int n = 0;
  ASSERT_EQ(cuLibraryGetKernelCount(&n, lib), CUDA_SUCCESS);
  EXPECT_EQ(n, kKernelNames.size());
  std::vector<CUkernel> kernels(n);
  ASSERT_EQ(cuLibraryEnumerateKernels(kernels.data(), n, lib), CUDA_SUCCESS);
  std::set<std::string> names;
  for (CUkernel k : kernels) {
    const char* name = nullptr;
    ASSERT_EQ(cuKernelGetName(&name, k), CUDA_SUCCESS);
    names.insert(name);
    CUlibrary owner = nullptr;
    EXPECT_EQ(cuKernelGetLibrary(&owner, k), CUDA_SUCCESS);
    EXPECT_EQ(owner, lib);
  }
  EXPECT_EQ(names, kKernelNames);

  CUkernel k = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&k, lib, "axpy"), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cuLibraryGetKernel(&k, lib, "static_shared"), CUDA_SUCCESS);
  size_t off = 0, size = 0;
  EXPECT_EQ(cuKernelGetParamInfo(k, 1, &off, &size), CUDA_SUCCESS);
  EXPECT_EQ(off, 8u);
  EXPECT_EQ(size, 4u);
  // A per-device attribute set on the kernel shows on its function in that device's context.
  EXPECT_EQ(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536, k, 0), CUDA_SUCCESS);
  int v = 0;
  EXPECT_EQ(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 0), CUDA_SUCCESS);
  EXPECT_EQ(v, 65536);
  EXPECT_EQ(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 1), CUDA_SUCCESS);
  EXPECT_EQ(v, 49152 - 8192);
  EXPECT_EQ(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k, 99), CUDA_ERROR_INVALID_DEVICE);
  CUfunction f = nullptr, f2 = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
  ASSERT_EQ(cuKernelGetFunction(&f2, k), CUDA_SUCCESS);
  EXPECT_EQ(f, f2);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f), CUDA_SUCCESS);
  EXPECT_EQ(v, 65536);
  // A CUkernel passed where a CUfunction is expected resolves in the current context.
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, reinterpret_cast<CUfunction>(k)),
            CUDA_SUCCESS);
  EXPECT_EQ(v, 8192);
  CUmodule m = nullptr, fm = nullptr;
  ASSERT_EQ(cuLibraryGetModule(&m, lib), CUDA_SUCCESS);
  ASSERT_EQ(cuFuncGetModule(&fm, f), CUDA_SUCCESS);
  EXPECT_EQ(m, fm);
  EXPECT_EQ(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);  // the library owns it

  CUdeviceptr p = 0;
  size_t bytes = 0;
  ASSERT_EQ(cuLibraryGetGlobal(&p, &bytes, lib, "g_counter"), CUDA_SUCCESS);
  int counter = 0;
  ASSERT_EQ(cuMemcpyDtoH_v2(&counter, p, 4), CUDA_SUCCESS);
  EXPECT_EQ(counter, 42);
  EXPECT_EQ(cuLibraryGetManaged(&p, &bytes, lib, "g_counter"), CUDA_ERROR_NOT_FOUND);

  // Another device materialises its own copy.
  CUcontext ctx1 = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx1, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
  CUfunction f1 = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&f1, k), CUDA_SUCCESS);
  EXPECT_NE(f1, f);
  CUdeviceptr p1 = 0;
  ASSERT_EQ(cuLibraryGetGlobal(&p1, &bytes, lib, "g_counter"), CUDA_SUCCESS);
  EXPECT_NE(p1, p);
  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  cuDevicePrimaryCtxRelease(1);

  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuKernelGetFunction(&f, k), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f), CUDA_ERROR_INVALID_HANDLE);

  ASSERT_EQ(cuLibraryLoadFromFile(&lib, KERNELS_PTX, nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryGetKernelCount(&n, lib), CUDA_SUCCESS);
  EXPECT_EQ(n, kKernelNames.size());
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
}

TEST_F(Module, Occupancy) {
  CUmodule m = nullptr;
  ASSERT_EQ(cuModuleLoadData(&m, cubin_->data()), CUDA_SUCCESS);
  CUfunction f = nullptr, bounded = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&f, m, "no_params"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&bounded, m, "bounded"), CUDA_SUCCESS);
  int blocks = 0;
  // 2048 threads per SM: 8 blocks of 256.
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0), CUDA_SUCCESS);
  EXPECT_EQ(blocks, 8);
  // 32 blocks per SM at most.
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 32, 0), CUDA_SUCCESS);
  EXPECT_EQ(blocks, 32);
  // 100 KiB + 1 KiB reserved per block out of 228 KiB: 2 blocks.
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, 256, 102400, 0), CUDA_SUCCESS);
  EXPECT_EQ(blocks, 2);
  ASSERT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 300000), CUDA_SUCCESS);
  EXPECT_EQ(blocks, 0);
  int min_grid = 0, block = 0;
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f, nullptr, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(min_grid, 2 * 132);
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, bounded, nullptr, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(block, 128);
  EXPECT_EQ(min_grid, 16 * 132);
  // Under a limit of 96: 96 threads give 21 blocks (2016 threads), 64 give 32 blocks (2048).
  ASSERT_EQ(cuOccupancyMaxPotentialBlockSizeWithFlags(&min_grid, &block, f, nullptr, 0, 96, 0), CUDA_SUCCESS);
  EXPECT_EQ(block, 64);
  EXPECT_EQ(min_grid, 32 * 132);
  size_t smem = 0;
  ASSERT_EQ(cuOccupancyAvailableDynamicSMemPerBlock(&smem, f, 2, 256), CUDA_SUCCESS);
  EXPECT_EQ(smem, 233472u / 2);  // as an H200 answered (reserved memory not taken off)
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, reinterpret_cast<CUfunction>(0x1234), 256, 0),
            CUDA_ERROR_INVALID_HANDLE);
  cuModuleUnload(m);
}

TEST_F(Module, CorruptImagesAreRefusedNeverCrash) {
  CUmodule m = nullptr;
  std::string garbage(4096, 'x');
  for (size_t i = 0; i < garbage.size(); i += 7) garbage[i] = static_cast<char>('a' + i % 26);
  const CUresult g = cuModuleLoadData(&m, garbage.c_str());
  EXPECT_TRUE(g == CUDA_ERROR_INVALID_IMAGE || g == CUDA_ERROR_INVALID_PTX) << g;

  // Truncated files: the extent is known, every truncation is refused.
  const std::string path = ::testing::TempDir() + "vgpu_truncated_" + std::to_string(::getpid());
  for (const std::vector<char>* image : {cubin_, fatbin_}) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{8}, size_t{16}, size_t{63}, size_t{64}, size_t{100},
                       image->size() / 4, image->size() / 2, image->size() - 100, image->size() - 1}) {
      std::ofstream(path, std::ios::binary).write(image->data(), static_cast<std::streamsize>(len));
      EXPECT_EQ(cuModuleLoad(&m, path.c_str()), CUDA_ERROR_INVALID_IMAGE) << "length " << len;
      CUlibrary lib = nullptr;
      EXPECT_EQ(cuLibraryLoadFromFile(&lib, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                CUDA_ERROR_INVALID_IMAGE) << "length " << len;
    }
  }

  // In memory the extent comes from the image's own headers (as with the real driver), so the
  // buffer keeps the full size: a prefix followed by zeros. Refused or loaded, never a crash.
  for (const std::vector<char>* image : {cubin_, fatbin_}) {
    std::vector<char> buf(image->size());
    for (size_t len = 0; len < image->size(); len += std::max<size_t>(1, image->size() / 97)) {
      std::fill(buf.begin(), buf.end(), 0);
      std::copy(image->begin(), image->begin() + static_cast<long>(len), buf.begin());
      const CUresult rc = cuModuleLoadData(&m, buf.data());
      if (rc == CUDA_SUCCESS) {
        cuModuleUnload(m);
      } else {
        EXPECT_TRUE(rc == CUDA_ERROR_INVALID_IMAGE || rc == CUDA_ERROR_NO_BINARY_FOR_GPU) << rc;
      }
    }
  }
  // Flipped bytes, through files (a flipped size field must not make the parser read past what
  // the caller owns, and a file's size is known).
  for (const std::vector<char>* image : {cubin_, fatbin_}) {
    unsigned seed = 12345;
    for (int trial = 0; trial < 150; ++trial) {
      std::vector<char> buf = *image;
      for (int flips = 0; flips < 1 + trial % 4; ++flips) {
        seed = seed * 1103515245 + 12345;
        buf[(seed >> 8) % buf.size()] ^= static_cast<char>(1 + (seed >> 3) % 255);
      }
      std::ofstream(path, std::ios::binary).write(buf.data(), static_cast<std::streamsize>(buf.size()));
      const CUresult rc = cuModuleLoad(&m, path.c_str());
      if (rc == CUDA_SUCCESS) cuModuleUnload(m);
      CUlibrary lib = nullptr;
      if (cuLibraryLoadFromFile(&lib, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0) == CUDA_SUCCESS)
        cuLibraryUnload(lib);
    }
  }
  std::remove(path.c_str());
}

TEST_F(Module, MadeUpHandles) {
  CUfunction fake = reinterpret_cast<CUfunction>(0xdeadbeef);
  CUmodule fake_mod = reinterpret_cast<CUmodule>(0x1000);
  int v = 0;
  const char* name = nullptr;
  size_t a, b;
  CUfunction f;
  unsigned int n;
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, fake), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetName(&name, fake), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetParamInfo(fake, 0, &a, &b), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncSetAttribute(fake, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleGetFunction(&f, fake_mod, "axpy"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleGetFunctionCount(&n, fake_mod), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(fake_mod), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLibraryUnload(reinterpret_cast<CUlibrary>(0x10)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuKernelGetFunction(&f, reinterpret_cast<CUkernel>(0x10)), CUDA_ERROR_INVALID_HANDLE);
  // A module handle passed as a function is not found either.
  CUmodule m = nullptr;
  ASSERT_EQ(cuModuleLoadData(&m, cubin_->data()), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncGetName(&name, reinterpret_cast<CUfunction>(m)), CUDA_ERROR_INVALID_HANDLE);
  cuModuleUnload(m);
}

TEST_F(Module, ManyThreadsLoadResolveAndUnload) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      CUcontext ctx = nullptr;
      if (cuDevicePrimaryCtxRetain(&ctx, t % 8) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        ++failures;
        return;
      }
      for (int i = 0; i < 20; ++i) {
        CUmodule m = nullptr;
        CUfunction f = nullptr;
        int v = 0;
        if (cuModuleLoadData(&m, (i % 2 ? cubin_ : fatbin_)->data()) != CUDA_SUCCESS) ++failures;
        if (cuModuleGetFunction(&f, m, "axpy") != CUDA_SUCCESS) ++failures;
        if (cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f) != CUDA_SUCCESS) ++failures;
        if (cuModuleUnload(m) != CUDA_SUCCESS) ++failures;
      }
      cuDevicePrimaryCtxRelease(t % 8);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// Modules go with their context: a destroyed created context or a reset primary context unloads
// its modules (their handles and functions become invalid) and gives their globals' memory back;
// a library stays loaded and materialises afresh in the next context.
TEST_F(Module, ModulesGoWithTheirContext) {
  const int dev = 3;  // a device no other test here uses
  size_t before = 0, total = 0, loaded = 0, after = 0;
  CUcontext c = nullptr;
  ASSERT_EQ(cuCtxCreate(&c, nullptr, 0, dev), CUDA_SUCCESS);  // pushed: current on this thread
  ASSERT_EQ(cuMemGetInfo_v2(&before, &total), CUDA_SUCCESS);
  CUmodule m = nullptr;
  CUfunction f = nullptr;
  ASSERT_EQ(cuModuleLoadData(&m, fatbin_->data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&f, m, "axpy"), CUDA_SUCCESS);
  CUlibrary lib = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&lib, fatbin_->data(), nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel k = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&k, lib, "axpy"), CUDA_SUCCESS);
  CUfunction kf = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&kf, k), CUDA_SUCCESS);  // materialised in `c`
  CUdeviceptr g = 0;
  ASSERT_EQ(cuLibraryGetGlobal(&g, nullptr, lib, "g_counter"), CUDA_SUCCESS);
  const int seven = 7;
  ASSERT_EQ(cuMemcpyHtoD_v2(g, &seven, 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo_v2(&loaded, &total), CUDA_SUCCESS);
  EXPECT_LT(loaded, before);  // two modules' globals
  ASSERT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);

  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  const char* name = nullptr;
  EXPECT_EQ(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetName(&name, kf), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleGetFunction(&f, m, "axpy"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);  // already gone, frees nothing twice
  EXPECT_EQ(cuKernelGetName(&name, k), CUDA_SUCCESS);      // the library itself stays

  // A new context on the device: everything was given back; the library's global is fresh.
  ASSERT_EQ(cuCtxCreate(&c, nullptr, 0, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo_v2(&after, &total), CUDA_SUCCESS);
  EXPECT_EQ(after, before);
  CUfunction kf2 = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&kf2, k), CUDA_SUCCESS);
  EXPECT_NE(kf2, kf);
  ASSERT_EQ(cuLibraryGetGlobal(&g, nullptr, lib, "g_counter"), CUDA_SUCCESS);
  int counter = 0;
  ASSERT_EQ(cuMemcpyDtoH_v2(&counter, g, 4), CUDA_SUCCESS);
  EXPECT_EQ(counter, 42);
  ASSERT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);

  // A primary context reset does the same.
  CUcontext primary = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo_v2(&before, &total), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleLoadData(&m, cubin_->data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&f, m, "axpy"), CUDA_SUCCESS);
  ASSERT_EQ(cuKernelGetFunction(&kf, k), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo_v2(&loaded, &total), CUDA_SUCCESS);
  EXPECT_LT(loaded, before);
  ASSERT_EQ(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetName(&name, kf), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo_v2(&after, &total), CUDA_SUCCESS);
  EXPECT_EQ(after, before);
  ASSERT_EQ(cuKernelGetFunction(&kf2, k), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncGetName(&name, kf2), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
}

}  // namespace
