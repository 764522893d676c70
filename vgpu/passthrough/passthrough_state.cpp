#include "passthrough/passthrough_state.h"

#include <cstdlib>
#include <new>
#include <sstream>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/settings.h"
#include "front/driver/init_from_config.h"
#include "passthrough/context_stubs.h"
#include "passthrough/passthrough.h"
#include "passthrough/real_driver.h"
#include "simcore/cluster_config.h"
#include "status/status_region.h"

namespace vgpu::pt {
namespace {

// The real driver rounds device allocations up to its 2 MiB pages; so does the accounting,
// so that a virtual device fills up where the real one would.
constexpr uint64_t kPage = 2ull << 20;
// Saturates instead of wrapping to 0 near 2^64: no device has that much, so reserve() refuses.
uint64_t pages(uint64_t bytes) {
  return bytes > UINT64_MAX - (kPage - 1) ? UINT64_MAX : (bytes + kPage - 1) / kPage * kPage;
}

// VGPU_PHYSICAL_DEVICES="0,1": virtual device v runs on the (v mod n)-th listed physical GPU.
// Default: round robin over every physical GPU of the process.
CUresult physical_map(const RealDriver& real, int virtual_count, std::vector<int>* out) {
  int real_count = 0;
  auto get_count = real.fn<CUresult (*)(int*)>("cuDeviceGetCount");
  if (!get_count || get_count(&real_count) != CUDA_SUCCESS || real_count <= 0) {
    log::always("vgpu passthrough: the real driver reports no GPU");
    return CUDA_ERROR_NO_DEVICE;
  }
  std::vector<int> listed;
  if (settings::is_set(settings::Id::physical_devices)) {
    for (const int64_t p : settings::int_list(settings::Id::physical_devices)) {
      if (p >= real_count) {
        log::always(fmt::format("vgpu passthrough: VGPU_PHYSICAL_DEVICES=\"{}\": {} is not a GPU ordinal below {}",
                                settings::raw(settings::Id::physical_devices), p, real_count));
        return CUDA_ERROR_INVALID_VALUE;
      }
      listed.push_back(static_cast<int>(p));
    }
  } else {
    for (int p = 0; p < real_count; ++p) listed.push_back(p);
  }
  auto device_get = real.fn<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
  for (int v = 0; v < virtual_count; ++v) {
    CUdevice d = 0;
    if (!device_get || device_get(&d, listed[static_cast<size_t>(v) % listed.size()]) != CUDA_SUCCESS)
      return CUDA_ERROR_INVALID_DEVICE;
    out->push_back(d);
  }
  return CUDA_SUCCESS;
}

}  // namespace

void* real_symbol(const char* name) {
  // Our own implementations are compiled as vgpu_impl_<symbol> (driver/cuda_api.h); a name that
  // went through a macro before being stringized carries the prefix: the real one has none.
  constexpr std::string_view kImpl = "vgpu_impl_";
  if (std::string_view(name).substr(0, kImpl.size()) == kImpl) name += kImpl.size();
  const RealDriver* real = RealDriver::get();
  void* f = real ? real->symbol(name) : nullptr;
  if (f == nullptr && real != nullptr)
    log::once(log::Level::warn, name, fmt::format("passthrough: the real driver has no {}", name));
  return f;
}

CUresult CUDAAPI missing_real_entry() { return CUDA_ERROR_NOT_SUPPORTED; }

int physical_device(int v) {
  const PassState* s = PassState::get();
  if (s == nullptr) return v;  // before cuInit the real driver answers NOT_INITIALIZED itself
  // Negative ordinals are the driver's own markers (CU_DEVICE_CPU, CU_DEVICE_INVALID) and pass
  // unchanged; an ordinal past the virtual devices becomes one past every real device, so the
  // real driver refuses it (as -1 it would have read as the CPU).
  if (v < 0) return v;
  const int p = s->physical(v);
  return p >= 0 ? p : kNoPhysicalDevice;
}

PassState::PassState(const RealDriver& real, simcore::ClusterSpec cluster, std::vector<int> physical)
    : real_(&real), cluster_(std::move(cluster)), topology_(cluster_), physical_(std::move(physical)),
      pools_(physical_), lazy_(settings::flag(settings::Id::lazy_contexts)) {
  status_ = status::Writer::attach(status::current_job_id(), "passthrough", status_devices(cluster_));
  activity_ = std::make_unique<DeviceActivity>(status_.get(), cluster_.total_gpus());
  // The work reported last, for whoever reads the region after this process (the root, and so
  // this object, is never destroyed). Made once per process (a second would flush twice: harmless).
  std::atexit([] {
    if (PassState* s = PassState::get()) s->flush_reported_work();
  });
  for (int i = 0; i < cluster_.total_gpus(); ++i)
    devices_.push_back(std::make_unique<Device>(cluster_, i, status_.get()));
  primaries_.resize(devices_.size());
  stub_real_ = std::make_unique<std::atomic<CUcontext>[]>(devices_.size());
  if (lazy_) context_stubs::create(device_count());
}

CUresult PassState::initialize(unsigned int flags) { return Passthrough::get().initialize(flags); }

CUresult PassState::create(const RealDriver& real, PassState** out) {
  return init_from_cluster_config([&real, out](simcore::ClusterSpec cluster) {
    std::vector<int> physical;
    if (CUresult r = physical_map(real, cluster.total_gpus(), &physical); r != CUDA_SUCCESS) return r;
    auto* s = new PassState(real, std::move(cluster), std::move(physical));
    log::info("passthrough: {} virtual GPUs ({} x {} {}) on the GPUs of {}", s->device_count(), s->cluster_.nodes,
              s->cluster_.gpus_per_node, s->cluster_.model.id, real.path());
    *out = s;
    return CUDA_SUCCESS;
  });
}


Device* PassState::device(int v) const {
  return v >= 0 && v < device_count() ? devices_[static_cast<size_t>(v)].get() : nullptr;
}

int PassState::physical(int v) const {
  return v >= 0 && v < device_count() ? physical_[static_cast<size_t>(v)] : -1;
}

bool PassState::shares_physical(int v) const {
  const int p = physical(v);
  if (p < 0) return false;
  for (int o = 0; o < device_count(); ++o)
    if (o != v && physical(o) == p) return true;
  return false;
}

int PassState::virtual_of_physical(int p) const {
  if (p < 0) return -1;
  if (int v = -1; current_device(&v) == CUDA_SUCCESS && physical(v) == p) return v;
  for (int v = 0; v < device_count(); ++v)
    if (physical(v) == p) return v;
  return -1;
}

// ---- contexts ----

CUresult PassState::primary_context(int v, CUcontext* out) {
  Device* dev = device(v);
  if (dev == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(mu_);
  Primary& pr = primaries_[static_cast<size_t>(v)];
  if (pr.ctx == nullptr) {
    const int p = physical(v);
    const bool first_on_gpu = pools_.owns_gpu_pools(v);  // the first virtual device on GPU p
    // Where several virtual devices share the GPU, a synchronization waits as long as all of
    // their work takes, and under the driver's automatic scheduling each rank's thread spins on
    // a core meanwhile (8 ranks of DDP on one H200: 2.1-2.3 s of CPU a step in
    // torch.cuda.synchronize each), which slows every other thread of the job, whose CPU time is
    // its virtual time. So such a context may block while it waits, unless the program chose how
    // (VGPU_SHARED_GPU_BLOCKING: off until measured on a GPU).
    unsigned flags = pr.flags;
    pr.blocking_added = settings::flag(settings::Id::shared_gpu_blocking) && shares_physical(v) && (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_AUTO;
    if (pr.blocking_added) flags |= CU_CTX_SCHED_BLOCKING_SYNC;
    CUcontext c = nullptr;
    CUresult r;
    if (first_on_gpu) {
      // The first virtual device of a GPU is that GPU's own primary context: a job of one
      // device runs exactly as it would without vgpu.
      if (auto set_flags = real_->fn<CUresult (*)(CUdevice, unsigned)>("cuDevicePrimaryCtxSetFlags_v2"))
        set_flags(p, flags);
      r = real_->fn<CUresult (*)(CUcontext*, CUdevice)>("cuDevicePrimaryCtxRetain")(&c, p);
    } else {
      r = real_->fn<CUresult (*)(CUcontext*, unsigned, CUdevice)>("cuCtxCreate_v2")(&c, flags, p);
      if (r == CUDA_SUCCESS) {  // cuCtxCreate made it current: a primary context is not
        CUcontext popped = nullptr;
        real_->fn<CUresult (*)(CUcontext*)>("cuCtxPopCurrent_v2")(&popped);
      }
    }
    if (r != CUDA_SUCCESS) {
      log::warn("passthrough: no real context for virtual device {} on GPU {}: error {}", v, p,
                static_cast<int>(r));
      return r;
    }
    // Each real context is a client of the GPU (of an MPS server, which admits a bounded number):
    // which virtual devices a process makes them for is what `vgpu-run --mps` needs to know.
    log::info("passthrough: a real context for virtual device {} on GPU {} ({})", v, p,
              first_on_gpu ? "the GPU's primary context" : "created");
    pr.ctx = c;
    contexts_[c] = v;
    if (lazy_ && !first_on_gpu) stub_real_[static_cast<size_t>(v)].store(c, std::memory_order_release);
    const uint64_t overhead = context_overhead_bytes(dev->model().sm_count);
    dev->reserve(overhead);
    if (status_) status_->add_physical(v, static_cast<int64_t>(overhead));  // a real context's
  }
  *out = pr.ctx;
  return CUDA_SUCCESS;
}

unsigned PassState::sched_flags_added(CUcontext real) const {
  std::lock_guard l(mu_);
  for (const Primary& pr : primaries_)
    if (pr.ctx == real && pr.blocking_added) return CU_CTX_SCHED_BLOCKING_SYNC;
  return 0;
}

CUresult PassState::primary_handle(int v, CUcontext* out, CUresult (*real_handle)(CUcontext*, CUdevice)) {
  if (!lazy_) return primary_context(v, out);
  if (device(v) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  {
    std::lock_guard l(mu_);
    Primary& pr = primaries_[static_cast<size_t>(v)];
    if (pr.handle == nullptr) {
      if (!pools_.owns_gpu_pools(v)) {
        pr.handle = context_stubs::stub(v);
      } else if (pr.ctx != nullptr) {
        pr.handle = pr.ctx;  // the GPU's own primary context, already made
      } else if (real_handle != nullptr) {
        // The GPU's own primary context as the real driver names it before it is active: the
        // handle its retain gives later (measured, sim/darkapi/slots.h).
        CUcontext h = nullptr;
        if (const CUresult r = real_handle(&h, physical(v)); r != CUDA_SUCCESS) return r;
        pr.handle = h;
        contexts_[h] = v;
      }
    }
    if (pr.handle != nullptr) {
      *out = pr.handle;
      return CUDA_SUCCESS;
    }
  }
  // No stub block, or the GPU's own primary context asked for outside the runtime's table: the
  // real context is made now and is the handle.
  CUcontext c = nullptr;
  if (const CUresult r = primary_context(v, &c); r != CUDA_SUCCESS) return r;
  std::lock_guard l(mu_);
  Primary& pr = primaries_[static_cast<size_t>(v)];
  if (pr.handle == nullptr) pr.handle = c;
  *out = pr.handle;
  return CUDA_SUCCESS;
}

CUresult PassState::primary_retain(int v, CUcontext* out) {
  CUcontext real = nullptr;
  if (CUresult r = primary_context(v, &real); r != CUDA_SUCCESS) return r;
  if (CUresult r = primary_handle(v, out); r != CUDA_SUCCESS) return r;
  std::lock_guard l(mu_);
  ++primaries_[static_cast<size_t>(v)].refs;
  return CUDA_SUCCESS;
}

bool PassState::is_primary(CUcontext ctx) const {
  if (ctx == nullptr) return false;
  std::lock_guard l(mu_);
  for (const Primary& pr : primaries_)
    if (pr.ctx == ctx || pr.handle == ctx) return true;
  return false;
}

CUresult PassState::real_context(CUcontext* ctx) {
  const int v = context_stubs::device_of(*ctx);
  if (v < 0) return CUDA_SUCCESS;
  return primary_context(v, ctx);
}

CUcontext PassState::program_context(CUcontext real) const {
  if (!lazy_ || real == nullptr) return real;
  for (int v = 0; v < device_count(); ++v)
    if (stub_real_[static_cast<size_t>(v)].load(std::memory_order_acquire) == real) return context_stubs::stub(v);
  return real;
}

CUresult PassState::primary_release(int v) {
  if (device(v) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(mu_);
  Primary& pr = primaries_[static_cast<size_t>(v)];
  if (pr.refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  // The real context stays: its handle must stay valid, as a real primary context's does.
  --pr.refs;
  return CUDA_SUCCESS;
}

CUresult PassState::primary_reset(int v) {
  if (device(v) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(mu_);
  Primary& pr = primaries_[static_cast<size_t>(v)];
  pr.refs = 0;
  pr.flags = 0;
  return CUDA_SUCCESS;
}

CUresult PassState::primary_state(int v, unsigned int* flags, int* active) {
  if (device(v) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(mu_);
  const Primary& pr = primaries_[static_cast<size_t>(v)];
  *flags = pr.flags;
  *active = pr.refs > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult PassState::primary_set_flags(int v, unsigned int flags) {
  if (device(v) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (flags & ~static_cast<unsigned>(CU_CTX_FLAGS_MASK)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(mu_);
  Primary& pr = primaries_[static_cast<size_t>(v)];
  pr.flags = flags;
  if (pr.ctx != nullptr) {
    // Applied to the live real context where the driver allows it (scheduling flags).
    auto push = real_->fn<CUresult (*)(CUcontext)>("cuCtxPushCurrent_v2");
    auto set = real_->fn<CUresult (*)(unsigned)>("cuCtxSetFlags");
    auto pop = real_->fn<CUresult (*)(CUcontext*)>("cuCtxPopCurrent_v2");
    if (push && set && pop && push(pr.ctx) == CUDA_SUCCESS) {
      set(flags);
      CUcontext c;
      pop(&c);
    }
  }
  return CUDA_SUCCESS;
}

void PassState::add_context(CUcontext real, int v) {
  std::lock_guard l(mu_);
  contexts_[real] = v;
}

void PassState::remove_context(CUcontext real) {
  std::lock_guard l(mu_);
  contexts_.erase(real);
}

int PassState::device_of(CUcontext ctx) const {
  if (const int v = context_stubs::device_of(ctx); v >= 0) return v;  // the block has one stub a device
  std::lock_guard l(mu_);
  auto it = contexts_.find(ctx);
  return it == contexts_.end() ? -1 : it->second;
}

void PassState::report_work(int v, double busy_s, bool kernel, double finish) {
  if (!status_ || device(v) == nullptr) return;
  activity_->report(v, finish - busy_s, finish, kernel);
}

void PassState::flush_reported_work() {
  if (status_) activity_->flush();
}

CUresult PassState::current_device(int* v, CUcontext* ctx) const {
  CUcontext c = nullptr;
  if (CUresult r = VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&c); r != CUDA_SUCCESS)
    return r;
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx != nullptr) *ctx = c;
  const int d = device_of(c);
  if (d < 0) {
    log::once(log::Level::warn, "foreign context",
              "passthrough: a context vgpu did not create is current; treating it as device 0");
    *v = 0;
    return CUDA_SUCCESS;
  }
  *v = d;
  return CUDA_SUCCESS;
}

// ---- memory ----

bool PassState::reserve(int v, uint64_t bytes) {
  Device* d = device(v);
  return d != nullptr && d->reserve(pages(bytes));
}

void PassState::release(int v, uint64_t bytes) {
  if (Device* d = device(v)) d->release(pages(bytes));
}

void PassState::add_allocation(CUdeviceptr p, uint64_t bytes, int v, uint64_t physical, CUcontext ctx) {
  {
    std::lock_guard l(mu_);
    const Charge c{bytes, v, pages(physical), ctx};
    if (spare_allocation_.empty()) {
      allocations_[p] = c;
    } else {
      spare_allocation_.key() = p;
      spare_allocation_.mapped() = c;
      auto [it, inserted, node] = allocations_.insert(std::move(spare_allocation_));
      if (!inserted) it->second = c;  // a record left under `p` (as allocations_[p] would)
      spare_allocation_ = std::move(node);
    }
    address_generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  add_physical(v, static_cast<int64_t>(pages(physical)));
}

void PassState::add_physical(int v, int64_t bytes) {
  if (status_ && device(v) != nullptr && bytes != 0) status_->add_physical(v, bytes);
}

bool PassState::take_allocation(CUdeviceptr p, Charge* out) {
  std::lock_guard l(mu_);
  auto it = allocations_.find(p);
  if (it == allocations_.end()) return false;
  *out = it->second;
  spare_allocation_ = allocations_.extract(it);
  address_generation_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

void PassState::put_back_allocation(CUdeviceptr p, const Charge& c) {
  std::lock_guard l(mu_);
  allocations_[p] = c;
  address_generation_.fetch_add(1, std::memory_order_acq_rel);
}

void PassState::give_back(const Charge& c) {
  release(c.device, c.bytes);
  add_physical(c.device, -static_cast<int64_t>(c.physical));
}

bool PassState::remove_allocation(CUdeviceptr p) {
  Charge c;
  if (!take_allocation(p, &c)) return false;
  give_back(c);
  return true;
}

void PassState::allocations_destroyed_with(CUcontext ctx) {
  if (ctx == nullptr) return;
  std::vector<Charge> gone;
  {
    std::lock_guard l(mu_);
    for (auto it = allocations_.begin(); it != allocations_.end();) {
      if (it->second.ctx == ctx) {
        gone.push_back(it->second);
        it = allocations_.erase(it);
      } else {
        ++it;
      }
    }
    address_generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  for (const Charge& c : gone) give_back(c);
}

void allocations_destroyed_with(CUcontext ctx) {
  if (PassState* s = PassState::get()) s->allocations_destroyed_with(ctx);
}

int PassState::device_of_pointer(CUdeviceptr p) const {
  std::lock_guard l(mu_);
  return allocation_device(p);
}

int PassState::allocation_device(CUdeviceptr p) const {
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return -1;
  --it;
  return p < it->first + it->second.bytes ? it->second.device : -1;
}

void PassState::add_mapping(CUdeviceptr p, uint64_t bytes, unsigned long long handle) {
  std::lock_guard l(mu_);
  Mapping m{bytes, nullptr};
  if (auto it = handles_.find(handle); it != handles_.end()) {
    m.handle = it->second;
    ++m.handle->mappings;
  }
  // A mapping replaced without an unmap (vgpu missed it) no longer holds its handle.
  if (auto old = mappings_.find(p); old != mappings_.end() && old->second.handle) --old->second.handle->mappings;
  mappings_[p] = std::move(m);
  address_generation_.fetch_add(1, std::memory_order_acq_rel);
}

void PassState::remove_mapping(CUdeviceptr p, uint64_t bytes) {
  std::vector<Charge> freed;
  {
    std::lock_guard l(mu_);
    const CUdeviceptr end = bytes > UINT64_MAX - p ? UINT64_MAX : p + bytes;
    for (auto it = mappings_.lower_bound(p); it != mappings_.end() && (it->first < end || it->first == p);) {
      if (const auto& h = it->second.handle; h && --h->mappings == 0 && h->released) freed.push_back(h->charge);
      it = mappings_.erase(it);
    }
    address_generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  for (const Charge& c : freed) give_back(c);
}

bool PassState::is_device_pointer(uint64_t p) const {
  // One lock for both tables: asked for every pointer-sized word of a launch's parameters and
  // for both ends of a copy, mostly about host addresses, which are in neither.
  std::lock_guard l(mu_);
  if (allocation_device(p) >= 0) return true;
  auto it = mappings_.upper_bound(p);
  if (it == mappings_.begin()) return false;
  --it;
  return p < it->first + it->second.bytes;
}

void PassState::add_handle(unsigned long long h, uint64_t bytes, int v) {
  auto c = std::make_shared<HandleCharge>();
  c->charge = {bytes, v, bytes, nullptr};
  {
    std::lock_guard l(mu_);
    handles_[h] = std::move(c);
  }
  add_physical(v, static_cast<int64_t>(bytes));
}

std::shared_ptr<PassState::HandleCharge> PassState::take_handle(unsigned long long h) {
  std::lock_guard l(mu_);
  auto it = handles_.find(h);
  if (it == handles_.end()) return nullptr;
  auto c = std::move(it->second);
  handles_.erase(it);
  return c;
}

void PassState::put_back_handle(unsigned long long h, std::shared_ptr<HandleCharge> c) {
  if (!c) return;
  std::lock_guard l(mu_);
  handles_[h] = std::move(c);
}

void PassState::handle_released(const std::shared_ptr<HandleCharge>& c) {
  if (!c) return;
  {
    std::lock_guard l(mu_);
    c->released = true;
    if (c->mappings > 0) return;  // the last unmap gives the bytes back
  }
  give_back(c->charge);
}

bool PassState::remove_handle(unsigned long long h) {
  auto c = take_handle(h);
  handle_released(c);
  return c != nullptr;
}

int PassState::handle_device(unsigned long long h) const {
  std::lock_guard l(mu_);
  auto it = handles_.find(h);
  return it == handles_.end() ? -1 : it->second->charge.device;
}

void PassState::memory_info(int v, size_t* free, size_t* total) const {
  const Device* d = device(v);
  *total = d->capacity();
  *free = d->free_bytes();
}

}  // namespace vgpu::pt
