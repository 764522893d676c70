// Quantities with units, as written in the cluster file and the environment.
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "simcore/cluster_config.h"

namespace simcore {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A non-negative decimal number at the start of `s`, then optional blanks; `s` keeps the unit.
std::optional<double> leading_number(std::string_view& s) {
  s = trim(s);
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::fixed);
  if (ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(end - s.data()));
  s = trim(s);
  return v;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// "k", "M", "Gi", ... (case-insensitive) at the start of `s`: its multiplier, `s` advanced.
double prefix_multiplier(std::string_view& s) {
  static constexpr std::string_view kLetters = "kmgt";
  if (s.empty()) return 1;
  const size_t power = kLetters.find(static_cast<char>(std::tolower(static_cast<unsigned char>(s[0]))));
  if (power == std::string_view::npos) return 1;
  const bool binary = s.size() > 1 && (s[1] == 'i' || s[1] == 'I');
  s.remove_prefix(binary ? 2 : 1);
  return std::pow(binary ? 1024.0 : 1000.0, static_cast<double>(power + 1));
}

}  // namespace

std::optional<uint64_t> parse_bytes(std::string_view text) {
  auto value = leading_number(text);
  if (!value) return std::nullopt;
  const double scale = prefix_multiplier(text);
  if (!(text.empty() ? scale == 1 : iequals(text, "b"))) return std::nullopt;
  const double bytes = std::round(*value * scale);
  if (bytes >= 9.2e18) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::optional<double> parse_bandwidth(std::string_view text) {
  auto value = leading_number(text);
  if (!value) return std::nullopt;
  const double scale = prefix_multiplier(text);
  if (text.empty() || (text[0] != 'B' && text[0] != 'b')) return std::nullopt;
  const double unit = text[0] == 'B' ? 1.0 : 1.0 / 8;  // the letter's case tells bytes from bits
  text.remove_prefix(1);
  if (text != "/s" && !iequals(text, "ps")) return std::nullopt;
  return *value * scale * unit;
}

std::optional<double> parse_duration(std::string_view text) {
  auto value = leading_number(text);
  if (!value) return std::nullopt;
  double scale = 0;
  if (text == "s") scale = 1;
  else if (text == "ms") scale = 1e-3;
  else if (text == "us" || text == "\xC2\xB5s" || text == "\xCE\xBCs") scale = 1e-6;  // µ (micro or mu)
  else if (text == "ns") scale = 1e-9;
  else return std::nullopt;
  return *value * scale;
}

}  // namespace simcore
