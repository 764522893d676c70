#include "front/launch/signature_settling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/log.h"

namespace vgpu {

bool durations_agree(double a, double b) {
  const double d = std::fabs(a - b);
  return d <= SettlingSignatures::kAgreeAbsoluteS ||
         d <= SettlingSignatures::kAgreeRelative * std::max(std::fabs(a), std::fabs(b));
}

bool durations_differ(double a, double b) {
  const double d = std::fabs(a - b);
  return d >= SettlingSignatures::kDifferAbsoluteS &&
         d >= SettlingSignatures::kDifferRelative * std::max(std::fabs(a), std::fabs(b));
}

bool SettlingSignatures::parse(const LaunchSignature& signature, Parsed* out, std::vector<uint8_t>* one_byte) {
  // The header is checked, not copied: a kernel's name (often hundreds of bytes, PyTorch's
  // templates) would be an allocation per launch.
  if (!decode_signature_header(signature, nullptr, nullptr)) return false;
  const std::string_view s = signature.bytes;
  // magic (10 bytes: "vgpu-sigN\0"), name, '\0', 7 u32 of shape
  size_t at = s.find('\0', 10);
  if (at == std::string_view::npos) return false;
  at += 1 + 7 * 4;
  out->family.assign(s.substr(0, at));
  out->words.clear();
  out->words.reserve((s.size() - at) / 4 + 1);
  if (one_byte != nullptr) one_byte->clear();
  while (at < s.size()) {
    const char tag = s[at++];
    out->family.push_back(tag);
    if (tag == 'p') continue;
    if (tag != 'v' || at + 4 > s.size()) return false;
    uint32_t size = 0;
    std::memcpy(&size, s.data() + at, 4);  // little-endian hosts only, as the encoding
    out->family.append(s.substr(at, 4));
    at += 4;
    if (size > s.size() - at) return false;
    const size_t whole = size / 4, first = out->words.size();
    out->words.resize(first + whole + (size % 4 != 0));
    if (one_byte != nullptr) one_byte->resize(out->words.size(), static_cast<uint8_t>(size == 1));
    std::memcpy(out->words.data() + first, s.data() + at, size);  // the tail word zero-filled
    at += size;
  }
  return true;
}

void SettlingSignatures::bucket_key(const Family& f, const std::vector<uint32_t>& words, std::string* key) {
  key->assign(reinterpret_cast<const char*>(words.data()), words.size() * 4);
  for (size_t i = 0; i < words.size(); ++i)
    if (f.free[i]) std::memset(key->data() + 4 * i, 0, 4);
}

std::string SettlingSignatures::bucket_key(const Family& f, const std::vector<uint32_t>& words) {
  std::string key;
  bucket_key(f, words, &key);
  return key;
}

bool SettlingSignatures::covers(const Family& f, const Group& g, const std::vector<uint32_t>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    if (!f.free[i]) continue;  // equal: same bucket
    if (!covers_word(g, i, words[i])) return false;
  }
  return true;
}

// Free word `i` of group `g` with value `v`.
bool SettlingSignatures::covers_word(const Group& g, size_t i, uint32_t v) {
  if (g.wide[i]) return true;  // garbage-like: any value
  if (v >= kWideFrom || g.lo[i] > g.hi[i]) return false;
  // The range measured, widened on each side by its own span: a word that varied by S across
  // launches that took the same time is trusted to vary by S more (a counter, such as a philox
  // offset, is then measured each time it has doubled its span, not on every launch).
  const uint64_t span = uint64_t{g.hi[i]} - g.lo[i];
  return uint64_t{v} + span >= g.lo[i] && v <= g.hi[i] + span;
}

void SettlingSignatures::widen(Group& g, const std::vector<uint32_t>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const uint32_t v = words[i];
    if (v >= kWideFrom) {
      g.wide[i] = 1;
    } else if (g.lo[i] > g.hi[i]) {  // no small value yet
      g.lo[i] = g.hi[i] = v;
    } else {
      g.lo[i] = std::min(g.lo[i], v);
      g.hi[i] = std::max(g.hi[i], v);
    }
  }
}

SettlingSignatures::Group SettlingSignatures::group_of(const std::vector<uint32_t>& words) {
  Group g;
  g.words = words;
  g.lo.assign(words.size(), 1);  // lo > hi: empty range
  g.hi.assign(words.size(), 0);
  g.wide.assign(words.size(), 0);
  widen(g, words);
  return g;
}

void SettlingSignatures::rebuild_buckets(Family& f) {
  f.buckets.clear();
  for (size_t i = 0; i < f.groups.size(); ++i) f.buckets[bucket_key(f, f.groups[i].words)].push_back(i);
}

const SettlingSignatures::Group* SettlingSignatures::find(const Family& f, const std::vector<uint32_t>& words,
                                                          bool settled_only) const {
  bucket_key(f, words, &key_scratch_);
  const auto it = f.buckets.find(key_scratch_);
  if (it == f.buckets.end()) return nullptr;
  const Group* pending = nullptr;
  for (size_t i : it->second) {
    const Group& g = f.groups[i];
    if (!covers(f, g, words)) continue;
    if (g.seconds >= 0) return &g;
    if (pending == nullptr) pending = &g;
  }
  return settled_only ? nullptr : pending;
}

std::optional<double> SettlingSignatures::settled(const LaunchSignature& signature) const {
  Parsed& p = scratch_;  // reused: this runs on every launch
  if (!parse(signature, &p)) return std::nullopt;
  const auto it = families_.find(p.family);
  if (it == families_.end()) return std::nullopt;
  const Group* g = find(it->second, p.words, /*settled_only=*/true);
  return g ? std::optional<double>(g->seconds) : std::nullopt;
}

std::optional<double> SettlingSignatures::settled(const LaunchSignature& signature, uint64_t hash) const {
  if (memo_.empty()) memo_.resize(kMemoSlots);
  Memo& m = memo_[hash % kMemoSlots];
  if (m.generation == generation_ && m.hash == hash && m.bytes == signature.bytes) return m.answer;
  m.answer = settled(signature);
  m.generation = generation_;
  m.hash = hash;
  m.bytes.assign(signature.bytes);  // the slot's buffer is reused: no allocation once it is large enough
  return m.answer;
}

std::optional<double> SettlingSignatures::settled_flags_aside(const LaunchSignature& signature) const {
  Parsed p;
  std::vector<uint8_t> flag;
  if (!parse(signature, &p, &flag)) return std::nullopt;
  const auto it = families_.find(p.family);
  if (it == families_.end()) return std::nullopt;
  const Family& f = it->second;
  std::vector<double> found;
  for (const Group& g : f.groups) {
    if (g.seconds < 0 || g.words.size() != p.words.size()) continue;
    bool covered = true;
    for (size_t i = 0; i < p.words.size() && covered; ++i) {
      if (flag[i]) continue;
      covered = f.free[i] ? covers_word(g, i, p.words[i]) : g.words[i] == p.words[i];
    }
    if (covered) found.push_back(g.seconds);
  }
  if (found.empty()) return std::nullopt;
  const auto mid = found.begin() + static_cast<std::ptrdiff_t>(found.size() / 2);
  std::nth_element(found.begin(), mid, found.end());
  return *mid;
}

bool SettlingSignatures::seen(const LaunchSignature& signature) const {
  Parsed p;
  if (!parse(signature, &p)) return false;
  const auto it = families_.find(p.family);
  return it != families_.end() && find(it->second, p.words, /*settled_only=*/false) != nullptr;
}

std::vector<size_t> SettlingSignatures::free_words(const LaunchSignature& signature) const {
  std::vector<size_t> out;
  Parsed p;
  if (!parse(signature, &p)) return out;
  const auto it = families_.find(p.family);
  if (it == families_.end()) return out;
  for (size_t i = 0; i < it->second.free.size(); ++i)
    if (it->second.free[i]) out.push_back(i);
  return out;
}

void SettlingSignatures::learn(Family& f, const std::vector<uint32_t>& words, double seconds) {
  size_t freed = 0;
  std::vector<uint8_t> blamed;  // words this sample alone differed in, with another duration
  for (const Recent& r : f.recent) {
    size_t keyed_diffs = 0, last = 0;
    bool touches_pinned = false;
    for (size_t i = 0; i < words.size(); ++i) {
      if (f.free[i] || words[i] == r.words[i]) continue;
      ++keyed_diffs;
      last = i;
      touches_pinned |= f.pinned[i] >= kPinAfter;
    }
    if (keyed_diffs == 0) continue;
    if (durations_agree(seconds, r.seconds) && !touches_pinned) {
      for (size_t i = 0; i < words.size(); ++i)
        if (words[i] != r.words[i] && !f.free[i]) f.free[i] = 1, ++freed;
    } else if (keyed_diffs == 1 && durations_differ(seconds, r.seconds)) {
      if (blamed.empty()) blamed.assign(words.size(), 0);
      blamed[last] = 1;
    }
  }
  for (size_t i = 0; i < blamed.size(); ++i) {  // one count per sample, however many pairs
    if (!blamed[i] || f.pinned[i] >= kPinAfter) continue;
    if (++f.pinned[i] == kPinAfter)
      log::debug("vgpu: launch signatures of {}: by-value word {} keys ({:.2f} us)", f.name, i, seconds * 1e6);
  }
  f.recent.push_back({words, seconds});
  if (f.recent.size() > kRecent) f.recent.pop_front();
  if (freed == 0) return;
  rebuild_buckets(f);
  if (log::enabled(log::Level::debug)) {
    size_t total = 0;
    for (uint8_t x : f.free) total += x;
    log::debug("vgpu: launch signatures of {}: {} more by-value words stop keying ({} of {})", f.name, freed, total,
               f.free.size());
  }
}

std::optional<double> SettlingSignatures::settle_group(Group& g) {
  const int have = static_cast<int>(g.samples.size());
  // One sample early (when that still leaves two to compare): the last sample wanted could only
  // confirm two that agree closely (kAgree*, not the looser kSettle*), so it is not taken. A
  // kernel launched once a step was otherwise measured in a job's third step as well (a GPT-2
  // step on an H200, 2026-11-30: 16 of the 52 launches measured after the second step were third
  // samples of two that agreed).
  const bool early = have < samples_wanted_;
  if (g.seconds >= 0 || (early && (have != samples_wanted_ - 1 || have < 2))) return std::nullopt;
  // The first sample is usually the function's first launch, which includes the host's launch
  // latency: with three or more samples it is left out.
  std::vector<double> s(g.samples.begin() + (have >= 3 ? 1 : 0), g.samples.end());
  std::sort(s.begin(), s.end());
  if (early) {
    if (!durations_agree(s[0], s[1])) return std::nullopt;
  } else {
    // Disturbance only adds time (another context's time slice, another stream's work sharing
    // the SMs), so the least disturbed sample is the smallest; it is trusted once a second one
    // agrees with it, so that one sample the gate's correction read short cannot decide alone.
    const bool agree = s.size() < 2 || s[1] - s[0] <= std::max(kSettleRelative * s[0], kSettleAbsoluteS);
    if (!agree && have < samples_wanted_ + kExtraSamples) return std::nullopt;
  }
  g.seconds = s[0];
  g.samples.clear();
  g.samples.shrink_to_fit();
  return g.seconds;
}

void SettlingSignatures::drop_pending_overflow(Family& f) {
  size_t pending = 0;
  for (const Group& g : f.groups) pending += g.seconds < 0;
  if (pending <= kMaxPendingGroups) return;
  // The oldest unsettled group goes (launches that never came back).
  for (auto it = f.groups.begin(); it != f.groups.end(); ++it) {
    if (it->seconds < 0) {
      f.groups.erase(it);
      --groups_;
      break;
    }
  }
  rebuild_buckets(f);
}

SettlingSignatures::Family& SettlingSignatures::family(const Parsed& p) {
  Family& f = families_[p.family];
  if (f.free.size() != p.words.size()) {  // a new family
    f.free.assign(p.words.size(), 0);
    f.pinned.assign(p.words.size(), 0);
    f.name.assign(p.family.c_str() + 10);  // after the magic, up to its '\0'
  }
  return f;
}

// The group's duration so far: settled, else its least disturbed sample that took part in
// learning (neither the family's first launch nor a function's first launch in a context, which
// may hold host work), else its least sample after the first, else its only one.
double SettlingSignatures::least_of(const Group& g) {
  if (g.seconds >= 0 || g.samples.empty()) return g.seconds;
  if (g.least_learnable >= 0) return g.least_learnable;
  if (g.samples.size() == 1) return g.samples[0];
  return *std::min_element(g.samples.begin() + 1, g.samples.end());
}

std::optional<double> SettlingSignatures::add_sample(const LaunchSignature& signature, double seconds, bool learn,
                                                     double* least) {
  ++generation_;  // what settled() remembered may change
  if (least != nullptr) *least = seconds;
  Parsed p;
  if (!parse(signature, &p)) return std::nullopt;
  Family& f = family(p);
  const bool learnable = f.measured_once && learn;
  if (learnable) this->learn(f, p.words, seconds);
  f.measured_once = true;

  const std::string key = bucket_key(f, p.words);
  auto& bucket = f.buckets[key];
  Group* into = nullptr;
  for (size_t i : bucket) {  // the group covering this launch
    if (covers(f, f.groups[i], p.words)) {
      into = &f.groups[i];
      if (into->seconds >= 0) {  // settled meanwhile
        if (least != nullptr) *least = into->seconds;
        return std::nullopt;
      }
      break;
    }
  }
  if (into == nullptr) {  // else one whose duration agrees: its ranges grow to this launch
    for (size_t i : bucket) {
      Group& g = f.groups[i];
      const double d = g.seconds >= 0 ? g.seconds : g.samples.empty() ? -1 : g.samples.back();
      if (d >= 0 && durations_agree(seconds, d)) {
        widen(g, p.words);
        if (g.seconds >= 0) {
          if (least != nullptr) *least = g.seconds;
          return std::nullopt;
        }
        into = &g;
        break;
      }
    }
  }
  if (into == nullptr) {
    bucket.push_back(f.groups.size());
    f.groups.push_back(group_of(p.words));
    ++groups_;
    // Which kernels keep making new groups (so keep being measured): count these lines by name.
    log::debug("vgpu: launch signatures of {}: a new duration group ({} in its family, {:.2f} us)", f.name,
               f.groups.size(), seconds * 1e6);
    into = &f.groups.back();
    add_to_group(*into, seconds, learnable);
    const std::optional<double> done = settle_group(*into);
    if (least != nullptr) *least = least_of(*into);
    drop_pending_overflow(f);
    return done;
  }
  add_to_group(*into, seconds, learnable);
  const std::optional<double> done = settle_group(*into);
  if (least != nullptr) *least = least_of(*into);
  return done;
}

void SettlingSignatures::settle(const LaunchSignature& signature, double seconds) {
  ++generation_;
  Parsed p;
  if (!parse(signature, &p)) return;
  Family& f = family(p);
  f.buckets[bucket_key(f, p.words)].push_back(f.groups.size());
  f.groups.push_back(group_of(p.words));
  f.groups.back().seconds = seconds;
  ++groups_;
}

void SettlingSignatures::add_to_group(Group& g, double seconds, bool learnable) {
  g.samples.push_back(seconds);
  if (learnable && (g.least_learnable < 0 || seconds < g.least_learnable)) g.least_learnable = seconds;
}

// ---- groups leaving and entering the process (the kernel-time database) -------------------

bool SettlingSignatures::family_of(const LaunchSignature& signature, std::string* family) {
  Parsed p;
  if (!parse(signature, &p)) return false;
  *family = std::move(p.family);
  return true;
}

// The inverse of parse(): the family's header and tags with each by-value parameter's bytes
// taken from `words` (a parameter's tail word holds its last size % 4 bytes).
LaunchSignature SettlingSignatures::signature_of(const std::string& family, const std::vector<uint32_t>& words) {
  LaunchSignature sig;
  const std::string_view s = family;
  size_t at = s.find('\0', 10);
  if (at == std::string_view::npos) return sig;
  at += 1 + 7 * 4;
  std::string& out = sig.bytes;
  out.assign(s.substr(0, at));
  size_t word = 0;
  while (at < s.size()) {
    const char tag = s[at++];
    out.push_back(tag);
    if (tag != 'v' || at + 4 > s.size()) continue;
    uint32_t size = 0;
    std::memcpy(&size, s.data() + at, 4);
    out.append(s.substr(at, 4));
    at += 4;
    const size_t n = (size + 3) / 4;
    if (word + n > words.size()) return {};
    out.append(reinterpret_cast<const char*>(words.data() + word), size);
    word += n;
  }
  return sig;
}

SettledGroup SettlingSignatures::exported(const std::string& family, const Family& f, const Group& g) {
  SettledGroup out;
  out.signature = signature_of(family, g.words);
  out.free = f.free;
  out.pinned.resize(f.pinned.size());
  for (size_t i = 0; i < f.pinned.size(); ++i) out.pinned[i] = f.pinned[i] >= kPinAfter;
  out.lo = g.lo;
  out.hi = g.hi;
  out.wide = g.wide;
  out.settled = g.seconds >= 0;
  out.seconds = least_of(g);
  return out;
}

std::optional<SettledGroup> SettlingSignatures::settled_group(const LaunchSignature& signature) const {
  Parsed p;
  if (!parse(signature, &p)) return std::nullopt;
  const auto it = families_.find(p.family);
  if (it == families_.end()) return std::nullopt;
  const Group* g = find(it->second, p.words, /*settled_only=*/true);
  return g ? std::optional<SettledGroup>(exported(it->first, it->second, *g)) : std::nullopt;
}

std::vector<SettledGroup> SettlingSignatures::export_groups() const {
  std::vector<SettledGroup> out;
  for (const auto& [key, f] : families_) {
    for (const Group& g : f.groups) {
      if (g.seconds < 0 && g.samples.empty()) continue;
      out.push_back(exported(key, f, g));
      if (out.back().signature.bytes.empty()) out.pop_back();
    }
  }
  return out;
}

void SettlingSignatures::adopt(const SettledGroup& s) {
  ++generation_;
  Parsed p;
  if (!parse(s.signature, &p) || s.seconds < 0) return;
  const size_t n = p.words.size();
  if (s.free.size() != n || s.pinned.size() != n || s.lo.size() != n || s.hi.size() != n || s.wide.size() != n)
    return;
  Family& f = family(p);
  bool mask_changed = false;
  for (size_t i = 0; i < n; ++i) {
    if (s.pinned[i] && f.pinned[i] < kPinAfter) {
      f.pinned[i] = kPinAfter;
      if (f.free[i]) f.free[i] = 0, mask_changed = true;
    }
    if (s.free[i] && !f.free[i] && f.pinned[i] < kPinAfter) f.free[i] = 1, mask_changed = true;
  }
  Group g;
  g.words = std::move(p.words);
  g.lo = s.lo;
  g.hi = s.hi;
  g.wide = s.wide;
  g.seconds = s.seconds;
  f.groups.push_back(std::move(g));
  ++groups_;
  if (mask_changed)
    rebuild_buckets(f);
  else
    f.buckets[bucket_key(f, f.groups.back().words)].push_back(f.groups.size() - 1);
}

SettlingSignatures::Uncovered SettlingSignatures::uncovered(const LaunchSignature& signature, LaunchSignature* keyed,
                                                            std::string* detail) const {
  *keyed = signature;
  Parsed p;
  if (!parse(signature, &p)) return Uncovered::family;
  const auto it = families_.find(p.family);
  if (it == families_.end()) return Uncovered::family;
  const Family& f = it->second;
  std::vector<uint32_t> masked = p.words;
  for (size_t i = 0; i < masked.size() && i < f.free.size(); ++i)
    if (f.free[i]) masked[i] = 0;
  *keyed = signature_of(p.family, masked);
  bucket_key(f, p.words, &key_scratch_);
  const auto bucket = f.buckets.find(key_scratch_);
  const Uncovered why = bucket != f.buckets.end() ? Uncovered::ranges : Uncovered::keyed_words;
  if (detail == nullptr) return why;
  // The nearest group: fewest words in the way (keyed words that differ, or free words outside).
  constexpr size_t kShown = 4;
  auto in_the_way = [&](const Group& g, std::string* out) {
    size_t n = 0;
    for (size_t i = 0; i < p.words.size() && i < g.words.size(); ++i) {
      const uint32_t v = p.words[i];
      const bool keyed_differs = !f.free[i] && v != g.words[i];
      const bool outside = why == Uncovered::ranges && f.free[i] && !covers_word(g, i, v);
      if (!keyed_differs && !outside) continue;
      if (out != nullptr && n < kShown) {
        if (!out->empty()) out->push_back(',');
        *out += keyed_differs ? fmt::format("w{}={:#x}/{:#x}", i, v, g.words[i])
                              : fmt::format("w{}={:#x} outside {:#x}..{:#x}", i, v, g.lo[i], g.hi[i]);
      }
      ++n;
    }
    return n;
  };
  const Group* nearest = nullptr;
  size_t least = SIZE_MAX;
  auto consider = [&](const Group& g) {
    const size_t n = in_the_way(g, nullptr);
    if (n < least) least = n, nearest = &g;
  };
  if (bucket != f.buckets.end())
    for (size_t i : bucket->second) consider(f.groups[i]);
  else
    for (const Group& g : f.groups) consider(g);
  detail->clear();
  if (nearest != nullptr) {
    in_the_way(*nearest, detail);
    if (least > kShown) *detail += fmt::format(",+{}", least - kShown);
  }
  return why;
}

}  // namespace vgpu
