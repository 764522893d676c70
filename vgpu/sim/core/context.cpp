// Contexts of the sim backend: one primary context per virtual device (retained/released by
// count, handle stable for the life of the process), contexts created by cuCtxCreate, and the
// per-thread context stack (sim/core/thread_state.h). Tearing a context down drains its streams
// and frees the memory it allocated, as the real driver does, and gives the device back the
// context's own overhead when it was the device's last context.
#include "sim/core/context.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <vector>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/core/handle_table.h"
#include "sim/core/thread_state.h"

namespace vgpu {

// ---------------------------------------------------------------------------------------------
// ContextState

struct ContextState::Data {
  mutable std::mutex mu;
  unsigned int flags = 0;
  bool active = true;
  int attach_count = 1;
  // Defaults the real driver reports for a fresh context on Hopper.
  size_t stack_size = 1024;
  size_t printf_fifo = 1 << 20;
  size_t malloc_heap = 8 << 20;
  size_t sync_depth = 2;
  size_t pending_launches = 2048;
  size_t l2_fetch = 64;
  size_t persisting_l2 = 0;
  CUfunc_cache cache = CU_FUNC_CACHE_PREFER_NONE;
  CUsharedconfig shared = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  std::set<CUcontext> peers;
};

ContextState::ContextState(CUcontext handle, int device, unsigned int flags, bool primary,
                           unsigned long long id)
    : handle_(handle), device_(device), primary_(primary), id_(id),
      data_(std::make_shared<Data>()) {
  data_->flags = flags;
}

unsigned int ContextState::flags() const {
  std::lock_guard l(data_->mu);
  return data_->flags;
}
void ContextState::set_flags(unsigned int flags) {
  std::lock_guard l(data_->mu);
  data_->flags = flags;
}
bool ContextState::active() const {
  std::lock_guard l(data_->mu);
  return data_->active;
}

CUresult ContextState::get_limit(CUlimit limit, size_t* value) const {
  std::lock_guard l(data_->mu);
  switch (limit) {
    case CU_LIMIT_STACK_SIZE: *value = data_->stack_size; return CUDA_SUCCESS;
    case CU_LIMIT_PRINTF_FIFO_SIZE: *value = data_->printf_fifo; return CUDA_SUCCESS;
    case CU_LIMIT_MALLOC_HEAP_SIZE: *value = data_->malloc_heap; return CUDA_SUCCESS;
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH: *value = data_->sync_depth; return CUDA_SUCCESS;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: *value = data_->pending_launches; return CUDA_SUCCESS;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: *value = data_->l2_fetch; return CUDA_SUCCESS;
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE: *value = data_->persisting_l2; return CUDA_SUCCESS;
    // Contexts are never CIG (graphics-interop) contexts: kernels get the device's whole
    // opt-in shared memory (cuBLAS reads these when it plans a GEMM).
    case CU_LIMIT_SHMEM_SIZE: {
      const Device* dev = DriverState::get() ? DriverState::get()->device(device_) : nullptr;
      int bytes = 0;
      if (dev) dev->attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &bytes);
      *value = static_cast<size_t>(bytes);
      return CUDA_SUCCESS;
    }
    case CU_LIMIT_CIG_ENABLED: *value = 0; return CUDA_SUCCESS;
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED: *value = 0; return CUDA_SUCCESS;
    default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
}

namespace {
constexpr size_t kMaxStackBytes = 512 * 1024;
}  // namespace

CUresult ContextState::set_limit(CUlimit limit, size_t value) {
  std::lock_guard l(data_->mu);
  switch (limit) {
    case CU_LIMIT_STACK_SIZE:
      // A thread's stack lives in its local memory, at most 512 KiB on every architecture
      // vgpu models: more is refused (SIZE_MAX used to wrap to 0 when rounded and succeed).
      if (value > kMaxStackBytes) {
        log::warn("cuCtxSetLimit: stack size {} exceeds the {} bytes of local memory a thread can have",
                  value, kMaxStackBytes);
        return CUDA_ERROR_INVALID_VALUE;
      }
      // The real driver rounds the per-thread stack up to 16 bytes.
      data_->stack_size = (value + 15) & ~size_t{15};
      return CUDA_SUCCESS;
    case CU_LIMIT_PRINTF_FIFO_SIZE: data_->printf_fifo = value; return CUDA_SUCCESS;
    case CU_LIMIT_MALLOC_HEAP_SIZE: data_->malloc_heap = value; return CUDA_SUCCESS;
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH: data_->sync_depth = value; return CUDA_SUCCESS;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: data_->pending_launches = value; return CUDA_SUCCESS;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
      if (value > 128) return CUDA_ERROR_INVALID_VALUE;
      data_->l2_fetch = value;
      return CUDA_SUCCESS;
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE: data_->persisting_l2 = value; return CUDA_SUCCESS;
    default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
}

CUfunc_cache ContextState::cache_config() const {
  std::lock_guard l(data_->mu);
  return data_->cache;
}
void ContextState::set_cache_config(CUfunc_cache c) {
  std::lock_guard l(data_->mu);
  data_->cache = c;
}
CUsharedconfig ContextState::shared_config() const {
  std::lock_guard l(data_->mu);
  return data_->shared;
}
void ContextState::set_shared_config(CUsharedconfig c) {
  std::lock_guard l(data_->mu);
  data_->shared = c;
}
bool ContextState::enable_peer(CUcontext peer) {
  std::lock_guard l(data_->mu);
  return data_->peers.insert(peer).second;
}
std::vector<CUcontext> ContextState::peers() const {
  std::lock_guard l(data_->mu);
  return {data_->peers.begin(), data_->peers.end()};
}
bool ContextState::disable_peer(CUcontext peer) {
  std::lock_guard l(data_->mu);
  return data_->peers.erase(peer) > 0;
}

// ---------------------------------------------------------------------------------------------
// ContextManager

namespace {
constexpr unsigned int kValidFlags = CU_CTX_FLAGS_MASK;
}  // namespace

uint64_t ContextManager::context_overhead_bytes(int sm_count) {
  return vgpu::context_overhead_bytes(sm_count);
}

struct ContextManager::Impl {
  Impl(DriverState& d, Teardown t)
      : driver(d), teardown_hook(std::move(t)), per_device(static_cast<size_t>(d.device_count())) {}

  struct PerDevice {
    std::shared_ptr<ContextState> primary;
    int primary_refs = 0;
    int live = 0;  // active contexts on the device, primary included
  };

  DriverState& driver;
  const Teardown teardown_hook;
  HandleTable<ContextState> table;
  mutable std::mutex mu;  // guards per_device
  std::vector<PerDevice> per_device;
  std::atomic<unsigned long long> next_id{1};

  // Called with mu held: a context becomes live on `device`; the first pays the overhead.
  CUresult add_live(int device) {
    PerDevice& pd = per_device[static_cast<size_t>(device)];
    if (pd.live == 0) {
      Device* dev = driver.device(device);
      if (!dev->reserve(context_overhead_bytes(dev->model().sm_count))) {
        log::warn("context creation on device {}: out of memory for the context itself", device);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    ++pd.live;
    return CUDA_SUCCESS;
  }
  // Called with mu held.
  void drop_live(int device) {
    PerDevice& pd = per_device[static_cast<size_t>(device)];
    if (pd.live > 0 && --pd.live == 0) {
      Device* dev = driver.device(device);
      dev->release(context_overhead_bytes(dev->model().sm_count));
    }
  }
  // What every context's end does: its streams and its memory go.
  void teardown(const ContextState& ctx) {
    if (teardown_hook) teardown_hook(ctx.handle());
  }
};

ContextManager::ContextManager(DriverState& driver, Teardown teardown)
    : impl_(std::make_unique<Impl>(driver, std::move(teardown))) {}
ContextManager::~ContextManager() = default;

std::shared_ptr<Context> ContextManager::find(CUcontext ctx) const { return impl_->table.find(ctx); }

std::shared_ptr<Context> ContextManager::current() const {
  CUcontext h = this_thread().current();
  if (h == nullptr) return nullptr;
  auto c = impl_->table.find(h);
  if (!c || !c->active()) return nullptr;
  return c;
}

CUresult ContextManager::current_device(int* device) const {
  if (DriverState::get() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  auto c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *device = c->device();
  return CUDA_SUCCESS;
}

CUresult ContextManager::resolve(CUcontext ctx, std::shared_ptr<Context>* out) const {
  if (DriverState::get() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) {
    *out = current();
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  }
  auto c = impl_->table.find(ctx);
  if (!c || !c->active()) return CUDA_ERROR_INVALID_CONTEXT;
  *out = c;
  return CUDA_SUCCESS;
}

CUresult ContextManager::primary_retain(int device, CUcontext* out) {
  if (impl_->driver.device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(impl_->mu);
  auto& pd = impl_->per_device[static_cast<size_t>(device)];
  if (pd.primary_refs == 0) {
    if (CUresult r = impl_->add_live(device); r != CUDA_SUCCESS) return r;
    if (!pd.primary) {
      CUcontext h = mint_handle<CUcontext>(HandleKind::context);
      pd.primary = std::make_shared<ContextState>(h, device, 0, true, impl_->next_id++);
      impl_->table.add(h, pd.primary);
    } else {
      std::lock_guard dl(pd.primary->data_->mu);
      pd.primary->data_->active = true;
    }
  }
  ++pd.primary_refs;
  *out = pd.primary->handle();
  return CUDA_SUCCESS;
}

CUresult ContextManager::primary_release(int device) {
  if (impl_->driver.device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::shared_ptr<ContextState> gone;
  {
    std::lock_guard l(impl_->mu);
    auto& pd = impl_->per_device[static_cast<size_t>(device)];
    if (pd.primary_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--pd.primary_refs > 0) return CUDA_SUCCESS;
    gone = pd.primary;
    {
      std::lock_guard dl(gone->data_->mu);
      gone->data_->active = false;
    }
  }
  impl_->teardown(*gone);
  std::lock_guard l(impl_->mu);
  impl_->drop_live(device);
  return CUDA_SUCCESS;
}

CUresult ContextManager::primary_reset(int device) {
  if (impl_->driver.device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::shared_ptr<ContextState> gone;
  {
    std::lock_guard l(impl_->mu);
    auto& pd = impl_->per_device[static_cast<size_t>(device)];
    if (pd.primary) {
      std::lock_guard dl(pd.primary->data_->mu);
      pd.primary->data_->flags = 0;
      pd.primary->data_->peers.clear();
      if (pd.primary_refs > 0) {
        pd.primary->data_->active = false;
        gone = pd.primary;
      }
    }
    pd.primary_refs = 0;
  }
  if (gone) {
    impl_->teardown(*gone);
    std::lock_guard l(impl_->mu);
    impl_->drop_live(device);
  }
  return CUDA_SUCCESS;
}

CUresult ContextManager::primary_state(int device, unsigned int* flags, int* active) const {
  if (impl_->driver.device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(impl_->mu);
  const auto& pd = impl_->per_device[static_cast<size_t>(device)];
  *flags = pd.primary ? pd.primary->flags() : 0;
  *active = pd.primary_refs > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult ContextManager::primary_set_flags(int device, unsigned int flags) {
  if (impl_->driver.device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (flags & ~kValidFlags) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(impl_->mu);
  auto& pd = impl_->per_device[static_cast<size_t>(device)];
  if (!pd.primary) {
    // Flags set before the first retain are kept for it: make the (inactive) object now.
    CUcontext h = mint_handle<CUcontext>(HandleKind::context);
    pd.primary = std::make_shared<ContextState>(h, device, flags, true, impl_->next_id++);
    pd.primary->data_->active = false;
    impl_->table.add(h, pd.primary);
    return CUDA_SUCCESS;
  }
  pd.primary->set_flags(flags);
  return CUDA_SUCCESS;
}

CUresult ContextManager::create(int device, unsigned int flags, CUcontext* out) {
  if (impl_->driver.device(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (flags & ~kValidFlags) return CUDA_ERROR_INVALID_VALUE;
  CUcontext h = mint_handle<CUcontext>(HandleKind::context);
  {
    std::lock_guard l(impl_->mu);
    if (CUresult r = impl_->add_live(device); r != CUDA_SUCCESS) return r;
  }
  impl_->table.add(h, std::make_shared<ContextState>(h, device, flags, false, impl_->next_id++));
  this_thread().context_stack.push_back(h);
  *out = h;
  return CUDA_SUCCESS;
}

CUresult ContextManager::destroy(CUcontext ctx) {
  if (DriverState::get() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  auto c = impl_->table.find(ctx);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (c->is_primary()) return CUDA_ERROR_INVALID_CONTEXT;  // released, never destroyed
  if (!impl_->table.remove(ctx)) return CUDA_ERROR_INVALID_CONTEXT;  // lost a race
  {
    std::lock_guard dl(c->data_->mu);
    c->data_->active = false;
  }
  auto& stack = this_thread().context_stack;
  if (!stack.empty() && stack.back() == ctx) stack.pop_back();
  impl_->teardown(*c);
  std::lock_guard l(impl_->mu);
  impl_->drop_live(c->device());
  return CUDA_SUCCESS;
}

CUresult ContextManager::attach(CUcontext* out) {
  if (DriverState::get() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  auto c = impl_->table.find(this_thread().current());
  if (!c || !c->active()) return CUDA_ERROR_INVALID_CONTEXT;
  {
    std::lock_guard dl(c->data_->mu);
    ++c->data_->attach_count;
  }
  *out = c->handle();
  return CUDA_SUCCESS;
}

CUresult ContextManager::detach(CUcontext ctx) {
  if (DriverState::get() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  auto c = impl_->table.find(ctx);
  if (!c || !c->active() || c->is_primary()) return CUDA_ERROR_INVALID_CONTEXT;
  bool last;
  {
    std::lock_guard dl(c->data_->mu);
    last = --c->data_->attach_count <= 0;
  }
  return last ? destroy(ctx) : CUDA_SUCCESS;
}

int ContextManager::live_contexts(int device) const {
  if (impl_->driver.device(device) == nullptr) return 0;
  std::lock_guard l(impl_->mu);
  return impl_->per_device[static_cast<size_t>(device)].live;
}

bool ContextManager::peer_access(int a, int b) const {
  for (const auto& c : impl_->table.snapshot()) {
    if (!c->active() || (c->device() != a && c->device() != b)) continue;
    const int other = c->device() == a ? b : a;
    for (CUcontext p : c->peers())
      if (auto peer = impl_->table.find(p); peer && peer->device() == other) return true;
  }
  return false;
}

}  // namespace vgpu
