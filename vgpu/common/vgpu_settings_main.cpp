// vgpu-settings: the settings registry (settings.h) printed for people and tools.
//   vgpu-settings --markdown   the README's table of settings
//   vgpu-settings --json       every setting with its type, default, meaning, readers
//   vgpu-settings --check      each VGPU_* variable of this environment: its value as parsed, or
//                              why it is malformed; exit 1 if one is malformed or not declared
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "settings.h"
#include "settings_table.h"

extern char** environ;

namespace {

int check() {
  using namespace vgpu::settings;
  int bad = 0;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("VGPU_")) continue;
    const size_t eq = entry.find('=');
    const std::string name(entry.substr(0, eq));
    const Spec* s = find(name);
    if (s == nullptr) {
      std::printf("%s: not a vgpu setting (misspelt?)\n", name.c_str());
      ++bad;
      continue;
    }
    const Parsed p = parse(*s, std::getenv(name.c_str()));
    if (!p.complaint.empty()) {
      std::printf("%s\n", p.complaint.c_str());
      ++bad;
    } else {
      std::printf("%s: ok\n", name.c_str());
    }
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view what = argc == 2 ? argv[1] : "";
  if (what == "--markdown") return std::fputs(vgpu::settings::markdown_table().c_str(), stdout) < 0;
  if (what == "--json") return std::fputs(vgpu::settings::json_table().c_str(), stdout) < 0;
  if (what == "--check") return check();
  std::fputs("usage: vgpu-settings --markdown | --json | --check\n", argc == 2 && what == "--help" ? stdout : stderr);
  return argc == 2 && what == "--help" ? 0 : 2;
}
