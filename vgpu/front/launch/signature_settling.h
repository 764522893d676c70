// Launch signatures that settle although their bytes never repeat (issue 21).
//
// A launch signature (launch_signature.h) keeps every by-value byte that is not an address.
// PyTorch passes structs by value whose unused entries and padding hold whatever was on the
// host's stack (TensorIterator's OffsetCalculator beyond its dims, a bool member's padding), and
// scalars that change on every launch without changing the work (philox seeds and offsets): such
// launches never repeat a signature, so the passthrough measured them on every launch. The
// cubin's parameter layout gives each parameter's offset and size, not which bytes of a struct
// the kernel reads, so which bytes matter is learnt here, per *family* of launches (same function,
// grid, block, shared memory and parameter layout), from the durations measured:
//
//   - the by-value bytes are read as 4-byte words (each parameter's own, its tail zero-filled);
//   - a word becomes *free* (no longer keyed) when two measured launches of the family differed
//     in it, and in no pinned word, while their durations agreed within noise
//     (|a - b| <= max(5%, 0.5 us));
//   - a word is *pinned* (keyed for good) when, for two measured launches (kPinAfter), it was
//     the only keyed word in which that launch differed from an earlier one while their
//     durations differed materially (>= 15% and >= 1 us): that word is an input of the kernel
//     (a size), whatever later pairs suggest. Two, so that one sample that a shared GPU slowed
//     down cannot pin a garbage word;
//   - the first measured launch of each family takes no part in learning (the first launch of a
//     function includes the host's launch latency), nor does any launch the caller says may
//     include host work (a function's first launch in another context);
//   - launches whose keyed words are equal fall into one bucket, where each *group* has its own
//     samples and settled duration: the smallest of its samples (the first left out), once it
//     has VGPU_MEASURE_SAMPLES of them (one fewer when its two smallest agree within 5% or
//     0.5 us) and its two smallest agree (settle_group: where several
//     processes share the GPU, another context's time slice lands inside a measurement and only
//     ever adds time), and
//     a group covers a launch only when each free word lies in the values its samples had: while
//     they were all below 2^24 (sizes, counts, strides), within the [min, max] measured widened
//     by its own span on each side (max - min: a counter such as a philox offset is measured
//     each time its span doubles, not on every launch; a size is never trusted beyond twice what
//     was measured); once one was 2^24 or more (random stack bytes, floats, negative integers:
//     what a size of a kernel whose grid is the same rarely is), any value. So a size freed
//     because 1000 and 1001 elements took the same time still keys 10^6 elements: that launch
//     is measured, and a duration that disagrees makes a group of its own;
//   - a measured launch that no group covers joins a group of its bucket whose duration agrees
//     (extending its ranges), else starts a group.
// Durations that differ materially are thereby never merged on the evidence of a word that was
// seen to matter, nor extrapolated beyond the sizes measured below 2^24. Left as a known limit:
// a size field in which two launches of 16M elements or more differed with durations that
// agreed stops keying altogether (random 32-bit garbage is that large 255 times in 256, and
// keeping a range for it would measure a launch whenever one of a struct's hundred garbage
// words fell outside: nearly every launch).
//
// What is learnt leaves the process as SettledGroup records (the kernel-time database keeps them,
// kernel_time_db.h), and a SettlingSignatures filled from them by adopt() answers settled() for a
// launch of another process by the very rule above: the sim backend's lookup is this class.
//
// Not thread-safe: its owner (the passthrough's KernelDurations, the database) holds a lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "front/launch/launch_signature.h"

namespace vgpu {

// One group of a family as settling knows it: what the kernel-time database stores beside its
// exact rows, so that a launch of another process finds the group's duration although its
// garbage differs. Per-word vectors are indexed as the family's by-value words.
struct SettledGroup {
  LaunchSignature signature;     // the group's first launch: its keyed words are the group's
  std::vector<uint8_t> free;     // the family's words no longer keyed (1 each)
  std::vector<uint8_t> pinned;   // the family's words keyed for good: a merge never frees them
  std::vector<uint32_t> lo, hi;  // the group's range of values below kWideFrom (lo > hi: none)
  std::vector<uint8_t> wide;     // the group saw a value from kWideFrom up: any value
  double seconds = 0;
  // false: the group was still measuring when exported, `seconds` its smallest sample that could
  // teach (not the family's first launch, nor a function's first launch in a context), else
  // its smallest sample.
  bool settled = true;
};

class SettlingSignatures {
 public:
  static constexpr double kAgreeRelative = 0.05;
  static constexpr double kAgreeAbsoluteS = 0.5e-6;
  static constexpr double kDifferRelative = 0.15;
  static constexpr double kDifferAbsoluteS = 1e-6;
  static constexpr uint32_t kWideFrom = 1u << 24;  // a free word's value from here up: garbage-like
  static constexpr size_t kRecent = 8;             // measured launches kept per family to compare
  static constexpr size_t kMaxPendingGroups = 64;  // per family: unsettled groups beyond are dropped
  static constexpr uint8_t kPinAfter = 2;          // samples that blamed a word alone
  // A group settles once its two smallest samples agree this well (within kSettleRelative or
  // kSettleAbsoluteS), or once it has kExtraSamples samples more than it wanted. Looser than
  // kAgree*: measurement noise alone stays well inside it, while a time slice of another
  // process's context inside a measurement added 0.4 to 7.4 ms to 4-7 ms GEMMs (a DDP step of
  // two ranks on one H200, 2026-11-26).
  static constexpr double kSettleRelative = 0.25;
  static constexpr double kSettleAbsoluteS = 50e-6;
  static constexpr int kExtraSamples = 6;
  // A group wanting three samples or more settles one sample early when the two smallest of
  // those it has (the first left out from three on) agree within kAgree* (settle_group).

  explicit SettlingSignatures(int samples_wanted) : samples_wanted_(samples_wanted < 1 ? 1 : samples_wanted) {}

  // The duration of the settled group that covers this launch, in seconds.
  std::optional<double> settled(const LaunchSignature& signature) const;
  // The same, remembered: `hash` is any hash of the signature's bytes that the caller computes
  // anyway (the passthrough's shared-table key). A training step launches the same few hundred
  // signatures over and over, and parsing one and finding its group (two hash lookups of
  // strings) was a fifth of a settled cuLaunchKernel's own work (issue 21); an answer is kept
  // per hash slot until anything is learnt, settled or adopted (the generation below), and is
  // given only for the very same bytes.
  std::optional<double> settled(const LaunchSignature& signature, uint64_t hash) const;
  // The settled groups of this launch's family that cover it when the words of its one-byte
  // parameters are not compared: an empty functor's byte is whatever the host's stack held there,
  // one value in the process that recorded (kept keyed: it never varied there) and another in the
  // process that replays. The upper median of their durations (a one-byte flag that changed the
  // work gives several); nullopt when none covers it.
  std::optional<double> settled_flags_aside(const LaunchSignature& signature) const;
  // Whether some group (settled or still being measured) covers this launch.
  bool seen(const LaunchSignature& signature) const;
  // A measurement of this launch. Returns the group's duration when this sample settled it.
  // `learn` false: a sample that may hold more than the kernel (the function's first launch in
  // a context, which may load it) is kept in its group but compared with no other.
  // `least` (optional): set to the duration the measured launch should take: its group's settled
  // duration, else the smallest of the group's samples so far (the first left out once there
  // are two): a sample another context's time slice inflated does not stretch the step it
  // was taken in either.
  std::optional<double> add_sample(const LaunchSignature& signature, double seconds, bool learn = true,
                                   double* least = nullptr);
  // The launch's duration is known already (the kernel-time database): a settled group of its own.
  void settle(const LaunchSignature& signature, double seconds);

  // The settled group covering this launch, as the database stores it; nullopt when none.
  std::optional<SettledGroup> settled_group(const LaunchSignature& signature) const;
  // Every group with a duration: settled ones, and those still measuring at their smallest
  // learnable sample (SettledGroup::settled false). What a recording process leaves at exit.
  std::vector<SettledGroup> export_groups() const;
  // Takes a group another process settled (the database's): its family's free and pinned words
  // merge into this family's (a pinned word is never free), and it covers launches as a settled
  // group measured here would. Malformed records are ignored.
  void adopt(const SettledGroup& group);
  // Why no settled group covers this launch (for the list of misses, kernel_db_misses.h):
  // no launch of its family is known, none with its keyed words, or its free words lie outside
  // every such group's ranges. `keyed`: the signature with the family's free words zeroed (the
  // launches that differ only in those share it; the signature itself for an unknown family).
  // `detail` (if given): against the nearest group, the words that kept it from covering, as
  // "w<index>=<this launch's value>/<the group's>" (keyed words) or "w<index>=<value> outside
  // <lo>..<hi>" (ranges), at most four: what a replay differs in from the recording.
  enum class Uncovered { family, keyed_words, ranges };
  Uncovered uncovered(const LaunchSignature& signature, LaunchSignature* keyed, std::string* detail = nullptr) const;
  // The family part of a signature (its bytes without the by-value words): what the database
  // files groups under.
  static bool family_of(const LaunchSignature& signature, std::string* family);

  // Groups kept (distinct durations, settled or not), over all families.
  size_t groups() const { return groups_; }
  // The words (4 bytes of by-value parameters, in order) no longer keyed in this launch's
  // family; empty for an unknown family (tests, logs).
  std::vector<size_t> free_words(const LaunchSignature& signature) const;

 private:
  struct Parsed {
    std::string family;           // the signature without its by-value bytes
    std::vector<uint32_t> words;  // the by-value bytes as words
  };
  struct Group {
    std::vector<uint32_t> words;   // its first launch's: the keyed words of all its launches
    std::vector<uint32_t> lo, hi;  // per word: the range of values below kWideFrom measured
    std::vector<uint8_t> wide;     // per word: a value from kWideFrom up was measured: any value
    std::vector<double> samples;
    double seconds = -1;           // settled duration; -1 while measuring
    double least_learnable = -1;   // smallest sample that took part in learning (export_groups)
  };
  struct Recent {
    std::vector<uint32_t> words;
    double seconds;
  };
  struct Family {
    std::vector<uint8_t> free;
    std::vector<uint8_t> pinned;  // samples that blamed the word alone (kPinAfter: keyed for good)
    std::vector<Group> groups;
    std::unordered_map<std::string, std::vector<size_t>> buckets;  // keyed words -> groups
    std::deque<Recent> recent;
    bool measured_once = false;
    std::string name;  // the function's (logs)
  };

  // `one_byte` (optional, off the launch path): per word, 1 where it is a one-byte parameter's own.
  static bool parse(const LaunchSignature& signature, Parsed* out, std::vector<uint8_t>* one_byte = nullptr);
  static std::string bucket_key(const Family& f, const std::vector<uint32_t>& words);
  static void bucket_key(const Family& f, const std::vector<uint32_t>& words, std::string* key);
  static bool covers(const Family& f, const Group& g, const std::vector<uint32_t>& words);
  static bool covers_word(const Group& g, size_t i, uint32_t v);
  static void widen(Group& g, const std::vector<uint32_t>& words);
  static Group group_of(const std::vector<uint32_t>& words);
  static LaunchSignature signature_of(const std::string& family, const std::vector<uint32_t>& words);
  static SettledGroup exported(const std::string& family, const Family& f, const Group& g);
  static void add_to_group(Group& g, double seconds, bool learnable);
  static void rebuild_buckets(Family& f);
  // The group of `f` covering `words` (settled ones first when `settled_only`), or null.
  const Group* find(const Family& f, const std::vector<uint32_t>& words, bool settled_only) const;
  Family& family(const Parsed& p);  // made on first use
  void learn(Family& f, const std::vector<uint32_t>& words, double seconds);
  std::optional<double> settle_group(Group& g);
  static double least_of(const Group& g);  // see add_sample's `least`
  void drop_pending_overflow(Family& f);

  // settled(signature, hash)'s answers, direct-mapped by the hash.
  static constexpr size_t kMemoSlots = 256;
  struct Memo {
    uint64_t generation = 0;  // 0: empty
    uint64_t hash = 0;
    std::string bytes;
    std::optional<double> answer;
  };

  int samples_wanted_;
  uint64_t generation_ = 1;  // bumped by everything that changes what settled() answers
  mutable std::vector<Memo> memo_;  // made on first use
  size_t groups_ = 0;
  mutable Parsed scratch_;         // settled()'s and find()'s, so that a launch allocates nothing
  mutable std::string key_scratch_;
  std::unordered_map<std::string, Family> families_;
};

// Whether two durations agree within measurement noise / differ materially (the rules above).
bool durations_agree(double a, double b);
bool durations_differ(double a, double b);

}  // namespace vgpu
