#include "passthrough/real_driver.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/log.h"
#include "common/settings.h"

namespace vgpu::pt {
namespace {

// The file this library was loaded from (what the program found as libcuda.so.1).
std::string own_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&real_driver_candidates), &info) == 0 || !info.dli_fname)
    return {};
  return info.dli_fname;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa{}, sb{};
  if (a.empty() || b.empty() || stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0)
    return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// libcuda.so.580.159.04 and the like: "libcuda.so." followed by a dotted version with at
// least two numbers (libcuda.so.1 is the name vgpu itself answers to).
bool is_versioned_driver(const char* name) {
  static constexpr char kPrefix[] = "libcuda.so.";
  if (std::strncmp(name, kPrefix, sizeof kPrefix - 1) != 0) return false;
  const char* v = name + sizeof kPrefix - 1;
  if (!*v || std::strchr(v, '.') == nullptr) return false;
  return std::all_of(v, v + std::strlen(v), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

std::vector<std::string> versioned_beside(const std::string& own) {
  std::vector<std::string> out;
  const auto slash = own.rfind('/');
  if (slash == std::string::npos) return out;
  const std::string dir = own.substr(0, slash);
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (is_versioned_driver(e->d_name)) out.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  std::sort(out.rbegin(), out.rend());  // the newest version first
  return out;
}

}  // namespace

std::vector<std::string> real_driver_candidates() {
  std::vector<std::string> out;
  if (std::string env = settings::text(settings::Id::real_libcuda); !env.empty()) return {env};
  for (auto& p : versioned_beside(own_path())) out.push_back(std::move(p));
  for (const char* p : {"/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                        "/usr/lib64/libcuda.so.1", "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
                        "/usr/lib/wsl/lib/libcuda.so.1"})
    out.emplace_back(p);
  return out;
}

const RealDriver* RealDriver::get() {
  static const RealDriver* driver = [] () -> const RealDriver* {
    const std::string own = own_path();
    std::string tried;
    for (const std::string& path : real_driver_candidates()) {
      tried += (tried.empty() ? "" : ", ") + path;
      if (same_file(path, own)) continue;
      void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) continue;
      // A copy of vgpu under another name is not a driver.
      void* init = dlsym(h, "cuInit");
      Dl_info info{};
      if (init == nullptr || (dladdr(init, &info) != 0 && info.dli_fname && same_file(info.dli_fname, own))) {
        dlclose(h);
        continue;
      }
      log::info("passthrough: real driver {}", path);
      return new RealDriver(h, path);  // never closed: the driver's threads outlive any owner
    }
    log::always(fmt::format("vgpu passthrough: no real libcuda found (tried {}); set VGPU_REAL_LIBCUDA", tried));
    return nullptr;
  }();
  return driver;
}

void* RealDriver::symbol(const char* name) const { return dlsym(handle_, name); }

}  // namespace vgpu::pt
