#include "settings_table.h"

#include <fmt/format.h>

#include "settings.h"

namespace vgpu::settings {
namespace {

// A Markdown cell: a '|' inside would end the cell.
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

std::string type_cell(const Spec& s) {
  switch (s.type) {
    case Type::choice: {
      std::string words;
      std::string_view rest = s.choices;
      while (!rest.empty()) {
        const size_t bar = rest.find('|');
        words += (words.empty() ? "`" : ", `") + std::string(rest.substr(0, bar)) + "`";
        rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
      }
      return "one of " + words;
    }
    case Type::integer:
    case Type::real:
    case Type::int_list: return accepted(s);
    default: return std::string(type_name(s.type));
  }
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string markdown_table() {
  std::string out = "| variable | type | default | meaning | read by |\n| --- | --- | --- | --- | --- |\n";
  for (const Spec& s : kSpecs) {
    const std::string def = s.default_value.empty() ? "unset" : fmt::format("`{}`", s.default_value);
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", s.name, cell(type_cell(s)), cell(def), cell(s.meaning),
                       cell(s.readers));
  }
  return out;
}

std::string json_table() {
  std::string out = "[\n";
  for (const Spec& s : kSpecs) {
    out += fmt::format(
        "  {{\"name\": {}, \"type\": {}, \"default\": {}, \"meaning\": {}, \"readers\": {}, \"accepted\": {}, "
        "\"reading\": {}, \"own_parser\": {}}}{}\n",
        json_string(s.name), json_string(type_name(s.type)), json_string(s.default_value), json_string(s.meaning),
        json_string(s.readers), json_string(accepted(s)),
        json_string(s.reading == Reading::once ? "once" : "each_use"), s.own_parser ? "true" : "false",
        &s == &kSpecs[std::size(kSpecs) - 1] ? "" : ",");
  }
  return out + "]\n";
}

}  // namespace vgpu::settings
