// Test helpers: load the built libnccl-net-vgpu.so the way NCCL does (dlopen + dlsym of the
// versioned structs) and drive it through the ABI: connect pairs, post, poll with a deadline so
// that a bug fails a test instead of hanging it.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "abi/net_v10.h"
#include "abi/net_v11.h"
#include "abi/net_v12.h"
#include "abi/net_v8.h"
#include "abi/net_v9.h"
#include "contracts/nccl_plugin.h"

namespace vtest {

struct Plugin {
  void* dl = nullptr;
  ncclNet_v8_t* v8 = nullptr;
  ncclNet_v9_t* v9 = nullptr;
  ncclNet_v10_t* v10 = nullptr;
  ncclNet_v11_t* v11 = nullptr;
  ncclNet_v12_t* v12 = nullptr;
  // The contract's handshake, and the plugin's table as a reader gets it (no driver side).
  vgpu_nccl_plugin_contract_fn handshake = nullptr;
  vgpu_nccl_plugin_side side{};
  void (*set_thread_gpu)(int) = nullptr;
  int (*last_completion)(vgpu_nccl_completion*) = nullptr;
  int (*flow_interval)(uint64_t, double*, double*) = nullptr;
  int (*latest_completion)(int, double*) = nullptr;
  void* ctx = nullptr;  // from v12 init
};

inline Plugin& plugin() {
  static Plugin p = [] {
    Plugin q;
    q.dl = dlopen(VGPU_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (q.dl == nullptr) return q;
    q.v8 = static_cast<ncclNet_v8_t*>(dlsym(q.dl, "ncclNetPlugin_v8"));
    q.v9 = static_cast<ncclNet_v9_t*>(dlsym(q.dl, "ncclNetPlugin_v9"));
    q.v10 = static_cast<ncclNet_v10_t*>(dlsym(q.dl, "ncclNetPlugin_v10"));
    q.v11 = static_cast<ncclNet_v11_t*>(dlsym(q.dl, "ncclNetPlugin_v11"));
    q.v12 = static_cast<ncclNet_v12_t*>(dlsym(q.dl, "ncclNetPlugin_v12"));
    q.handshake = reinterpret_cast<vgpu_nccl_plugin_contract_fn>(dlsym(q.dl, VGPU_NCCL_PLUGIN_CONTRACT_SYMBOL));
    q.side.size = sizeof q.side;
    q.side.version = VGPU_NCCL_CONTRACT_VERSION;
    if (q.handshake != nullptr && q.handshake(VGPU_NCCL_CONTRACT_VERSION, nullptr, &q.side) == 0) {
      q.set_thread_gpu = q.side.set_thread_gpu;
      q.last_completion = q.side.last_completion;
      q.flow_interval = q.side.flow_interval;
      q.latest_completion = q.side.latest_completion;
    }
    if (q.v12 != nullptr) {
      ncclNetCommConfig_v12_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      if (q.v12->init(&q.ctx, 1, &cfg, nullptr, nullptr) != ncclSuccess) q.ctx = nullptr;
    }
    return q;
  }();
  return p;
}

inline const ncclNet_v12_t& net() { return *plugin().v12; }

// A test playing the vgpu driver's part of the contract: its clock hooks, handed over by a
// handshake as the driver does (each call hands over both; nullptr: none).
using ClockFn = double (*)(int gpu);
using LaunchClockFn = double (*)(int gpu, uint64_t launch);
struct DriverClocks {
  ClockFn gpu = nullptr;
  LaunchClockFn launch = nullptr;
  int (*global_gpu)(int* gpu) = nullptr;  // the contract's current_global_gpu
  void (*own_work_begin)() = nullptr;     // the contract's own_work_begin / own_work_end
  void (*own_work_end)() = nullptr;
  // The contract's nccl_group_begin / _operation / _launch / _end.
  void (*group_begin)() = nullptr;
  void (*group_operation)(uint64_t, int) = nullptr;
  void (*group_launch)() = nullptr;
  void (*group_end)() = nullptr;
  // The contract's launch_tasks_done.
  void (*tasks_done)(uint64_t) = nullptr;
  // The contract's gpu_floor.
  double (*floor)(int gpu) = nullptr;
};
inline DriverClocks& driver_clocks() {
  static DriverClocks c;
  return c;
}
inline bool hand_over_clocks() {
  static vgpu_nccl_driver_side d;  // one driver: the plugin knows its driver by this address
  d = vgpu_nccl_driver_side{sizeof d,
                            VGPU_NCCL_CONTRACT_VERSION,
                            driver_clocks().gpu,
                            driver_clocks().launch,
                            nullptr,
                            driver_clocks().global_gpu,
                            driver_clocks().own_work_begin,
                            driver_clocks().own_work_end,
                            driver_clocks().group_begin,
                            driver_clocks().group_operation,
                            driver_clocks().group_launch,
                            driver_clocks().group_end,
                            driver_clocks().tasks_done,
                            driver_clocks().floor};
  vgpu_nccl_plugin_side out{};
  out.size = sizeof out;
  out.version = VGPU_NCCL_CONTRACT_VERSION;
  return plugin().handshake != nullptr && plugin().handshake(VGPU_NCCL_CONTRACT_VERSION, &d, &out) == 0;
}
inline void set_clock(ClockFn fn) {
  driver_clocks().gpu = fn;
  EXPECT_TRUE(hand_over_clocks());
}
inline void set_launch_clock(LaunchClockFn fn) {
  driver_clocks().launch = fn;
  EXPECT_TRUE(hand_over_clocks());
}

constexpr auto kDeadline = std::chrono::seconds(20);

// Listen / connect / accept in one thread (both calls may return null comms for a while).
struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

inline bool connect_pair(Pair* p, int dev = 0) {
  const auto& n = net();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  if (n.listen(plugin().ctx, dev, handle, &p->listen) != ncclSuccess) return false;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (p->send == nullptr || p->recv == nullptr) {
    if (std::chrono::steady_clock::now() > end) return false;
    if (p->send == nullptr &&
        n.connect(plugin().ctx, dev, handle, &p->send, nullptr) != ncclSuccess) return false;
    if (p->recv == nullptr && n.accept(p->listen, &p->recv, nullptr) != ncclSuccess) return false;
  }
  return true;
}

// A pair whose sender is global GPU `src_gpu` and receiver `dst_gpu` (ranks as threads: the
// per-thread GPU of the plugin's C interface).
inline Pair gpu_pair(int src_gpu, int dst_gpu) {
  const auto& n = net();
  Pair p;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  plugin().set_thread_gpu(dst_gpu);
  EXPECT_EQ(n.listen(plugin().ctx, 0, handle, &p.listen), ncclSuccess);
  plugin().set_thread_gpu(src_gpu);
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while ((p.send == nullptr || p.recv == nullptr) && std::chrono::steady_clock::now() < end) {
    if (p.send == nullptr) {
      EXPECT_EQ(n.connect(plugin().ctx, 0, handle, &p.send, nullptr), ncclSuccess);
    }
    if (p.recv == nullptr) {
      EXPECT_EQ(n.accept(p.listen, &p.recv, nullptr), ncclSuccess);
    }
  }
  plugin().set_thread_gpu(-1);
  return p;
}

inline void close_pair(Pair& p) {
  const auto& n = net();
  if (p.send) {
    EXPECT_EQ(n.closeSend(p.send), ncclSuccess);
  }
  if (p.recv) {
    EXPECT_EQ(n.closeRecv(p.recv), ncclSuccess);
  }
  if (p.listen) {
    EXPECT_EQ(n.closeListen(p.listen), ncclSuccess);
  }
  p = Pair{};
}

// Polls every request until all are done; returns the first error, or ncclInternalError after
// the deadline. `sizes[i]` receives request i's sizes (up to 8 each).
inline ncclResult_t wait_all(std::vector<void*> reqs, std::vector<std::vector<int>>* sizes = nullptr,
                             std::function<ncclResult_t(void*, int*, int*)> test = nullptr) {
  if (!test) test = net().test;
  if (sizes) sizes->assign(reqs.size(), std::vector<int>(8, -1));
  std::vector<bool> done(reqs.size(), false);
  auto end = std::chrono::steady_clock::now() + kDeadline;
  size_t left = reqs.size();
  while (left > 0) {
    if (std::chrono::steady_clock::now() > end) return ncclInternalError;
    size_t before = left;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (done[i]) continue;
      int d = 0;
      int tmp[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
      ncclResult_t rc = test(reqs[i], &d, tmp);
      if (rc != ncclSuccess) return rc;
      if (d) {
        done[i] = true;
        --left;
        if (sizes) (*sizes)[i].assign(tmp, tmp + 8);
      }
    }
    // A pass that completes nothing gives the core away: the peer rank may be a thread that
    // needs it (CI machines have fewer cores than the threads that poll here).
    if (left == before) std::this_thread::yield();
  }
  return ncclSuccess;
}

inline void fill_pattern(std::vector<unsigned char>& v, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<unsigned char>(x);
  }
}

}  // namespace vtest
