// Logging for every vgpu component. One environment switch, VGPU_LOG_LEVEL
// (trace|debug|info|warn|error|off), sets the level; the default is off, because a driver lives
// inside other people's processes and must not write to their terminals unasked.
// spdlog does the work behind log.cpp; only fmt is seen here, and both stay hidden inside our
// libraries (header-only, hidden visibility).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>
#include <utility>

namespace vgpu::log {

enum class Level : int { trace = 0, debug = 1, info = 2, warn = 3, error = 4, off = 5 };

// The level chosen by VGPU_LOG_LEVEL, read once.
Level threshold();
inline bool enabled(Level l) { return static_cast<int>(l) >= static_cast<int>(threshold()); }
// Writes one line (cut at 4 KiB: a message quoting user input says how much was left out).
void write(Level l, std::string_view message);
// How many lines at warn or above this thread has written: a driver entry point compares it
// before and after a call to know whether its error return was already explained.
uint64_t lines_written_here();

// Log `message` only the first time `key` is seen in this process (e.g. an unimplemented entry
// point names itself once, however often it is called). Thread-safe.
void once(Level l, std::string_view key, std::string_view message);

template <class... A> void at(Level l, fmt::format_string<A...> f, A&&... a) {
  if (enabled(l)) write(l, fmt::format(f, std::forward<A>(a)...));
}
template <class... A> void trace(fmt::format_string<A...> f, A&&... a) { at(Level::trace, f, std::forward<A>(a)...); }
template <class... A> void debug(fmt::format_string<A...> f, A&&... a) { at(Level::debug, f, std::forward<A>(a)...); }
template <class... A> void info(fmt::format_string<A...> f, A&&... a) { at(Level::info, f, std::forward<A>(a)...); }
template <class... A> void warn(fmt::format_string<A...> f, A&&... a) { at(Level::warn, f, std::forward<A>(a)...); }
template <class... A> void error(fmt::format_string<A...> f, A&&... a) { at(Level::error, f, std::forward<A>(a)...); }

}  // namespace vgpu::log

namespace vgpu::log {
// For the few messages a user must see whatever the level (a configuration they wrote that
// cannot be used): written to stderr once per distinct message, unless VGPU_LOG_LEVEL=off.
void always(std::string_view message);
}  // namespace vgpu::log
