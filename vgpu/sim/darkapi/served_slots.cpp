#include "sim/darkapi/served_slots.h"

#include <fmt/format.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "front/driver/query_lines.h"
#include "sim/darkapi/slots.h"

namespace vgpu::darkapi {
namespace {

// A slot vgpu implements with `Fn`, wrapped for VGPU_TRACE.
template <TableId T, size_t S, auto Fn>
SlotImpl ours(const char* name, const char* params) {
  return {T, static_cast<uint16_t>(S), SlotKind::ours, name, params,
          reinterpret_cast<const void*>(&Traced<T, S, Fn>::call)};
}
// A slot the real driver leaves null.
constexpr SlotImpl absent(TableId t, uint16_t s) {
  return {t, s, SlotKind::absent, "absent in the real driver", "", nullptr};
}

using enum TableId;
namespace s = slots;

// Built on first use (not at static initialization: a runtime may ask for a table from its
// own static constructors before ours have run).
std::span<const SlotImpl> build_impls() {
  static const SlotImpl impls[] = {
    ours<cudart_interface, 1, &s::module_from_fatbin_wrapper>(
        "module_from_fatbin_wrapper", "module, wrapper"),
    ours<cudart_interface, 2, &s::primary_context>("primary_context", "out, device"),
    ours<cudart_interface, 6, &s::module_from_fatbin_wrapper_ex>(
        "module_from_fatbin_wrapper_ex", "module, wrapper, arg3, arg4, arg5"),
    ours<cudart_interface, 7, &s::cudart_slot7>("slot7_noop", "arg"),
    ours<cudart_interface, 8, &s::module_from_fatbin_ex>(
        "module_from_fatbin_ex", "fatbin, module, arg3, arg4, arg5"),
    absent(cudart_interface, 10),
    ours<cudart_interface, 12, &s::load_compilers>("load_compilers", ""),

    ours<tools_callback_hooks, 2, &s::callback_buffer1>("callback_buffer1", "ptr, size"),
    ours<tools_callback_hooks, 6, &s::callback_buffer2>("callback_buffer2", "ptr, size"),

    ours<tools_tls, 2, &s::current_context>("current_context", "out"),

    ours<context_local_storage, 0, &s::cls_put>("put", "ctx, key, value, destructor"),
    ours<context_local_storage, 1, &s::cls_delete>("delete", "ctx, key"),
    ours<context_local_storage, 2, &s::cls_get>("get", "value, ctx, key"),
    absent(context_local_storage, 3),

    ours<context_checks, 2, &s::context_check>("context_check", "ctx, flags, detail"),
    ours<context_checks, 3, &s::context_check_global>("context_check_global", ""),

    ours<integrity_check, 1, &s::integrity_check>("integrity_check", "version, unix_seconds, out"),

    ours<context_info, 4, &s::context_id>("context_id", "ctx, id"),
    ours<context_info, 39, &s::context_lookup>("context_lookup", "ctx, arg1, out, arg3, kind, arg5"),
    ours<context_info, 51, &s::context_object>("context_object", "ctx, arg1, out, arg3, kind, arg5"),
    absent(context_info, 91),

    ours<library_1734dc26, 4, &s::library_slot4>("tpc_layout", "layout_out, other_out, a2, a3, a4, a5"),
    ours<library_1734dc26, 13, &s::library_slot13>("tpc_layout_release", "layout, other, a2, a3, a4, a5"),

    ours<tools_module, 7, &s::module_functions>("module_functions", "ctx, module, visit, opaque"),
  };
  return impls;
}

}  // namespace

std::span<const SlotImpl> slot_impls() { return build_impls(); }

const SlotImpl* find_impl(TableId table, size_t slot) {
  for (const SlotImpl& i : slot_impls())
    if (i.table == table && i.slot == slot) return &i;
  return nullptr;
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
  if (query_trace::enabled())
    query_trace::private_slot(uuid_text(t.uuid).substr(0, 8), slot, regs, CUDA_ERROR_NOT_SUPPORTED);
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace vgpu::darkapi
