// The kernel-time database: the measured duration of each launch signature on a physical GPU
// model, recorded by the passthrough backend (CUPTI) and replayed by the sim backend.
//
// Where: the file named by VGPU_KERNEL_DB. If that path is an existing directory, each GPU model
// gets its own file inside it, "<model name with every character outside [A-Za-z0-9._-]
// replaced by '_'>.sqlite"; otherwise the path is the file itself. Either way rows are keyed by
// the model, so one file may also hold several models.
//
// The GPU model is the name the driver reports for the device (cuDeviceGetName, e.g.
// "NVIDIA H100 80GB HBM3"), so the passthrough backend records under the physical GPU's own
// name and the sim backend looks up under the virtual GPU's name: a database recorded on an
// H100 serves every virtual H100.
//
// Schema (version 1; the version is in PRAGMA user_version, 3 now):
//   CREATE TABLE kernel_times(
//     gpu_model   TEXT    NOT NULL,   -- cuDeviceGetName of the GPU that measured it
//     signature   BLOB    NOT NULL,   -- LaunchSignature::bytes (front/launch/launch_signature.h)
//     kernel_name TEXT    NOT NULL,   -- the rest is for people reading the table:
//     grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
//     block_x INTEGER, block_y INTEGER, block_z INTEGER,
//     shared_bytes INTEGER,
//     duration_ns INTEGER NOT NULL,   -- mean over `samples` measurements, rounded (CUPTI's
//                                     -- records); the least for settled durations (Merge::least)
//     samples     INTEGER NOT NULL,
//     updated_at  INTEGER NOT NULL,   -- unix seconds of the last record()
//     PRIMARY KEY (gpu_model, signature));
//
// Version 2 adds what the passthrough's settling learnt (front/launch/signature_settling.h), so
// that a launch whose by-value structs carry other stack garbage than the recorded one's still
// finds its duration; version-1 files stay readable (they just have no groups):
//   CREATE TABLE settled_families(     -- per family (function, shape, parameter layout)
//     gpu_model TEXT NOT NULL,
//     family    BLOB NOT NULL,         -- SettlingSignatures::family_of: the signature less its words
//     free      BLOB NOT NULL,         -- one byte per by-value word: 1 = no longer keyed
//     pinned    BLOB NOT NULL,         -- one byte per word: 1 = keyed for good
//     updated_at INTEGER NOT NULL,
//     PRIMARY KEY (gpu_model, family));   -- records OR their words in (pinned wins over free)
//   CREATE TABLE settled_groups(       -- per group of a family (launches of one duration)
//     gpu_model TEXT NOT NULL,
//     signature BLOB NOT NULL,         -- the group's first launch (its keyed words)
//     family    BLOB NOT NULL,
//     kernel_name TEXT NOT NULL,
//     lo BLOB NOT NULL, hi BLOB NOT NULL,  -- per word, u32 LE: the range measured below 2^24
//     wide BLOB NOT NULL,              -- one byte per word: 1 = any value (garbage-like seen)
//     duration_ns INTEGER NOT NULL,    -- the least over records (the least disturbed, as the
//                                      -- passthrough takes across its processes)
//     settled INTEGER NOT NULL,        -- 0: the group never settled; duration_ns is its smallest
//                                      -- learnable sample (a short recording); a settled record wins
//     records INTEGER NOT NULL, updated_at INTEGER NOT NULL,
//     PRIMARY KEY (gpu_model, signature));  -- records merge their ranges
// lookup() takes the exact row first, then the family's groups through a SettlingSignatures
// filled from these rows (adopt), so the matching rule is settling's own: keyed words equal, each
// free word inside the group's range (or the group saw garbage-like values there).
//
// Version 3 keys every recorded duration also by its work key (signature_work_key,
// launch_signature.h: the signature with each 4-byte word of 2^24 or more, and both halves of a
// stale user address, counted only as "large"), because a replay's by-value structs carry its own
// process's stack garbage in words that the recording's processes never varied, so settling kept
// them keyed and no group covers the replay's launches ("keyed-words" misses):
//   CREATE TABLE work_keys(
//     gpu_model   TEXT    NOT NULL,
//     work_key    INTEGER NOT NULL,   -- signature_work_key, as a signed 64-bit integer
//     kernel_name TEXT    NOT NULL,   -- for people reading the table
//     duration_ns INTEGER NOT NULL,   -- the least of every record() and group under this key
//     samples     INTEGER NOT NULL,   -- how many records (and groups) it is the least of
//     updated_at  INTEGER NOT NULL,
//     PRIMARY KEY (gpu_model, work_key));
// lookup() falls back to it after the exact row and the groups miss. Words below 2^24 (sizes,
// flags) and the shape still key it, so another size or grid does not match. The key is a hash
// of this build's signature_work_key: a database recorded by a build whose work key differs
// answers no launch through it (its other levels still do). Version 1 and 2 files stay
// readable: their work keys are derived in memory from their exact rows and groups, and the first
// record into one (a writable open) adds the table and fills it from those rows.
//
// Cost on the launch path: lookup() reads an in-memory cache under a shared lock; only the
// first lookup of a signature (hit or miss) queries SQLite, and misses are cached too (a
// record() from this process updates the cache), up to kMaxCachedMisses of them: then every
// cached miss is forgotten, so that launches whose signatures never repeat (stack garbage in
// by-value structs) keep memory bounded. That is lookup_exact() (the passthrough's, which must
// see what the job's other processes record meanwhile). lookup() (the sim's) reads a family's
// exact rows and groups from SQLite once, at the first launch of the family this handle sees,
// and answers its later launches in memory: a launch whose stack garbage is new costs no query
// (0.28 us against 6.3 us: bench/driver/kernel_db_lookup_bench) and no memory; one it does not
// cover checks whether another connection recorded since (PRAGMA data_version) and if so
// reads again. Thread-safe. Errors (unreadable file, locked database, bad schema) are logged
// once and the database then behaves as empty / drops writes: timing falls back to the model,
// the host program never fails because of it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "front/launch/kernel_time_model.h"
#include "front/launch/launch_signature.h"
#include "front/launch/signature_settling.h"

namespace vgpu {

// Which level of the database answered a lookup (the list of misses counts launches by it).
// family: none of those, but the kernel with this grid, block and parameter layout was recorded:
// with other one-byte parameters only (lookup_flags_aside), or with other keyed words where the
// fallback model infers no work (its launch floor): recorded_or_estimated() takes that row, or
// the family's median duration.
enum class KernelDbLevel : uint8_t { exact, group, work_key, family, none };
// "exact", "group", "work-key", "family", "fallback"
const char* kernel_db_level_name(KernelDbLevel level);

class KernelTimeDb {
 public:
  // `path` empty: no database (every lookup misses, record() is dropped).
  KernelTimeDb(std::string path, std::string gpu_model);
  ~KernelTimeDb();
  KernelTimeDb(const KernelTimeDb&) = delete;
  KernelTimeDb& operator=(const KernelTimeDb&) = delete;

  // The path from VGPU_KERNEL_DB, or empty when unset.
  static std::string path_from_environment();
  // The file used for `gpu_model` under `path` (see above).
  static std::string file_for(const std::string& path, const std::string& gpu_model);

  const std::string& gpu_model() const { return model_; }
  bool available() const;  // the database opened (or will be created on the first record())

  // The recorded duration of `signature` in nanoseconds, or nullopt: its exact row, else the
  // settled group of its family that covers it (the family as the file held it when this handle
  // first looked one of its launches up, plus this handle's own records), else the least duration
  // recorded under its work key. `level` (optional) says which answered.
  std::optional<uint64_t> lookup(const LaunchSignature& signature, KernelDbLevel* level = nullptr);
  // The work-key level alone (tests, tools).
  std::optional<uint64_t> lookup_work_key(const LaunchSignature& signature);
  // Number of work-key rows of this GPU model in the file (0 for a version-1 or -2 file).
  int64_t work_key_count();
  // The exact row only (the passthrough, which settles groups itself).
  std::optional<uint64_t> lookup_exact(const LaunchSignature& signature);
  // The group of this launch's family that covers it (settled_groups), or nullopt.
  std::optional<uint64_t> lookup_group(const LaunchSignature& signature);
  // The median of every duration recorded for the signature's family (its kernel, grid, block and
  // parameter layout; exact rows and groups), whatever its words: the family level.
  std::optional<uint64_t> lookup_family(const LaunchSignature& signature);
  // An exact row of the signature's family that differs from it only in one-byte parameters
  // (without_flag_bytes: flags, empty functors' stack bytes), or the upper median of several;
  // else the settled groups that cover it with those parameters' words not compared
  // (SettlingSignatures::settled_flags_aside); nullopt when none. Counted at the family level
  // (recorded_or_estimated).
  std::optional<uint64_t> lookup_flags_aside(const LaunchSignature& signature);

  // Why lookup() found nothing for `signature` (SettlingSignatures::uncovered: its family's
  // groups, none for a family the database lacks), and in *keyed the signature with the words
  // its family's groups do not key zeroed: what the list of misses aggregates by.
  // `detail`: SettlingSignatures::uncovered's.
  SettlingSignatures::Uncovered explain_miss(const LaunchSignature& signature, LaunchSignature* keyed,
                                             std::string* detail = nullptr);

  // Stores groups as settling exported them (merged into rows already there), in one
  // transaction. Returns false if the write failed (logged).
  bool record_groups(std::span<const SettledGroup> groups);
  // Number of group rows of this GPU model (tests, tools).
  int64_t group_count();
  // Moves what this handle wrote from the write-ahead log into the file itself, so that the file
  // alone holds every record: a handle kept until the process exits (the passthrough's) is never
  // closed, SQLite then leaves its last records in "<file>-wal", and a copy of the file alone
  // (a user's `cp` after a recording) lacked them (64 rows of a GPT-2 recording that holds ~99).
  // Waits for no reader (SQLite's passive checkpoint). False: nothing written by this handle,
  // or SQLite refused.
  bool checkpoint();

  // How a record combines with the row's duration: `mean` of all samples (every launch's own
  // measurement, CUPTI), or the `least` (a settled duration, already the least disturbed of its
  // process's samples: the ranks of a job and later recordings each offer theirs, and the
  // passthrough times a launch by the least of them, shared_durations.h).
  enum class Merge { mean, least };
  // Adds one measurement. Returns false if the write failed (logged).
  bool record(const LaunchSignature& signature, uint64_t duration_ns, Merge merge = Merge::mean);

  // Number of exact rows of this GPU model (tests, tools).
  int64_t count();

  static constexpr size_t kMaxCachedMisses = 4096;
  // Misses held in the cache now (tests).
  size_t cached_misses();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string model_;
};

// The duration of a launch that does not run: the recorded one when `db` holds the signature
// (*from_database true), else the fallback model's estimate for `gpu`. What the sim backend
// gives every launch, and the passthrough backend the launches it replays.
// `level` (optional): which level of `db` answered (KernelDbLevel::none: the model's estimate).
double recorded_or_estimated(KernelTimeDb& db, const GpuFigures& gpu, const LaunchSignature& signature,
                             bool* from_database = nullptr, const LaunchHints& hints = {},
                             KernelDbLevel* level = nullptr);

}  // namespace vgpu
