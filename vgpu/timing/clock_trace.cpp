// VGPU_CLOCK_TRACE (see clock_trace.h).
#include "timing/clock_trace.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "common/exit_report.h"
#include "common/settings.h"
#include "timing/code_address.h"
#include "timing/outside_cpu_time.h"

namespace vgpu::timing::clock_trace {
namespace {

struct Entry {
  long tid = 0;
  std::string name;
  std::unique_ptr<Buffer> buffer;  // kept after its thread ends: the report is written at exit
};

struct Registry {
  std::mutex mu;
  std::list<Entry> entries;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may still record at exit
  return *r;
}

const char* move_name(Move m) {
  switch (m) {
    case Move::call: return "call";
    case Move::query: return "query";
    case Move::ready: return "ready";
    case Move::sync: return "sync";
    case Move::horizon: return "horizon";
    case Move::read: return "read";
    case Move::wait: return "wait";
  }
  return "?";
}

std::string with_offset(const std::string& name, std::uintptr_t offset) {
  char text[32];
  std::snprintf(text, sizeof text, "+0x%zx", static_cast<size_t>(offset));
  return name + text;
}

// "library+0xoffset symbol+0xoffset" of a code address (code_address.h), each looked up once;
// `is_return`: a caller's return address, named by its call.
std::string where(const void* address, bool is_return, std::map<const void*, std::string>& seen) {
  if (address == nullptr) return "";
  auto [it, fresh] = seen.try_emplace(address);
  if (!fresh) return it->second;
  const std::optional<CodeAddress> c = describe_code(address, is_return);
  if (!c) return it->second = "?";
  std::string text = with_offset(c->library, c->offset);
  if (!c->symbol.empty()) text += " " + with_offset(c->symbol, c->symbol_offset);
  return it->second = json_safe(text);
}

}  // namespace

std::string lines() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::string out;
  for (const Entry& e : r.entries) {
    std::string header = "{\"pid\": " + std::to_string(::getpid()) + ", \"tid\": " + std::to_string(e.tid) +
                         ", \"name\": \"" + json_safe(e.name) + "\"";
    e.buffer->append_json(header, out);
  }
  return out;
}

void Buffer::add(Move move, double charged, double now, const void* caller, const void* entry) {
  const std::uint64_t n = next_.load(std::memory_order_relaxed);
  Record r{OutsideCpuTime::wall_seconds(), charged, now, caller, entry, -1, -1, -1, ::sched_getcpu(), move};
  // At a jump or a wait, and at the move right after one: what the thread did in between (the
  // wall time since the jump less its CPU time is time off its core; the switches say how).
  const bool waited = move == Move::ready || move == Move::sync || move == Move::wait;
  if (waited || after_wait_) {
    rusage u{};
    if (::getrusage(RUSAGE_THREAD, &u) == 0) {
      r.cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
              static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
      r.slept = static_cast<std::int32_t>(u.ru_nvcsw);
      r.preempted = static_cast<std::int32_t>(u.ru_nivcsw);
    }
  }
  after_wait_ = waited;
  records_[n % kCapacity] = r;
  next_.store(n + 1, std::memory_order_release);
}

void Buffer::append_json(std::string_view header, std::string& out) const {
  const std::uint64_t n = next_.load(std::memory_order_acquire);
  const std::uint64_t first = n > kCapacity ? n - kCapacity : 0;
  std::map<const void*, std::string> seen;
  out += header;
  out += ", \"dropped\": " + std::to_string(first) + ", \"moves\": [";
  char text[96];
  for (std::uint64_t i = first; i < n; ++i) {
    const Record& r = records_[i % kCapacity];
    std::snprintf(text, sizeof text, "%s[%.3f, \"%s\", %.3f, %.3f, \"", i == first ? "" : ", ", r.wall * 1e6,
                  move_name(r.move), r.charged * 1e6, r.now * 1e6);
    out += text;
    out += where(r.caller, /*is_return=*/true, seen);
    out += "\", \"";
    out += where(r.entry, /*is_return=*/false, seen);
    std::snprintf(text, sizeof text, "\", %d, %d, %.0f, %d]", r.slept, r.preempted, r.cpu < 0 ? -1.0 : r.cpu * 1e6,
                  r.core);
    out += text;
  }
  out += "]}\n";
}

Buffer* buffer_for_this_thread() {
  static const bool on = settings::is_set(settings::Id::clock_trace);
  if (!on) return nullptr;
  try {
    Registry& r = registry();
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    auto buffer = std::make_unique<Buffer>();
    Buffer* b = buffer.get();
    {
      std::lock_guard lock(r.mu);
      r.entries.push_back(Entry{static_cast<long>(::syscall(SYS_gettid)), name, std::move(buffer)});
    }
    static std::once_flag armed;
    std::call_once(armed, [] { append_report_at_exit(settings::Id::clock_trace, lines); });
    return b;
  } catch (...) {  // a debugging aid is never worth failing the program's call
    return nullptr;
  }
}

}  // namespace vgpu::timing::clock_trace
