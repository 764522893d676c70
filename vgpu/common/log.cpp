#include "log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "settings.h"

namespace vgpu::log {
namespace {

// VGPU_LOG_LEVEL as the settings registry parsed it (unset: off; unreadable: warn, because the
// user wants to hear something). Read quietly: the registry's report of an unreadable level is
// itself a log line, written once logging can run.
Level parse_level(const std::string& s) {
  static constexpr std::pair<const char*, Level> kNames[] = {
      {"trace", Level::trace}, {"debug", Level::debug}, {"info", Level::info},
      {"warn", Level::warn},   {"warning", Level::warn}, {"error", Level::error},
      {"off", Level::off}};
  for (const auto& [name, level] : kNames)
    if (s == name) return level;
  return Level::warn;
}

// The logger is created on first use and deliberately never destroyed: driver calls may come
// from other libraries' static destructors after ours have run.
spdlog::logger& logger() {
  static spdlog::logger* instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* l = new spdlog::logger("vgpu", std::move(sink));
    l->set_pattern("[vgpu %P:%t %l] %v");
    l->set_level(spdlog::level::trace);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *instance;
}

spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::trace: return spdlog::level::trace;
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    case Level::off: break;
  }
  return spdlog::level::off;
}

}  // namespace

Level threshold() {
  static const Level level = parse_level(settings::text_quietly(settings::Id::log_level).value_or("off"));
  return level;
}

namespace {
thread_local uint64_t t_lines_at_warn = 0;  // see lines_written_here()

// A message quoting user input (a config value, a path, a name) can be any size; a log line is
// cut at kMaxLine bytes and says how much was left out.
constexpr size_t kMaxLine = 4096;
template <class F> void with_bounded(std::string_view message, F&& f) {
  if (message.size() <= kMaxLine) return f(message);
  f(fmt::format("{}... ({} more bytes not shown)", message.substr(0, kMaxLine), message.size() - kMaxLine));
}
}  // namespace

uint64_t lines_written_here() { return t_lines_at_warn; }

void write(Level l, std::string_view message) {
  if (!enabled(l)) return;
  if (static_cast<int>(l) >= static_cast<int>(Level::warn)) ++t_lines_at_warn;
  with_bounded(message, [&](std::string_view m) { logger().log(to_spdlog(l), "{}", m); });
}

// True the first time `key` is seen in this process.
bool first_time(std::string_view key) {
  static std::mutex* mu = new std::mutex;
  static auto* seen = new std::unordered_set<std::string>;
  std::lock_guard<std::mutex> lock(*mu);
  return seen->emplace(key).second;
}

void once(Level l, std::string_view key, std::string_view message) {
  if (enabled(l) && first_time(key)) write(l, message);
}

}  // namespace vgpu::log

namespace vgpu::log {
void always(std::string_view message) {
  if (settings::text_quietly(settings::Id::log_level) == "off") return;  // set to off, not just unset
  if (!first_time(message)) return;
  ++t_lines_at_warn;
  with_bounded(message, [](std::string_view m) { logger().log(spdlog::level::err, "{}", m); });
}
}  // namespace vgpu::log
