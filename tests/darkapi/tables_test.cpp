// cuGetExportTable and the private slots, through the built libcuda.so.1 (default cluster:
// 8 virtual H100s). Expected behaviour is the real driver's where it was measured
// (tests/darkapi/data/real_driver_probe_h200_580.txt); each test names what it checks.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <thread>
#include <vector>

#include "front/export_tables/integrity.h"
#include "darkapi_test_util.h"

using namespace darkapi_test;

namespace {

class DarkApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
};

using PrimaryFn = CUresult (*)(CUcontext*, CUdevice);
using IntegrityFn = CUresult (*)(uint32_t, uint64_t, uint64_t*);
using ClsPut = CUresult (*)(CUcontext, void*, void*, void (*)(CUcontext, void*, void*));
using ClsDelete = CUresult (*)(CUcontext, void*);
using ClsGet = CUresult (*)(void**, CUcontext, void*);

const void* const* table(const char* name) {
  const void* const* t = nullptr;
  EXPECT_EQ(lookup(expected(name).uuid, &t), CUDA_SUCCESS) << name;
  return t;
}

// What vgpu's hash must cover: the devices exactly as the public API reports them.
std::vector<vgpu::darkapi::DeviceIdentity> reported_devices() {
  int count = 0;
  EXPECT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
  std::vector<vgpu::darkapi::DeviceIdentity> out;
  for (int d = 0; d < count; ++d) {
    vgpu::darkapi::DeviceIdentity id;
    CUuuid u;
    EXPECT_EQ(cuDeviceGetUuid(&u, d), CUDA_SUCCESS);
    std::memcpy(id.uuid.data(), u.bytes, 16);
    EXPECT_EQ(cuDeviceGetAttribute(&id.pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d), CUDA_SUCCESS);
    EXPECT_EQ(cuDeviceGetAttribute(&id.pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d), CUDA_SUCCESS);
    EXPECT_EQ(cuDeviceGetAttribute(&id.pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d), CUDA_SUCCESS);
    out.push_back(id);
  }
  return out;
}

vgpu::darkapi::IntegrityDigest expected_digest(uint32_t version, uint64_t seconds) {
  const void* const* cudart = table("6bd5fb6c");
  const void* const* integ = table("d4082055");
  vgpu::darkapi::IntegrityRecord r;
  int driver_version = 0;
  EXPECT_EQ(cuDriverGetVersion(&driver_version), CUDA_SUCCESS);
  r.driver_version = static_cast<uint32_t>(driver_version);
  r.version = version;
  r.process = static_cast<uint32_t>(getpid());
  r.thread = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(reinterpret_cast<void*>(pthread_self())));
  r.cudart_table = cudart;
  r.integrity_table = integ;
  r.function = integ[1];
  r.unix_seconds = seconds;
  return vgpu::darkapi::integrity_digest(r, reported_devices());
}

}  // namespace

TEST_F(DarkApi, EveryKnownTableHasTheMeasuredShape) {
  for (const Expected& e : expected_tables()) {
    SCOPED_TRACE(e.name);
    const void* const* t = nullptr;
    ASSERT_EQ(lookup(e.uuid, &t), CUDA_SUCCESS);
    ASSERT_NE(t, nullptr);
    size_t first = 0;
    if (e.size_header) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t[0]), e.size_header);
      EXPECT_EQ(e.size_header, e.slots * sizeof(void*));
      first = 1;
    }
    for (size_t i = first; i < e.slots; ++i) {
      const bool null_in_driver =
          std::find(e.null_slots.begin(), e.null_slots.end(), i) != e.null_slots.end();
      if (null_in_driver) EXPECT_EQ(t[i], nullptr) << "slot " << i;
      else EXPECT_NE(t[i], nullptr) << "slot " << i;
    }
    const void* const* again = nullptr;
    ASSERT_EQ(lookup(e.uuid, &again), CUDA_SUCCESS);
    EXPECT_EQ(again, t) << "a table's address is stable (the integrity hash covers it)";
  }
}

TEST_F(DarkApi, UnknownUuidAndNullArgumentsAreInvalidValue) {
  const uint8_t unknown[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const void* const* t = reinterpret_cast<const void* const*>(0x1);
  EXPECT_EQ(lookup(unknown, &t), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(t, nullptr);
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(nullptr, &id), CUDA_ERROR_INVALID_VALUE);
  const void* p = reinterpret_cast<const void*>(0x1);
  EXPECT_EQ(cuGetExportTable(&p, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(p, reinterpret_cast<const void*>(0x1));
}

TEST_F(DarkApi, SlotsOfUnknownMeaningReturnNotSupported) {
  using Any = CUresult (*)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);
  for (auto [name, index] : {std::pair{"69a28e9f", 19}, {"69a28e9f", 25}, {"f8cff951", 1},
                             {"1734dc26", 16}, {"21318c60", 92}, {"6bd5fb6c", 9}}) {
    Any fn = slot<Any>(name, static_cast<size_t>(index));
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(fn(0, 0, 0, 0, 0, 0), CUDA_ERROR_NOT_SUPPORTED) << name << "[" << index << "]";
  }
}

TEST_F(DarkApi, IntegrityCheckHashesVgpusTablesAndVirtualDevices) {
  auto check = slot<IntegrityFn>("d4082055", 1);
  ASSERT_NE(check, nullptr);
  ASSERT_EQ(reported_devices().size(), 8u);
  const uint64_t now = static_cast<uint64_t>(time(nullptr));
  for (uint32_t version : {13000u, 13001u, 13002u, 13003u, 12082u}) {
    uint64_t out[2] = {0, 0};
    ASSERT_EQ(check(version, now, out), CUDA_SUCCESS);
    const auto want = expected_digest(version, now);
    EXPECT_EQ(out[0], want[0]) << version;
    EXPECT_EQ(out[1], want[1]) << version;
  }
  uint64_t fixed[2];
  ASSERT_EQ(check(13000, 1, fixed), CUDA_SUCCESS);
  EXPECT_EQ(fixed[0], 0x3341181c03cb675cull);
  EXPECT_EQ(fixed[1], 0x8ed383aa1f4cd1e8ull);
  EXPECT_EQ(check(13002, now, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(DarkApi, IntegrityCheckCoversTheCallingThread) {
  auto check = slot<IntegrityFn>("d4082055", 1);
  ASSERT_NE(check, nullptr);
  std::atomic<int> matches{0};
  std::vector<std::thread> threads;
  std::vector<std::array<uint64_t, 2>> results(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 20; ++round) {
        uint64_t out[2];
        if (check(13002, 1700000000 + round, out) != CUDA_SUCCESS) return;
        const auto want = expected_digest(13002, 1700000000 + round);
        if (out[0] != want[0] || out[1] != want[1]) return;
        if (round == 0) results[i] = {out[0], out[1]};
      }
      ++matches;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(matches.load(), 6);
  EXPECT_NE(results[0], results[1]) << "two threads, two hashes";
}

TEST_F(DarkApi, PrimaryContextSlotDoesNotRetain) {
  auto primary = slot<PrimaryFn>("6bd5fb6c", 2);
  ASSERT_NE(primary, nullptr);
  const CUdevice dev = 5;
  unsigned flags = 99;
  int active = 99;
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  ASSERT_EQ(active, 0);
  CUcontext ctx = nullptr;
  ASSERT_EQ(primary(&ctx, dev), CUDA_SUCCESS);
  EXPECT_NE(ctx, nullptr);
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0) << "the real driver leaves the primary context inactive";
  CUcontext again = nullptr;
  ASSERT_EQ(primary(&again, dev), CUDA_SUCCESS);
  EXPECT_EQ(again, ctx);
  CUcontext retained = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&retained, dev), CUDA_SUCCESS);
  EXPECT_EQ(retained, ctx);
  ASSERT_EQ(primary(&again, dev), CUDA_SUCCESS);
  EXPECT_EQ(again, ctx);
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0) << "slot 2 took no reference of its own";

  CUcontext untouched = reinterpret_cast<CUcontext>(0x1);
  EXPECT_EQ(primary(&untouched, 8), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(primary(&untouched, -1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(primary(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(DarkApi, PrimaryContextSlotDistinguishesDevices) {
  auto primary = slot<PrimaryFn>("6bd5fb6c", 2);
  ASSERT_NE(primary, nullptr);
  std::vector<CUcontext> seen;
  for (int d = 0; d < 8; ++d) {
    CUcontext c = nullptr;
    ASSERT_EQ(primary(&c, d), CUDA_SUCCESS);
    CUdevice owner = -1;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&c, d), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxPushCurrent(c), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxGetDevice(&owner), CUDA_SUCCESS);
    EXPECT_EQ(owner, d);
    CUcontext popped;
    EXPECT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    EXPECT_EQ(cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
    EXPECT_EQ(std::find(seen.begin(), seen.end(), c), seen.end());
    seen.push_back(c);
  }
}

TEST_F(DarkApi, ContextLocalStorageBehavesLikeTheRealDriver) {
  auto put = slot<ClsPut>("c693336e", 0);
  auto del = slot<ClsDelete>("c693336e", 1);
  auto get = slot<ClsGet>("c693336e", 2);
  ASSERT_TRUE(put && del && get);
  static int key1, key2;
  void* v = reinterpret_cast<void*>(0x77);

  // No context given and none current.
  ASSERT_EQ(cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(get(&v, nullptr, &key1), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(put(nullptr, &key1, &key2, nullptr), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(put(reinterpret_cast<CUcontext>(0x12345678), &key1, &key2, nullptr),
            CUDA_ERROR_INVALID_CONTEXT);

  // A primary context that is not retained takes entries, which survive its retain.
  CUcontext ctx = nullptr;
  ASSERT_EQ(slot<PrimaryFn>("6bd5fb6c", 2)(&ctx, 4), CUDA_SUCCESS);
  EXPECT_EQ(put(ctx, &key1, reinterpret_cast<void*>(0x1234), nullptr), CUDA_SUCCESS);
  CUcontext retained = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&retained, 4), CUDA_SUCCESS);
  ASSERT_EQ(retained, ctx);
  ASSERT_EQ(get(&v, ctx, &key1), CUDA_SUCCESS);
  EXPECT_EQ(v, reinterpret_cast<void*>(0x1234));

  // Null context = the current one.
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  v = nullptr;
  ASSERT_EQ(get(&v, nullptr, &key1), CUDA_SUCCESS);
  EXPECT_EQ(v, reinterpret_cast<void*>(0x1234));

  // A second put of a present key is refused and changes nothing.
  EXPECT_EQ(put(nullptr, &key1, reinterpret_cast<void*>(0x9999), nullptr), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(get(&v, ctx, &key1), CUDA_SUCCESS);
  EXPECT_EQ(v, reinterpret_cast<void*>(0x1234));

  // Missing keys: an error, and the out-value untouched.
  v = reinterpret_cast<void*>(0x77);
  EXPECT_EQ(get(&v, ctx, &key2), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(v, reinterpret_cast<void*>(0x77));
  EXPECT_EQ(del(ctx, &key2), CUDA_ERROR_INVALID_HANDLE);

  // Delete, then it is gone.
  EXPECT_EQ(del(ctx, &key1), CUDA_SUCCESS);
  EXPECT_EQ(get(&v, ctx, &key1), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(get(nullptr, ctx, &key1), CUDA_ERROR_INVALID_VALUE);

  // Entries are per context.
  CUcontext other = nullptr;
  ASSERT_EQ(slot<PrimaryFn>("6bd5fb6c", 2)(&other, 3), CUDA_SUCCESS);
  EXPECT_EQ(put(ctx, &key2, reinterpret_cast<void*>(0x1), nullptr), CUDA_SUCCESS);
  EXPECT_EQ(put(other, &key2, reinterpret_cast<void*>(0x2), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(get(&v, other, &key2), CUDA_SUCCESS);
  EXPECT_EQ(v, reinterpret_cast<void*>(0x2));
  EXPECT_EQ(del(other, &key2), CUDA_SUCCESS);
  EXPECT_EQ(del(ctx, &key2), CUDA_SUCCESS);

  ASSERT_EQ(cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(4), CUDA_SUCCESS);
}

TEST_F(DarkApi, ContextLocalStorageFromManyThreads) {
  auto put = slot<ClsPut>("c693336e", 0);
  auto del = slot<ClsDelete>("c693336e", 1);
  auto get = slot<ClsGet>("c693336e", 2);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 6), CUDA_SUCCESS);
  static int keys[8][64];
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
      int good = 0;
      for (int i = 0; i < 64; ++i) good += put(nullptr, &keys[t][i], &keys[t][i], nullptr) == CUDA_SUCCESS;
      for (int i = 0; i < 64; ++i) {
        void* v = nullptr;
        good += get(&v, ctx, &keys[t][i]) == CUDA_SUCCESS && v == &keys[t][i];
      }
      for (int i = 0; i < 64; ++i) good += del(ctx, &keys[t][i]) == CUDA_SUCCESS;
      if (good == 3 * 64) ++ok;
      cuCtxSetCurrent(nullptr);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(6), CUDA_SUCCESS);
}

TEST_F(DarkApi, SmallSlotsAnswerLikeTheRealDriver) {
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);

  // tools_tls[2]: the current context.
  CUcontext cur = nullptr;
  ASSERT_EQ(slot<CUresult (*)(CUcontext*)>("42d85a81", 2)(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, ctx);

  // context_checks[2] and [3].
  uint32_t flags = 77;
  const void* detail = reinterpret_cast<const void*>(0x77);
  EXPECT_EQ(slot<CUresult (*)(CUcontext, uint32_t*, const void**)>("263e8860", 2)(ctx, &flags, &detail),
            CUDA_SUCCESS);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(detail, reinterpret_cast<const void*>(0x77));
  EXPECT_EQ(slot<uint32_t (*)()>("263e8860", 3)(), 0u);

  // tools_callback_hooks[2] and [6]: zeroed buffers of the measured sizes.
  for (auto [index, size] : {std::pair{2, 1024u}, {6, 14u}}) {
    void* p = nullptr;
    size_t n = 0;
    slot<void (*)(void**, size_t*)>("a094798c", static_cast<size_t>(index))(&p, &n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(n, size);
    const auto* bytes = static_cast<const uint8_t*>(p);
    EXPECT_TRUE(std::all_of(bytes, bytes + n, [](uint8_t b) { return b == 0; }));
  }

  // context_info[4]: cuCtxGetId.
  unsigned long long id = 0, real = 0;
  ASSERT_EQ(slot<CUresult (*)(CUcontext, unsigned long long*)>("21318c60", 4)(ctx, &id), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetId(ctx, &real), CUDA_SUCCESS);
  EXPECT_EQ(id, real);

  // cudart_interface[12] and [7].
  EXPECT_EQ(slot<CUresult (*)()>("6bd5fb6c", 12)(), CUDA_SUCCESS);
  slot<void (*)(size_t)>("6bd5fb6c", 7)(0);

  ASSERT_EQ(cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST_F(DarkApi, TracingIsOffUnlessAsked) {
  testing::internal::CaptureStderr();
  uint64_t out[2];
  slot<IntegrityFn>("d4082055", 1)(13000, 1, out);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("[vgpu trace"), std::string::npos) << err;
}

TEST_F(DarkApi, LookupsFromManyThreadsAgree) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  const void* const* reference = table("6bd5fb6c");
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      int good = 0;
      for (int i = 0; i < 200; ++i) {
        const void* const* x = nullptr;
        good += lookup(expected("6bd5fb6c").uuid, &x) == CUDA_SUCCESS && x == reference;
      }
      if (good == 200) ++ok;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 8);
}
