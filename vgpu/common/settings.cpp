#include "settings.h"

#include <fmt/format.h>

#include <strings.h>

#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "log.h"

namespace vgpu::settings {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool same_word(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::optional<bool> as_flag(std::string_view s) {
  for (const char* yes : {"1", "true", "yes", "on"})
    if (same_word(s, yes)) return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (same_word(s, no)) return false;
  return std::nullopt;
}

std::optional<int64_t> as_integer(std::string_view s, const Spec& spec) {
  s = trimmed(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if (static_cast<double>(v) < spec.min || static_cast<double>(v) > spec.max) return std::nullopt;
  return v;
}

std::optional<double> as_real(std::string_view s, const Spec& spec) {
  const std::string text(trimmed(s));
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < spec.min || v > spec.max) return std::nullopt;
  return v;
}

// The choice `s` names, in its declared spelling.
std::optional<std::string> as_choice(std::string_view s, const Spec& spec) {
  s = trimmed(s);
  std::string_view rest = spec.choices;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    const std::string_view word = rest.substr(0, bar);
    if (same_word(s, word)) return std::string(word);
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> as_list(std::string_view s, const Spec& spec) {
  std::vector<int64_t> out;
  while (true) {
    const size_t comma = s.find(',');
    auto item = as_integer(s.substr(0, comma), spec);
    if (!item) return std::nullopt;
    out.push_back(*item);
    if (comma == std::string_view::npos) return out;
    s.remove_prefix(comma + 1);
  }
}

// Fills `out` from `text`; false when `text` is not a value of `spec`.
bool fill(const Spec& spec, std::string_view text, Parsed& out) {
  switch (spec.type) {
    case Type::flag:
      if (auto v = as_flag(trimmed(text))) return out.flag = *v, true;
      return false;
    case Type::integer:
      if (auto v = as_integer(text, spec)) return out.integer = *v, true;
      return false;
    case Type::real:
      if (auto v = as_real(text, spec)) return out.real = *v, true;
      return false;
    case Type::choice:
      if (auto v = as_choice(text, spec)) return out.text = std::move(*v), true;
      return false;
    case Type::int_list:
      if (auto v = as_list(text, spec)) return out.list = std::move(*v), true;
      return false;
    case Type::text:
    case Type::path:
      out.text = std::string(text);
      return true;
  }
  return false;
}

// A `once` setting's value: parsed on first use, then read without a lock.
struct Cache {
  std::mutex mu;
  std::array<std::atomic<const Parsed*>, std::size(kSpecs)> values{};
  std::vector<const Parsed*> retired;  // kept alive: a caller may still hold a reference
  // Complaints of values read by text_quietly, reported by the next ordinary access.
  std::array<std::atomic<bool>, std::size(kSpecs)> complaint_pending{};
  std::atomic<bool> any_pending{false};  // one load on the common path
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: settings are read from static destructors too
  return *c;
}

void report(const std::string& complaint) {
  if (!complaint.empty()) log::always(complaint);
}

// The parsed value of `id` and whether it was parsed just now (so its complaint is due).
const Parsed& cached(Id id, bool* fresh) {
  Cache& c = cache();
  auto& slot = c.values[static_cast<size_t>(id)];
  if (const Parsed* p = slot.load(std::memory_order_acquire)) return *p;
  std::lock_guard lock(c.mu);
  if (const Parsed* p = slot.load(std::memory_order_relaxed)) return *p;
  auto* p = new Parsed(parse(spec(id), std::getenv(spec(id).name.data())));
  slot.store(p, std::memory_order_release);
  *fresh = true;
  return *p;
}

// A complaint of a value read quietly waits for a moment when logging can run (text_quietly).
void report_quiet_complaints() {
  Cache& c = cache();
  if (!c.any_pending.load(std::memory_order_acquire) || !c.any_pending.exchange(false)) return;
  for (size_t i = 0; i < std::size(kSpecs); ++i) {
    if (!c.complaint_pending[i].exchange(false)) continue;
    bool unused = false;
    report(cached(static_cast<Id>(i), &unused).complaint);
  }
}

// The value of `id` now, its complaint (if any) reported once per process.
Parsed value(Id id) {
  const Spec& s = spec(id);
  report_quiet_complaints();
  if (s.reading == Reading::each_use) {
    Parsed p = parse(s, std::getenv(s.name.data()));
    report(p.complaint);  // log::always prints one distinct line once
    return p;
  }
  bool fresh = false;
  const Parsed& p = cached(id, &fresh);
  if (fresh) report(p.complaint);
  return p;
}

bool typed(Id id, std::initializer_list<Type> types) {
  for (Type t : types)
    if (spec(id).type == t) return true;
  log::error("settings: {} is not read as its declared type (a bug in vgpu)", spec(id).name);
  return false;
}

}  // namespace

std::string_view type_name(Type t) {
  switch (t) {
    case Type::flag: return "flag";
    case Type::integer: return "integer";
    case Type::real: return "number";
    case Type::text: return "text";
    case Type::path: return "path";
    case Type::choice: return "choice";
    case Type::int_list: return "integer list";
  }
  return "?";
}

namespace {

// A range bound as the user would write it: whole numbers without exponent, 2^30 as "1 GiB".
std::string number(double v) {
  if (v == kGiB) return "1 GiB";
  if (v == std::floor(v) && std::fabs(v) <= 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}

}  // namespace

std::string accepted(const Spec& s) {
  switch (s.type) {
    case Type::flag: return "1/0, true/false, yes/no or on/off";
    case Type::integer: return fmt::format("an integer from {} to {}", number(s.min), number(s.max));
    case Type::real: return fmt::format("a number from {} to {}", number(s.min), number(s.max));
    case Type::choice: {
      std::string words(s.choices);
      for (size_t bar; (bar = words.find('|')) != std::string::npos;) words.replace(bar, 1, ", ");
      return "one of " + words;
    }
    case Type::int_list:
      return fmt::format("comma-separated integers from {} to {}", number(s.min), number(s.max));
    case Type::text: return "any text";
    case Type::path: return "a path";
  }
  return {};
}

Parsed parse(const Spec& spec, const char* value) {
  Parsed out;
  if (!spec.default_value.empty()) fill(spec, spec.default_value, out);
  if (value == nullptr || *value == '\0') return out;  // an empty variable counts as unset
  Parsed given;
  if (fill(spec, value, given)) {
    given.set = true;
    return given;
  }
  const std::string_view fallback = spec.if_malformed.empty() ? spec.default_value : spec.if_malformed;
  if (!spec.if_malformed.empty()) fill(spec, spec.if_malformed, out);
  out.complaint = fmt::format("vgpu: {}='{}' is not {}; using {}", spec.name, value, accepted(spec),
                              fallback.empty() ? std::string("the default (unset)") : std::string(fallback));
  return out;
}

const Spec* find(std::string_view name) {
  for (const Spec& s : kSpecs)
    if (s.name == name) return &s;
  return nullptr;
}

bool flag(Id id) { return typed(id, {Type::flag}) && value(id).flag; }
int64_t integer(Id id) { return typed(id, {Type::integer}) ? value(id).integer : 0; }
double real(Id id) { return typed(id, {Type::real}) ? value(id).real : 0; }
std::string text(Id id) {
  return typed(id, {Type::text, Type::path, Type::choice}) ? value(id).text : std::string();
}
std::vector<int64_t> int_list(Id id) { return typed(id, {Type::int_list}) ? value(id).list : std::vector<int64_t>{}; }
bool is_set(Id id) { return value(id).set; }

const char* raw(Id id) {
  const char* v = std::getenv(spec(id).name.data());
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::optional<std::string> text_quietly(Id id) {
  if (!typed(id, {Type::text, Type::path, Type::choice}) || spec(id).reading != Reading::once) return std::nullopt;
  bool fresh = false;
  const Parsed& p = cached(id, &fresh);
  if (fresh && !p.complaint.empty()) {
    cache().complaint_pending[static_cast<size_t>(id)].store(true);
    cache().any_pending.store(true);
  }
  if (!p.set && p.complaint.empty()) return std::nullopt;
  return p.text;
}

void reread_for_testing() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& slot : c.values)
    if (const Parsed* p = slot.exchange(nullptr)) c.retired.push_back(p);
  for (auto& pending : c.complaint_pending) pending.store(false);
  c.any_pending.store(false);
}

}  // namespace vgpu::settings
