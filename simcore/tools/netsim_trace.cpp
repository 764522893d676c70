#include "netsim_trace.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

namespace simcore::netsim {
namespace {

using nlohmann::json;

std::string describe(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

bool skipped(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r");
  return first == std::string_view::npos || text[first] == '#';
}

// ---------------------------------------------------------------------------------------------
// The plain-line scanner. It accepts a subset of JSON on which it agrees with nlohmann::json
// exactly: strings without escapes or non-ASCII bytes, numbers in JSON's grammar (integers
// where an integer is wanted, in canonical form), no duplicate keys, no literals. Anything else
// returns false and the caller parses the line with nlohmann::json.

enum Key : uint32_t {
  kId = 1, kSrc = 2, kDst = 4, kGpu = 8, kBytes = 16, kStart = 32, kDuration = 64, kAfter = 128,
  kLabel = 256,
};

struct Fields {
  uint32_t keys = 0;
  std::string_view id;
  int64_t src = 0, dst = 0, gpu = 0;
  uint64_t bytes = 0;
  double start_us = 0, duration_us = 0;
  std::vector<std::string_view> after;
  std::string_view label;
};

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  bool object(Fields& f) {
    f.keys = 0;
    f.id = f.label = {};
    f.src = f.dst = f.gpu = 0;
    f.bytes = 0;
    f.start_us = f.duration_us = 0;
    f.after.clear();
    ws();
    if (!eat('{')) return false;
    ws();
    for (;;) {
      std::string_view key;
      if (!string(key)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      const uint32_t k = key_of(key);
      if (k == 0 || (f.keys & k)) return false;  // unknown or repeated: the slow path words it
      f.keys |= k;
      if (!value(k, f)) return false;
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      if (!eat('}')) return false;
      ws();
      return p_ == s_.size();
    }
  }

 private:
  static uint32_t key_of(std::string_view k) {
    if (k == "id") return kId;
    if (k == "src") return kSrc;
    if (k == "dst") return kDst;
    if (k == "gpu") return kGpu;
    if (k == "bytes") return kBytes;
    if (k == "start_us") return kStart;
    if (k == "duration_us") return kDuration;
    if (k == "after") return kAfter;
    if (k == "label") return kLabel;
    return 0;
  }

  bool value(uint32_t k, Fields& f) {
    switch (k) {
      case kId: return id(f.id);
      case kSrc: return small_uint(f.src);
      case kDst: return small_uint(f.dst);
      case kGpu: return small_uint(f.gpu);
      case kBytes: return uint(f.bytes);
      case kStart: return non_negative(f.start_us);
      case kDuration: return non_negative(f.duration_us);
      case kLabel: return string(f.label);
      case kAfter: {
        if (!eat('[')) return false;
        ws();
        if (eat(']')) return true;
        for (;;) {
          std::string_view a;
          if (!id(a)) return false;
          f.after.push_back(a);
          ws();
          if (eat(']')) return true;
          if (!eat(',')) return false;
          ws();
        }
      }
      default: return false;
    }
  }

  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r' || s_[p_] == '\n')) ++p_;
  }
  bool eat(char c) {
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool digit() const { return p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9'; }

  bool string(std::string_view& out) {
    if (!eat('"')) return false;
    const size_t begin = p_;
    while (p_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') {
        out = s_.substr(begin, p_ - begin);
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    return false;
  }

  // An integer in canonical form (no leading zeros, no "-0"): its text is what
  // std::to_string gives for it.
  bool integer_text(std::string_view& out, size_t max_digits) {
    const size_t begin = p_;
    const bool minus = eat('-');
    if (!digit()) return false;
    if (s_[p_] == '0') {
      ++p_;
      if (minus) return false;
    } else {
      while (digit()) ++p_;
    }
    if (p_ < s_.size() && (s_[p_] == '.' || s_[p_] == 'e' || s_[p_] == 'E')) return false;
    out = s_.substr(begin, p_ - begin);
    return out.size() - (minus ? 1 : 0) <= max_digits;
  }

  bool id(std::string_view& out) {
    if (p_ < s_.size() && s_[p_] == '"') return string(out) && !out.empty();
    return integer_text(out, 18);
  }

  bool small_uint(int64_t& v) {
    std::string_view t;
    if (!integer_text(t, 9) || t[0] == '-') return false;
    std::from_chars(t.data(), t.data() + t.size(), v);
    return true;
  }

  bool uint(uint64_t& v) {
    std::string_view t;
    if (!integer_text(t, 20) || t[0] == '-') return false;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc();
  }

  // A JSON number that is not negative.
  bool non_negative(double& v) {
    const size_t begin = p_;
    if (!digit()) return false;
    if (s_[p_] == '0') ++p_;
    else while (digit()) ++p_;
    if (eat('.')) {
      if (!digit()) return false;
      while (digit()) ++p_;
    }
    if (eat('e') || eat('E')) {
      if (!eat('+')) eat('-');
      if (!digit()) return false;
      while (digit()) ++p_;
    }
    const auto r = std::from_chars(s_.data() + begin, s_.data() + p_, v);
    return r.ec == std::errc() && std::isfinite(v);
  }

  std::string_view s_;
  size_t p_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Ids

uint64_t IdTable::hash(std::string_view s) {
  // FNV-1a, then a final mix so that the low bits (the slot) depend on every byte.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

int64_t IdTable::find(std::string_view s) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash(s);
  const uint32_t r = recent_[h >> 48];
  if (r != 0 && id(r - 1) == s) return r - 1;
  const uint8_t tag = static_cast<uint8_t>(0x80 | (h >> 57));
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint8_t t = tags_[i];
    if (t == 0) return -1;
    if (t == tag && id(slots_[i]) == s) return slots_[i];
  }
}

void IdTable::grow() {
  const size_t size = slots_.empty() ? 1024 : slots_.size() * 2;
  slots_.assign(size, 0);
  tags_.assign(size, 0);
  for (size_t k = 0; k < ends_.size(); ++k) place(k, hash(id(k)));
}

void IdTable::place(size_t index, uint64_t h) {
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (tags_[i] != 0) i = (i + 1) & mask;
  slots_[i] = static_cast<uint32_t>(index);
  tags_[i] = static_cast<uint8_t>(0x80 | (h >> 57));
}

// One probe sequence both looks for `s` and finds the free slot it goes to (not find() and then
// place(): find() first tries the recent id under the same hash, which for a new id is an
// unrelated one whose characters are long out of cache).
bool IdTable::insert(std::string_view s) {
  if (chars_.size() + s.size() > UINT32_MAX || ends_.size() >= UINT32_MAX) return false;
  // At most 3/4 full.
  if (4 * (ends_.size() + 1) > 3 * slots_.size()) grow();
  const uint64_t h = hash(s);
  const uint8_t tag = static_cast<uint8_t>(0x80 | (h >> 57));
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (; tags_[i] != 0; i = (i + 1) & mask)
    if (tags_[i] == tag && id(slots_[i]) == s) return false;
  chars_.append(s);
  ends_.push_back(static_cast<uint32_t>(chars_.size()));
  slots_[i] = static_cast<uint32_t>(ends_.size() - 1);
  tags_[i] = tag;
  recent_[h >> 48] = static_cast<uint32_t>(ends_.size());
  return true;
}

void IdTable::shrink_to_fit() {
  chars_.shrink_to_fit();
  ends_.shrink_to_fit();
}

size_t IdTable::memory_bytes() const {
  return chars_.capacity() + ends_.capacity() * sizeof(uint32_t) + slots_.capacity() * sizeof(uint32_t) +
         tags_.capacity() + recent_.capacity() * sizeof(uint32_t);
}

// ---------------------------------------------------------------------------------------------
// Lines

bool LineSource::next(std::string_view& line) {
  for (;;) {
    const char* nl = static_cast<const char*>(std::memchr(buf_.data() + begin_, '\n', end_ - begin_));
    if (nl) {
      const size_t at = static_cast<size_t>(nl - buf_.data());
      line = std::string_view(buf_.data() + begin_, at - begin_);
      begin_ = at + 1;
      return true;
    }
    if (eof_) {
      if (begin_ == end_) return false;
      line = std::string_view(buf_.data() + begin_, end_ - begin_);
      begin_ = end_;
      return true;
    }
    // Keep the partial line, make room (a line longer than the buffer grows it), read more.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    in_.read(buf_.data() + end_, static_cast<std::streamsize>(buf_.size() - end_));
    const std::streamsize got = in_.gcount();
    end_ += static_cast<size_t>(got);
    if (got == 0 || !in_) eof_ = true;
  }
}

// ---------------------------------------------------------------------------------------------
// Events

bool TraceReader::fail(std::string message) {
  error_ = TraceError{line_, std::move(message)};
  return false;
}

bool TraceReader::next(LineSource& in, TraceLine& out) {
  std::string_view text;
  while (in.next(text)) {
    ++line_;
    if (skipped(text)) continue;
    out.line = line_;
    out.is_task = false;
    out.src = out.dst = 0;
    out.bytes = 0;
    out.duration_us = out.start_us = 0;
    out.after.clear();
    out.label.clear();
    if (!parse_fast(text, out)) {
      out.id.clear();
      out.after.clear();
      out.label.clear();
      out.src = out.dst = 0;
      out.bytes = 0;
      out.duration_us = out.start_us = 0;
      if (!parse(text, out)) return false;
    }
    if (count_ < known_) {
      ids_.note_recent(count_);
      if (ids_.id(count_) != out.id) {
        // The first pass saw this id at another line (or not at all): the file changed.
        return lookup(out.id) >= 0 ? fail("duplicate id \"" + out.id + "\"")
                                   : fail("the trace changed between its two readings");
      }
    } else if (!ids_.insert(out.id)) {
      return fail("duplicate id \"" + out.id + "\"");
    }
    ++count_;
    return true;
  }
  return false;
}

int64_t TraceReader::lookup(std::string_view id) const {
  const int64_t k = ids_.find(id);
  return k >= 0 && static_cast<size_t>(k) < count_ ? k : -1;
}

bool TraceReader::parse_fast(std::string_view text, TraceLine& out) {
  thread_local Fields f;
  if (!Scanner(text).object(f)) return false;
  if (!(f.keys & kId)) return false;
  const bool task = f.keys & (kGpu | kDuration);
  if (task ? (f.keys & (kSrc | kDst | kBytes)) || !(f.keys & kGpu) || !(f.keys & kDuration)
           : (f.keys & (kSrc | kDst | kBytes)) != (kSrc | kDst | kBytes))
    return false;
  if (f.src >= gpus_ || f.dst >= gpus_ || f.gpu >= gpus_) return false;
  for (std::string_view a : f.after) {
    const int64_t k = lookup(a);
    if (k < 0) return false;
    out.after.push_back(static_cast<size_t>(k));
  }
  out.id.assign(f.id);
  out.is_task = task;
  out.src = static_cast<int>(task ? f.gpu : f.src);
  out.dst = static_cast<int>(f.dst);
  out.bytes = f.bytes;
  out.duration_us = f.duration_us;
  out.start_us = f.start_us;
  out.label.assign(f.label);
  return true;
}

bool TraceReader::parse(std::string_view text, TraceLine& out) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t cut = what.find("] ");
    return fail("bad JSON: " + (cut == std::string::npos ? what : what.substr(cut + 2)));
  }
  if (!j.is_object()) return fail("expected a JSON object, got " + describe(j));

  bool has_src = false, has_dst = false, has_bytes = false, has_gpu = false, has_duration = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "id") {
      if (v.is_string()) out.id = v.get<std::string>();
      else if (v.is_number_integer()) out.id = std::to_string(v.get<int64_t>());
      else return fail("\"id\" must be a string or an integer, got " + describe(v));
      if (out.id.empty()) return fail("\"id\" is empty");
    } else if (key == "src" || key == "dst" || key == "gpu") {
      if (!v.is_number_integer()) return fail("\"" + key + "\" must be a GPU number, got " + describe(v));
      const int64_t g = v.get<int64_t>();
      if (g < 0 || g >= gpus_)
        return fail("GPU " + std::to_string(g) + " in \"" + key + "\" is out of range: the cluster has " +
                    std::to_string(gpus_) + " GPUs (0.." + std::to_string(gpus_ - 1) + ")");
      if (key == "dst") out.dst = static_cast<int>(g), has_dst = true;
      else if (key == "src") out.src = static_cast<int>(g), has_src = true;
      else out.src = static_cast<int>(g), has_gpu = true;
    } else if (key == "bytes") {
      if (v.is_number_unsigned()) out.bytes = v.get<uint64_t>();
      else if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 1.8e19 &&
               std::floor(v.get<double>()) == v.get<double>())
        out.bytes = static_cast<uint64_t>(v.get<double>());
      else return fail("\"bytes\" must be a non-negative integer, got " + describe(v));
      has_bytes = true;
    } else if (key == "start_us" || key == "duration_us") {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        return fail("\"" + key + "\" must be a non-negative number, got " + describe(v));
      if (key == "start_us") out.start_us = v.get<double>();
      else out.duration_us = v.get<double>(), has_duration = true;
    } else if (key == "after") {
      if (!v.is_array()) return fail("\"after\" must be an array of ids, got " + describe(v));
      for (const json& a : v) {
        std::string dep;
        if (a.is_string()) dep = a.get<std::string>();
        else if (a.is_number_integer()) dep = std::to_string(a.get<int64_t>());
        else return fail("\"after\" must hold ids, got " + describe(a));
        const int64_t pos = lookup(dep);
        if (pos < 0) return fail("\"after\" names \"" + dep + "\", which no earlier line defines");
        out.after.push_back(static_cast<size_t>(pos));
      }
    } else if (key == "label") {
      if (!v.is_string()) return fail("\"label\" must be a string, got " + describe(v));
      out.label = v.get<std::string>();
    } else {
      return fail("unknown key \"" + key +
                  "\" (expected id, src, dst, bytes, gpu, duration_us, start_us, after, label)");
    }
  }
  if (out.id.empty()) return fail("missing \"id\"");
  out.is_task = has_duration || has_gpu;
  if (out.is_task) {
    if (has_src || has_dst || has_bytes) return fail("a line is a flow (src, dst, bytes) or a task (gpu, duration_us), not both");
    if (!has_gpu) return fail("a task needs \"gpu\"");
    if (!has_duration) return fail("a task needs \"duration_us\"");
  } else {
    if (!has_src) return fail("missing \"src\"");
    if (!has_dst) return fail("missing \"dst\"");
    if (!has_bytes) return fail("missing \"bytes\"");
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The first pass

TraceOutline outline_trace(std::istream& in, size_t block, IdTable& ids) {
  TraceOutlineBuilder outline(block);
  LineSource lines(in);
  Fields f;
  std::vector<std::string> slow_after;
  std::string_view text;
  while (lines.next(text)) {
    if (skipped(text)) continue;
    double start = 0;
    std::string slow_id;
    std::string_view id;
    const std::vector<std::string_view>* after = &f.after;
    std::vector<std::string_view> slow_views;
    if (Scanner(text).object(f)) {
      start = f.start_us;
      id = f.id;
    } else {
      // Whatever the replay will accept; anything else ends the outline.
      try {
        const json j = json::parse(text);
        if (!j.is_object()) break;
        const auto sid = j.find("id");
        if (sid == j.end()) break;
        if (sid->is_string()) slow_id = sid->get<std::string>();
        else if (sid->is_number_integer()) slow_id = std::to_string(sid->get<int64_t>());
        else break;
        id = slow_id;
        const auto st = j.find("start_us");
        if (st != j.end()) {
          if (!st->is_number() || !(st->get<double>() >= 0)) break;
          start = st->get<double>();
        }
        slow_after.clear();
        const auto af = j.find("after");
        if (af != j.end()) {
          if (!af->is_array()) break;
          for (const json& a : *af) {
            if (a.is_string()) slow_after.push_back(a.get<std::string>());
            else if (a.is_number_integer()) slow_after.push_back(std::to_string(a.get<int64_t>()));
            else break;
          }
        }
        slow_views.assign(slow_after.begin(), slow_after.end());
        after = &slow_views;
      } catch (const json::exception&) {
        break;
      }
    }
    size_t lowest = SIZE_MAX;
    bool known = true;
    for (std::string_view a : *after) {
      const int64_t k = ids.find(a);
      if (k < 0) known = false;
      else lowest = std::min(lowest, static_cast<size_t>(k));
    }
    if (!known || id.empty() || !ids.insert(id)) break;
    outline.add(start, !after->empty(), lowest);
  }
  return outline.finish();
}

}  // namespace simcore::netsim
