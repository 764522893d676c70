#include "cupti_library.h"
#include "common/settings.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include <fmt/format.h>

namespace vgpu::cupti {
namespace {

// The sonames CUPTI 13 ships under, newest ABI first.
constexpr const char* kNames[] = {"libcupti.so.13", "libcupti.so"};

// Toolkit folders that hold libcupti (relative to a CUDA root).
constexpr const char* kToolkitDirs[] = {"extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib",
                                        "targets/sbsa-linux/lib"};

// Folders of the nvidia pip wheels (relative to site-packages): CUDA 13 wheels put every library
// in nvidia/cu13/lib, the CUDA 12 ones one package per library.
constexpr const char* kWheelDirs[] = {"nvidia/cu13/lib", "nvidia/cuda_cupti/lib"};

// ".../site-packages" or ".../dist-packages" when `path` lies inside one.
std::string_view site_packages_of(std::string_view path) {
  for (std::string_view marker : {"/site-packages/", "/dist-packages/"}) {
    if (size_t at = path.find(marker); at != std::string_view::npos)
      return path.substr(0, at + marker.size() - 1);
  }
  return {};
}

std::vector<std::string> loaded_object_paths() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name && info->dlpi_name[0] == '/')
          static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> found;
  glob_t g{};
  if (glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return found;
}

template <class F> bool resolve(void* handle, const char* name, F& slot, std::string* missing) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  if (!slot && missing->empty()) *missing = name;
  return slot != nullptr;
}

// Opens `candidate` and resolves every entry point; fills `why` on failure.
bool try_open(const std::string& candidate, CuptiLibrary& lib, std::string& why) {
  // RTLD_LOCAL: CUPTI's symbols must not become visible to the host process's later lookups.
  void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    why = e ? e : "dlopen failed";
    return false;
  }
  std::string missing;
  bool ok = true;
  ok &= resolve(handle, "cuptiGetResultString", lib.GetResultString, &missing);
  ok &= resolve(handle, "cuptiActivityRegisterCallbacks", lib.ActivityRegisterCallbacks, &missing);
  ok &= resolve(handle, "cuptiActivityEnable", lib.ActivityEnable, &missing);
  ok &= resolve(handle, "cuptiActivityDisable", lib.ActivityDisable, &missing);
  ok &= resolve(handle, "cuptiActivityFlushAll", lib.ActivityFlushAll, &missing);
  ok &= resolve(handle, "cuptiActivityGetNextRecord", lib.ActivityGetNextRecord, &missing);
  ok &= resolve(handle, "cuptiActivityGetNumDroppedRecords", lib.ActivityGetNumDroppedRecords,
                &missing);
  ok &= resolve(handle, "cuptiActivityPushExternalCorrelationId",
                lib.ActivityPushExternalCorrelationId, &missing);
  ok &= resolve(handle, "cuptiActivityPopExternalCorrelationId",
                lib.ActivityPopExternalCorrelationId, &missing);
  lib.ActivityFlushPeriod = reinterpret_cast<decltype(lib.ActivityFlushPeriod)>(
      dlsym(handle, "cuptiActivityFlushPeriod"));
  lib.GetStreamIdEx = reinterpret_cast<decltype(lib.GetStreamIdEx)>(dlsym(handle, "cuptiGetStreamIdEx"));
  lib.GetContextId = reinterpret_cast<decltype(lib.GetContextId)>(dlsym(handle, "cuptiGetContextId"));
  if (!ok) {
    why = fmt::format("{}: no {}", candidate, missing);
    // Not CUPTI: nothing of it has run yet, so it can go.
    dlclose(handle);
    return false;
  }
  // Report the file actually mapped (a bare soname resolves through the loader path).
  lib.path = candidate;
  if (link_map* map = nullptr; dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name &&
                               map->l_name[0] == '/')
    lib.path = map->l_name;
  return true;
}

}  // namespace

std::string CuptiLibrary::error_name(CUptiResult r) const {
  const char* text = nullptr;
  if (GetResultString && GetResultString(r, &text) == CUPTI_SUCCESS && text) return text;
  return fmt::format("CUPTI error {}", static_cast<int>(r));
}

std::vector<std::string> cupti_candidates(std::string_view explicit_path, std::string_view cuda_home,
                                          const std::vector<std::string>& loaded_objects) {
  if (!explicit_path.empty()) return {std::string(explicit_path)};

  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](std::string p) {
    if (seen.insert(p).second) out.push_back(std::move(p));
  };
  // The loader's own path first (LD_LIBRARY_PATH, ldconfig): what the user set up wins.
  for (const char* name : kNames) add(name);

  std::vector<std::string> roots;
  if (!cuda_home.empty()) roots.emplace_back(cuda_home);
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots)
    for (const char* dir : kToolkitDirs)
      for (const char* name : kNames) add(fmt::format("{}/{}/{}", root, dir, name));

  // Wheels beside what the process already loaded (torch's own nvidia/* libraries).
  std::vector<std::string> sites;
  for (const std::string& obj : loaded_objects)
    if (auto sp = site_packages_of(obj); !sp.empty()) sites.emplace_back(sp);
  for (const std::string& sp : sites)
    for (const char* dir : kWheelDirs)
      for (const char* name : kNames) add(fmt::format("{}/{}/{}", sp, dir, name));
  return out;
}

const CuptiLibrary* load_cupti(std::string* error) {
  // One loaded library per process, never unloaded; failures are retried on the next call.
  static std::mutex mutex;
  static CuptiLibrary* loaded = nullptr;
  std::lock_guard lock(mutex);
  if (loaded) return loaded;

  const std::string env = vgpu::settings::text(vgpu::settings::Id::cupti_library);
  const char* home = std::getenv("CUDA_HOME");  // not ours: the CUDA toolkit's
  std::vector<std::string> candidates = cupti_candidates(env, home ? home : "", loaded_object_paths());
  if (env.empty()) {
    // Wheels in the usual install locations, for processes that have not loaded torch yet.
    for (const char* pattern :
         {"/usr/local/lib/python3*/*-packages", "/usr/lib/python3/dist-packages",
          "/opt/conda/lib/python3*/site-packages"}) {
      for (const std::string& sp : glob_paths(pattern))
        for (const char* dir : kWheelDirs)
          for (const char* name : kNames) candidates.push_back(fmt::format("{}/{}/{}", sp, dir, name));
    }
    for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
      if (const char* prefix = std::getenv(var); prefix && *prefix) {
        for (const std::string& sp : glob_paths(fmt::format("{}/lib/python3*/site-packages", prefix)))
          for (const char* dir : kWheelDirs)
            for (const char* name : kNames) candidates.push_back(fmt::format("{}/{}/{}", sp, dir, name));
      }
    }
  }

  std::string first_reason;
  for (const std::string& c : candidates) {
    CuptiLibrary lib;
    std::string why;
    if (try_open(c, lib, why)) {
      loaded = new CuptiLibrary(std::move(lib));  // immortal: CUPTI's threads may call back late
      return loaded;
    }
    // A symbol mismatch says more than "file not found" for the next candidate.
    if (first_reason.empty() || why.find(": no ") != std::string::npos) first_reason = why;
  }
  if (error) {
    *error = !env.empty() ? fmt::format("VGPU_CUPTI_LIBRARY={}: {}", env, first_reason)
                           : fmt::format("libcupti not found ({} places tried; e.g. {})",
                                         candidates.size(), first_reason);
  }
  return nullptr;
}

}  // namespace vgpu::cupti
