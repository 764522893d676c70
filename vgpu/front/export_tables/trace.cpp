#include "front/export_tables/trace.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/settings.h"

namespace vgpu::darkapi {

bool trace_enabled() {
  static const bool on = settings::flag(settings::Id::trace);
  return on;
}

void trace_line(std::string_view text) {
  std::string line = fmt::format("[vgpu trace {}:{}] {}\n", getpid(),
                                 static_cast<long>(syscall(SYS_gettid)), text);
  // One write() per line keeps lines of concurrent threads whole.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

namespace {

// "a, b, c" -> {"a", "b", "c"}
std::vector<std::string_view> split_params(const char* params) {
  std::vector<std::string_view> out;
  std::string_view s = params ? params : "";
  while (!s.empty()) {
    const size_t comma = s.find(',');
    std::string_view name = s.substr(0, comma);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    out.push_back(name);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// Pairs "x, y" with "1, 2" as "x=1, y=2" (values are split on ", ", which no value contains).
std::string name_args(const char* params, std::string_view values) {
  const std::vector<std::string_view> names = split_params(params);
  std::string out;
  size_t i = 0;
  while (!values.empty()) {
    const size_t sep = values.find(", ");
    const std::string_view v = values.substr(0, sep);
    if (!out.empty()) out += ", ";
    if (i < names.size()) out += fmt::format("{}={}", names[i], v);
    else out += v;
    ++i;
    if (sep == std::string_view::npos) break;
    values.remove_prefix(sep + 2);
  }
  return out;
}

}  // namespace

void trace_slot_call(TableId table, size_t slot, std::string_view args, std::string_view result) {
  const TableInfo& t = info(table);
  const SlotImpl* impl = find_impl(table, slot);
  trace_line(fmt::format("{}[{}] {}.{}({}) -> {}", uuid_text(t.uuid).substr(0, 8), slot, t.name,
                         impl ? impl->name : "unknown", impl ? name_args(impl->params, args) : std::string(args),
                         result));
}

CUresult unknown_slot_called(TableId table, size_t slot, const uintptr_t (&regs)[6]) {
  const TableInfo& t = info(table);
  const std::string where = fmt::format("{}[{}] ({})", uuid_text(t.uuid), slot, t.name);
  log::once(log::Level::warn, "darkapi " + where,
            fmt::format("private table slot {} is not implemented by vgpu: returning "
                        "CUDA_ERROR_NOT_SUPPORTED (VGPU_TRACE=1 shows its arguments)",
                        where));
  if (trace_enabled())
    trace_line(fmt::format("{}[{}] {}.unknown(first six registers: {:#x}, {:#x}, {:#x}, {:#x}, "
                           "{:#x}, {:#x}) -> {}",
                           uuid_text(t.uuid).substr(0, 8), slot, t.name, regs[0], regs[1], regs[2],
                           regs[3], regs[4], regs[5], static_cast<int>(CUDA_ERROR_NOT_SUPPORTED)));
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace vgpu::darkapi
