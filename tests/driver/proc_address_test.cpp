// The driver surface against the real driver: every export of the toolkit's stub (and no other
// symbol), and every cuGetProcAddress answer recorded from a real 580-series driver on an H100
// (tests/data/real_driver_h100_580.txt, made by tests/gpu/probe/driver_probe.cpp).
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) ADD_FAILURE() << name << " not set";
  return v ? v : "";
}

struct Driver {
  void* handle = dlopen(env_or_die("VGPU_LIBCUDA").c_str(), RTLD_NOW | RTLD_LOCAL);
  ~Driver() { if (handle) dlclose(handle); }
  template <class F> F sym(const char* name) { return reinterpret_cast<F>(dlsym(handle, name)); }
};

std::set<std::string> dynamic_symbols(const std::string& lib) {
  std::set<std::string> out;
  std::string cmd = "nm -D --defined-only '" + lib + "'";
  FILE* p = popen(cmd.c_str(), "r");
  char line[512];
  while (p && fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string addr, type, name;
    if (in >> addr >> type >> name) out.insert(name);
  }
  if (p) pclose(p);
  return out;
}

TEST(DriverSurface, ExportsTheStubSymbolsAndTheInteropOnes) {
  auto ours = dynamic_symbols(env_or_die("VGPU_LIBCUDA"));
  auto stub = dynamic_symbols(env_or_die("VGPU_STUB_LIBCUDA"));
  ASSERT_GT(stub.size(), 500u);
  for (const auto& s : stub) EXPECT_TRUE(ours.count(s)) << "missing export " << s;
  // Beyond the stub: the graphics interop entry points the real driver exports by name (the
  // stub leaves them out; cuGetProcAddress answers with them, ProcAddressMatchesRealDriver).
  auto interop = [](const std::string& s) {
    for (const char* p : {"cuGL", "cuEGL", "cuGraphicsGL", "cuGraphicsEGL", "cuGraphicsVDPAU", "cuVDPAU",
                          "cuGraphicsResourceGetMappedEglFrame", "cuEventCreateFromEGLSync"})
      if (s.rfind(p, 0) == 0) return true;
    return false;
  };
  for (const auto& s : ours) EXPECT_TRUE(stub.count(s) || interop(s)) << "extra export " << s;
}

TEST(DriverSurface, ProcAddressMatchesRealDriver) {
  Driver d;
  ASSERT_NE(d.handle, nullptr) << dlerror();
  auto get = d.sym<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
  ASSERT_NE(get, nullptr);
  std::ifstream in(env_or_die("VGPU_TEST_DATA") + "/real_driver_h100_580.txt");
  ASSERT_TRUE(in.good());
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind, name, symbol;
    int version, result, status;
    unsigned long long flags;
    if (!(f >> kind) || kind != "proc") continue;
    ASSERT_TRUE(f >> name >> version >> flags >> result >> status >> symbol) << line;
    void* fn = reinterpret_cast<void*>(1);
    CUdriverProcAddressQueryResult st{};  // as the probe: untouched when the call fails
    CUresult r = get(name.c_str(), &fn, version, flags, &st);
    EXPECT_EQ(r, result) << line;
    EXPECT_EQ(static_cast<int>(st), status) << line;
    if (symbol == "-") {
      EXPECT_EQ(fn, nullptr) << line;
    } else if (void* exported = dlsym(d.handle, symbol.c_str())) {
      EXPECT_EQ(fn, exported) << line;
    } else {  // the real driver answered with a function it exports by this name: so must we
      ADD_FAILURE() << "answered with " << symbol << ", which is not exported: " << line;
    }
    ++checked;
  }
  EXPECT_GT(checked, 8000);
}

TEST(DriverSurface, ReferenceRequestsFromPyTorchResolve) {
  Driver d;
  auto get = d.sym<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
  // A copy of shared/reference's list, kept in the repository so that a clean clone tests it.
  std::ifstream in(env_or_die("VGPU_TEST_DATA") + "/pytorch-cu130-driver-requests.txt");
  ASSERT_TRUE(in.good());
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string name;
    int version;
    unsigned long long flags;
    if (!(f >> name >> version >> flags) || name.rfind("cu", 0) != 0) continue;
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st{};
    ASSERT_EQ(get(name.c_str(), &fn, version, flags, &st), CUDA_SUCCESS) << line;
    EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS) << line;
    EXPECT_NE(fn, nullptr) << line;
    ++checked;
  }
  EXPECT_GT(checked, 400);
}

TEST(DriverSurface, ProcAddressBadArguments) {
  Driver d;
  auto get = d.sym<decltype(&cuGetProcAddress_v2)>("cuGetProcAddress_v2");
  auto get1 = d.sym<CUresult (*)(const char*, void**, int, cuuint64_t)>("cuGetProcAddress");
  void* fn = nullptr;
  EXPECT_EQ(get(nullptr, &fn, 13000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(get("cuInit", nullptr, 13000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(get1("cuNoSuchThing", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(get1("cuInit", &fn, 13000, 0), CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(d.handle, "cuInit"));
}

TEST(DriverSurface, ErrorNamesMatchRealDriver) {
  Driver d;
  auto name_of = d.sym<decltype(&cuGetErrorName)>("cuGetErrorName");
  auto text_of = d.sym<decltype(&cuGetErrorString)>("cuGetErrorString");
  std::ifstream in(env_or_die("VGPU_TEST_DATA") + "/real_driver_h100_580.txt");
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind, name;
    int code;
    if (!(f >> kind) || kind != "err") continue;
    f >> code >> name;
    const char* ours = nullptr;
    const char* text = nullptr;
    ASSERT_EQ(name_of(static_cast<CUresult>(code), &ours), CUDA_SUCCESS) << line;
    EXPECT_STREQ(ours, name.c_str());
    ASSERT_EQ(text_of(static_cast<CUresult>(code), &text), CUDA_SUCCESS) << line;
    EXPECT_GT(std::string(text).size(), 5u);
    ++checked;
  }
  EXPECT_GT(checked, 100);
  const char* s = "x";
  EXPECT_EQ(name_of(static_cast<CUresult>(12345), &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(text_of(CUDA_SUCCESS, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(DriverSurface, UnimplementedEntryPointsSayNotSupported) {
  Driver d;
  // An entry point vgpu will never implement: graphics interop with a null resource.
  auto f = d.sym<CUresult (*)(CUgraphicsResource)>("cuGraphicsUnregisterResource");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f(nullptr), CUDA_ERROR_NOT_SUPPORTED);
}

}  // namespace
