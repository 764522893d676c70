// ModuleManager: loading and unloading modules and libraries, resolving functions, kernels and
// globals. Attributes are in module_attributes.cpp, occupancy in module_occupancy.cpp, launches
// in launch.cpp.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_set>
#include <cstring>

#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/exec/module_registry.h"
#include "front/launch/kernel_db_misses.h"
#include "sim/exec/nccl_collectives.h"
#include "sim/memory/memory.h"

namespace vgpu {
namespace {

CUresult to_cuda_error(module::ErrorKind kind) {
  switch (kind) {
    case module::ErrorKind::invalid_image: return CUDA_ERROR_INVALID_IMAGE;
    case module::ErrorKind::invalid_ptx: return CUDA_ERROR_INVALID_PTX;
    case module::ErrorKind::no_binary_for_gpu: return CUDA_ERROR_NO_BINARY_FOR_GPU;
    case module::ErrorKind::unsupported: return CUDA_ERROR_NOT_SUPPORTED;
    case module::ErrorKind::file_not_found: return CUDA_ERROR_FILE_NOT_FOUND;
  }
  return CUDA_ERROR_INVALID_IMAGE;
}

// A string's own heap block (none while it fits the object: 15 characters with libstdc++).
uint64_t heap_of(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

// The bytes an image's tables hold, from the containers' sizes (the allocator's own overhead
// not counted): parsed kernels and globals, launch descriptions, the name index.
uint64_t estimated_table_bytes(const LoadedImage& li) {
  uint64_t b = sizeof(LoadedImage);
  for (const module::KernelInfo& k : li.image.kernels)
    b += sizeof(k) + heap_of(k.name) + k.params.capacity() * sizeof(module::ParamInfo);
  for (const KernelDesc& d : li.kernels) b += sizeof(d) + d.params.capacity() * sizeof(ParamSlot);
  for (const module::GlobalInfo& g : li.image.globals) b += sizeof(g) + heap_of(g.name) + g.init.capacity();
  // A node per name (next pointer, key, value, cached hash) and the bucket array.
  b += li.kernel_index.size() * (sizeof(void*) + sizeof(std::string_view) + 2 * sizeof(size_t)) +
       li.kernel_index.bucket_count() * sizeof(void*);
  return b;
}

std::shared_ptr<const LoadedImage> prepare(module::ModuleImage&& parsed) {
  auto li = std::make_shared<LoadedImage>();
  li->image = std::move(parsed);
  // Kept for the image's life: no slack from the parser's growth (before taking pointers in).
  li->image.kernels.shrink_to_fit();
  li->image.globals.shrink_to_fit();
  li->kernels.reserve(li->image.kernels.size());
  for (size_t i = 0; i < li->image.kernels.size(); ++i) {
    const module::KernelInfo& k = li->image.kernels[i];
    KernelDesc d;
    d.info = &k;
    uint32_t end = 0;
    d.params.reserve(k.params.size());
    for (const module::ParamInfo& p : k.params) {
      d.params.push_back({p.offset, p.size});
      end = std::max<uint32_t>(end, p.offset + p.size);
    }
    d.param_bytes = end;
    li->kernel_index.emplace(k.name, i);  // first of a duplicated name wins
    li->kernels.push_back(std::move(d));
  }
  for (const module::GlobalInfo& g : li->image.globals)
    if (g.space == module::GlobalSpace::constant) li->const_bytes += g.size;
  li->table_bytes = estimated_table_bytes(*li);
  return li;
}

}  // namespace

std::shared_ptr<FuncSettings> Kernel::settings_for(int device, int default_max_dynamic_shared) {
  std::lock_guard lock(mu);
  auto& s = settings[device];
  if (!s) {
    s = std::make_shared<FuncSettings>();
    s->max_dynamic_shared = default_max_dynamic_shared;
  }
  return s;
}

ModuleManager::ModuleManager(DriverState& driver) : driver_(driver) {
  const auto& model = driver_.cluster().model;
  sm_arch_ = model.cc_major * 10 + model.cc_minor;
  kernel_times_ = std::make_unique<KernelTimeDb>(KernelTimeDb::path_from_environment(), model.name);
  nccl_ = std::make_unique<NcclCollectives>(driver_);
  misses_ = std::make_unique<KernelDbMisses>();
  if (misses_->enabled()) {
    static std::once_flag once;  // the driver state, and so this manager, is made once
    std::call_once(once, [] {
      std::atexit([] {
        if (DriverState* d = DriverState::get()) d->modules().write_kernel_db_misses();
      });
    });
  }
}

void ModuleManager::write_kernel_db_misses() {
  if (misses_) misses_->write();
}

ModuleManager::~ModuleManager() = default;

CUresult ModuleManager::current_device(int* device) const {
  return driver_.contexts().current_device(device);
}

int ModuleManager::device_attribute(int device, CUdevice_attribute attr, int fallback) const {
  const Device* d = driver_.device(device);
  int v = 0;
  if (d && d->attribute(attr, &v) == CUDA_SUCCESS) return v;
  return fallback;
}

// The real driver lets a kernel use 48 KiB of shared memory (static + dynamic) without opting in.
int ModuleManager::default_max_dynamic_shared(const module::KernelInfo& info, int device) const {
  const int limit = device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152);
  return std::max(0, limit - static_cast<int>(info.shared_bytes));
}

CUresult ModuleManager::parse(const void* image, const char* path, const char* api,
                              std::shared_ptr<const LoadedImage>* out) const {
  module::ParseResult parsed = [&]() -> module::ParseResult {
    if (path) return module::parse_image_file(path, sm_arch_);
    return module::parse_image_at(image, sm_arch_);
  }();
  if (!parsed.ok()) {
    log::warn("{}: image refused: {}", api, parsed.message());
    return to_cuda_error(parsed.error().kind);
  }
  const uint64_t decompressed = parsed.value().decompressed_bytes;
  images_parsed_.fetch_add(1, std::memory_order_relaxed);
  decompressed_bytes_.fetch_add(decompressed, std::memory_order_relaxed);
  for (uint64_t seen = largest_decompressed_.load(); decompressed > seen &&
                                                     !largest_decompressed_.compare_exchange_weak(seen, decompressed);) {
  }
  *out = prepare(std::move(parsed).value());
  return CUDA_SUCCESS;
}

ModuleStats ModuleManager::stats() const {
  ModuleStats s;
  s.images_parsed = images_parsed_.load();
  s.decompressed_bytes = decompressed_bytes_.load();
  s.largest_decompressed = largest_decompressed_.load();
  s.kernels = kernels_.size();
  s.functions = functions_.size();
  // An image is shared by its library, kernels and per-device modules: count each once.
  std::unordered_set<const LoadedImage*> images;
  for (const auto& lib : libraries_.snapshot()) {
    ++s.libraries;
    images.insert(lib->image.get());
  }
  for (const auto& m : modules_.snapshot()) {
    ++s.modules;
    images.insert(m->image.get());
  }
  for (const LoadedImage* li : images) s.table_bytes += li->table_bytes;
  return s;
}

CUresult ModuleManager::make_module(std::shared_ptr<const LoadedImage> image, int device,
                                    CUlibrary library, CUkernel const* kernels, CUmodule* out) {
  auto m = std::make_shared<Module>();
  m->handle = mint_handle<CUmodule>(HandleKind::module);
  m->library = library;
  m->device = device;
  m->image = image;
  // The owner of the globals, by the memory manager's rule (the current context when it is on
  // `device`), so that both let go of them when that context goes.
  if (auto c = driver_.contexts().current(); c && c->device() == device) m->ctx = c->handle();

  // Globals live in the device's memory, initialised from the image; the rest is zero.
  MemoryManager& memory = driver_.memory();
  for (const module::GlobalInfo& g : image->image.globals) {
    Module::Global global;
    global.size = g.size;
    global.managed = g.managed;
    const size_t bytes = std::max<uint64_t>(g.size, 1);
    CUresult rc = memory.allocate_device(device, bytes, &global.ptr);
    if (rc != CUDA_SUCCESS) {
      log::warn("module load: cannot allocate global '{}' of {} bytes on device {}", g.name, g.size,
                device);
      destroy_module(m);
      return rc;
    }
    m->globals.emplace(g.name, global);
    // A new device allocation is a fresh anonymous mapping, zero already: only the initialised
    // bytes are written, so a large zero-initialised global costs no host memory until the
    // program writes it (issue 23).
    if (auto where = memory.resolve(global.ptr, bytes); where && where->host) {
      const size_t init = std::min<size_t>(g.init.size(), bytes);
      if (init) std::memcpy(where->host, g.init.data(), init);
    }
  }

  m->functions.reserve(image->kernels.size());
  for (size_t i = 0; i < image->kernels.size(); ++i) {
    auto f = std::make_shared<Function>();
    f->handle = mint_handle<CUfunction>(HandleKind::function);
    f->module = m->handle;
    f->device = device;
    f->image = image;
    f->index = i;
    const int def = default_max_dynamic_shared(*image->kernels[i].info, device);
    if (kernels) {
      f->kernel = kernels[i];
      if (auto k = kernels_.find(kernels[i])) f->settings = k->settings_for(device, def);
    }
    if (!f->settings) {
      f->settings = std::make_shared<FuncSettings>();
      f->settings->max_dynamic_shared = def;
    }
    const CUfunction handle = f->handle;  // read before the move below: argument order is unspecified
    m->functions.push_back(handle);
    functions_.add(handle, std::move(f));
  }
  modules_.add(m->handle, m);
  *out = m->handle;
  return CUDA_SUCCESS;
}

void ModuleManager::destroy_module(const std::shared_ptr<Module>& m) {
  for (CUfunction f : m->functions) functions_.remove(f);
  // The map itself stays as it is: another thread may still read it through a handle it
  // looked up before the module went (cuModuleGetGlobal racing cuModuleUnload).
  for (auto& [name, g] : m->globals)
    if (g.ptr) driver_.memory().free_device(g.ptr);
}

void ModuleManager::context_destroyed(CUcontext ctx) {
  if (ctx == nullptr) return;
  for (auto& m : modules_.snapshot()) {
    if (m->ctx != ctx) continue;
    if (m->library) {
      if (auto lib = libraries_.find(m->library)) {
        std::lock_guard lock(lib->mu);
        auto it = lib->modules.find(m->device);
        if (it != lib->modules.end() && it->second == m->handle) lib->modules.erase(it);
      }
    }
    if (modules_.remove(m->handle)) destroy_module(m);  // else another thread unloaded it
  }
}

CUresult ModuleManager::load_file(const char* path, CUmodule* out) {
  int device = 0;
  if (CUresult rc = current_device(&device); rc != CUDA_SUCCESS) return rc;
  struct stat st{};
  if (::stat(path, &st) != 0 || S_ISDIR(st.st_mode)) {
    log::warn("cuModuleLoad: no file '{}'", path);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  std::shared_ptr<const LoadedImage> image;
  if (CUresult rc = parse(nullptr, path, "cuModuleLoad", &image); rc != CUDA_SUCCESS) return rc;
  return make_module(std::move(image), device, nullptr, nullptr, out);
}

CUresult ModuleManager::load_data(const void* data, CUmodule* out) {
  int device = 0;
  if (CUresult rc = current_device(&device); rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<const LoadedImage> image;
  if (CUresult rc = parse(data, nullptr, "cuModuleLoadData", &image); rc != CUDA_SUCCESS) return rc;
  return make_module(std::move(image), device, nullptr, nullptr, out);
}

CUresult ModuleManager::unload(CUmodule module) {
  auto m = modules_.find(module);
  if (!m || m->library) {  // a library's module goes with the library
    log::warn("cuModuleUnload: {} is not a loaded module", static_cast<const void*>(module));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!modules_.remove(module)) return CUDA_ERROR_INVALID_HANDLE;  // another thread won
  destroy_module(m);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::get_function(CUmodule module, const char* name, CUfunction* out) {
  auto m = modules_.find(module);
  if (!m) {
    log::warn("cuModuleGetFunction: {} is not a loaded module", static_cast<const void*>(module));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  auto it = m->image->kernel_index.find(name);
  if (it == m->image->kernel_index.end()) {
    log::warn("cuModuleGetFunction: the module has no kernel '{}'", name);
    return CUDA_ERROR_NOT_FOUND;
  }
  *out = m->functions[it->second];
  return CUDA_SUCCESS;
}

CUresult ModuleManager::function_count(CUmodule module, unsigned int* count) {
  auto m = modules_.find(module);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  *count = static_cast<unsigned int>(m->functions.size());
  return CUDA_SUCCESS;
}

CUresult ModuleManager::enumerate_functions(CUmodule module, CUfunction* out, unsigned int n) {
  auto m = modules_.find(module);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  if (n < m->functions.size()) {
    log::warn("cuModuleEnumerateFunctions: room for {} of {} functions", n, m->functions.size());
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::copy(m->functions.begin(), m->functions.end(), out);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::get_global(CUmodule module, const char* name, CUdeviceptr* ptr,
                                   size_t* bytes) {
  auto m = modules_.find(module);
  if (!m) {
    log::warn("cuModuleGetGlobal: {} is not a loaded module", static_cast<const void*>(module));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  auto it = m->globals.find(name);
  if (it == m->globals.end()) {
    log::warn("cuModuleGetGlobal: the module has no global '{}'", name);
    return CUDA_ERROR_NOT_FOUND;
  }
  if (ptr) *ptr = it->second.ptr;
  if (bytes) *bytes = it->second.size;
  return CUDA_SUCCESS;
}

// ---- libraries ----

CUresult ModuleManager::library_load_data(const void* data, CUlibrary* out) {
  std::shared_ptr<const LoadedImage> image;
  if (CUresult rc = parse(data, nullptr, "cuLibraryLoadData", &image); rc != CUDA_SUCCESS) return rc;
  return make_library(std::move(image), out);
}

CUresult ModuleManager::library_load_file(const char* path, CUlibrary* out) {
  struct stat st{};
  if (::stat(path, &st) != 0 || S_ISDIR(st.st_mode)) {
    log::warn("cuLibraryLoadFromFile: no file '{}'", path);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  // Parsed with the file's size known, so a truncated file is refused, never read past.
  std::shared_ptr<const LoadedImage> image;
  if (CUresult rc = parse(nullptr, path, "cuLibraryLoadFromFile", &image); rc != CUDA_SUCCESS) return rc;
  return make_library(std::move(image), out);
}

CUresult ModuleManager::make_library(std::shared_ptr<const LoadedImage> image, CUlibrary* out) {
  auto lib = std::make_shared<Library>();
  lib->handle = mint_handle<CUlibrary>(HandleKind::library);
  lib->image = image;
  for (size_t i = 0; i < image->kernels.size(); ++i) {
    auto k = std::make_shared<Kernel>();
    k->handle = mint_handle<CUkernel>(HandleKind::kernel);
    k->library = lib->handle;
    k->image = image;
    k->index = i;
    const CUkernel handle = k->handle;  // read before the move below: argument order is unspecified
    lib->kernels.push_back(handle);
    kernels_.add(handle, std::move(k));
  }
  const CUlibrary handle = lib->handle;
  libraries_.add(handle, std::move(lib));
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::library_unload(CUlibrary library) {
  auto lib = libraries_.remove(library);
  if (!lib) {
    log::warn("cuLibraryUnload: {} is not a loaded library", static_cast<const void*>(library));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (CUkernel k : lib->kernels) kernels_.remove(k);
  std::map<int, CUmodule> modules;
  {
    std::lock_guard lock(lib->mu);
    modules.swap(lib->modules);
  }
  for (auto& [device, handle] : modules)
    if (auto m = modules_.remove(handle)) destroy_module(m);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::library_module(const std::shared_ptr<Library>& lib, int device,
                                       std::shared_ptr<Module>* out) {
  std::lock_guard lock(lib->mu);
  auto it = lib->modules.find(device);
  if (it != lib->modules.end()) {
    *out = modules_.find(it->second);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  }
  CUmodule handle = nullptr;
  CUresult rc = make_module(lib->image, device, lib->handle, lib->kernels.data(), &handle);
  if (rc != CUDA_SUCCESS) return rc;
  lib->modules.emplace(device, handle);
  *out = modules_.find(handle);
  return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult ModuleManager::library_get_kernel(CUlibrary library, const char* name, CUkernel* out) {
  auto lib = libraries_.find(library);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  auto it = lib->image->kernel_index.find(name);
  if (it == lib->image->kernel_index.end()) {
    log::warn("cuLibraryGetKernel: the library has no kernel '{}'", name);
    return CUDA_ERROR_NOT_FOUND;
  }
  *out = lib->kernels[it->second];
  return CUDA_SUCCESS;
}

CUresult ModuleManager::library_kernel_count(CUlibrary library, unsigned int* count) {
  auto lib = libraries_.find(library);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  *count = static_cast<unsigned int>(lib->kernels.size());
  return CUDA_SUCCESS;
}

CUresult ModuleManager::library_enumerate_kernels(CUlibrary library, CUkernel* out, unsigned int n) {
  auto lib = libraries_.find(library);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  if (n < lib->kernels.size()) {
    log::warn("cuLibraryEnumerateKernels: room for {} of {} kernels", n, lib->kernels.size());
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::copy(lib->kernels.begin(), lib->kernels.end(), out);
  return CUDA_SUCCESS;
}

CUresult ModuleManager::library_get_module(CUlibrary library, CUmodule* out) {
  auto lib = libraries_.find(library);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  int device = 0;
  if (CUresult rc = current_device(&device); rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<Module> m;
  if (CUresult rc = library_module(lib, device, &m); rc != CUDA_SUCCESS) return rc;
  *out = m->handle;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::library_get_global(CUlibrary library, const char* name, bool managed,
                                           CUdeviceptr* ptr, size_t* bytes) {
  auto lib = libraries_.find(library);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  const module::GlobalInfo* g = lib->image->image.find_global(name);
  if (!g || g->managed != managed) {
    log::warn("{}: the library has no {}global '{}'",
              managed ? "cuLibraryGetManaged" : "cuLibraryGetGlobal", managed ? "managed " : "",
              name);
    return CUDA_ERROR_NOT_FOUND;
  }
  int device = 0;
  if (CUresult rc = current_device(&device); rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<Module> m;
  if (CUresult rc = library_module(lib, device, &m); rc != CUDA_SUCCESS) return rc;
  auto it = m->globals.find(name);
  if (it == m->globals.end()) return CUDA_ERROR_NOT_FOUND;
  if (ptr) *ptr = it->second.ptr;
  if (bytes) *bytes = it->second.size;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::kernel_get_function(CUkernel kernel, CUfunction* out) {
  return kernel_function_on(kernel, -1, out);
}

CUresult ModuleManager::kernel_function_on(CUkernel kernel, int device, CUfunction* out) {
  auto k = kernels_.find(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  auto lib = libraries_.find(k->library);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  if (device < 0)
    if (CUresult rc = current_device(&device); rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<Module> m;
  if (CUresult rc = library_module(lib, device, &m); rc != CUDA_SUCCESS) return rc;
  *out = m->functions[k->index];
  return CUDA_SUCCESS;
}

CUresult ModuleManager::kernel_get_library(CUkernel kernel, CUlibrary* out) {
  auto k = kernels_.find(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *out = k->library;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::kernel_get_name(CUkernel kernel, const char** name) {
  auto k = kernels_.find(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->image->kernels[k->index].name().c_str();  // lives as long as the library
  return CUDA_SUCCESS;
}

CUresult ModuleManager::kernel_param_info(CUkernel kernel, size_t index, size_t* offset,
                                          size_t* size) {
  auto k = kernels_.find(kernel);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  const KernelDesc& d = k->image->kernels[k->index];
  if (index >= d.params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = d.params[index].offset;
  if (size) *size = d.params[index].size;
  return CUDA_SUCCESS;
}

// ---- functions ----

CUresult ModuleManager::resolve_function(CUfunction f, std::shared_ptr<const Function>* out) {
  return resolve_on(f, -1, out);
}

CUresult ModuleManager::resolve_on(CUfunction f, int device, std::shared_ptr<const Function>* out) {
  if (auto fn = functions_.find(f)) {
    *out = std::move(fn);
    return CUDA_SUCCESS;
  }
  // CUDA 12 lets a CUkernel stand where a CUfunction is expected.
  if (kernels_.find(f)) {
    CUfunction resolved = nullptr;
    if (CUresult rc = kernel_function_on(reinterpret_cast<CUkernel>(f), device, &resolved);
        rc != CUDA_SUCCESS)
      return rc;
    if (auto fn = functions_.find(resolved)) {
      *out = std::move(fn);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult ModuleManager::function_name(CUfunction f, const char** name) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  *name = fn->desc().name().c_str();
  return CUDA_SUCCESS;
}

CUresult ModuleManager::function_param_info(CUfunction f, size_t index, size_t* offset, size_t* size) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  const KernelDesc& d = fn->desc();
  if (index >= d.params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = d.params[index].offset;
  if (size) *size = d.params[index].size;
  return CUDA_SUCCESS;
}

CUresult ModuleManager::function_module(CUfunction f, CUmodule* out) {
  std::shared_ptr<const Function> fn;
  if (CUresult rc = resolve_function(f, &fn); rc != CUDA_SUCCESS) return rc;
  *out = fn->module;
  return CUDA_SUCCESS;
}

}  // namespace vgpu
