#include "front/launch/kernel_time_db.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "common/log.h"
#include "common/settings.h"

namespace vgpu {
namespace {

constexpr int kSchemaVersion = 3;  // 2: settled_families and settled_groups; 3: work_keys

constexpr const char* kCreateSql =
    "CREATE TABLE IF NOT EXISTS kernel_times("
    " gpu_model TEXT NOT NULL, signature BLOB NOT NULL, kernel_name TEXT NOT NULL,"
    " grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,"
    " block_x INTEGER, block_y INTEGER, block_z INTEGER, shared_bytes INTEGER,"
    " duration_ns INTEGER NOT NULL, samples INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " PRIMARY KEY (gpu_model, signature));"
    "CREATE TABLE IF NOT EXISTS settled_families("
    " gpu_model TEXT NOT NULL, family BLOB NOT NULL, free BLOB NOT NULL, pinned BLOB NOT NULL,"
    " updated_at INTEGER NOT NULL, PRIMARY KEY (gpu_model, family));"
    "CREATE TABLE IF NOT EXISTS settled_groups("
    " gpu_model TEXT NOT NULL, signature BLOB NOT NULL, family BLOB NOT NULL, kernel_name TEXT NOT NULL,"
    " lo BLOB NOT NULL, hi BLOB NOT NULL, wide BLOB NOT NULL, duration_ns INTEGER NOT NULL,"
    " settled INTEGER NOT NULL, records INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " PRIMARY KEY (gpu_model, signature));"
    "CREATE INDEX IF NOT EXISTS settled_groups_by_family ON settled_groups(gpu_model, family);"
    "CREATE TABLE IF NOT EXISTS work_keys("
    " gpu_model TEXT NOT NULL, work_key INTEGER NOT NULL, kernel_name TEXT NOT NULL,"
    " duration_ns INTEGER NOT NULL, samples INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " PRIMARY KEY (gpu_model, work_key));";

constexpr const char* kLookupSql =
    "SELECT duration_ns FROM kernel_times WHERE gpu_model = ?1 AND signature = ?2;";

// The mean over all samples, kept in integer nanoseconds.
constexpr const char* kRecordSql =
    "INSERT INTO kernel_times(gpu_model, signature, kernel_name, grid_x, grid_y, grid_z,"
    " block_x, block_y, block_z, shared_bytes, duration_ns, samples, updated_at)"
    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1, ?12)"
    " ON CONFLICT(gpu_model, signature) DO UPDATE SET"
    "  duration_ns = (duration_ns * samples + excluded.duration_ns + (samples + 1) / 2)"
    "                / (samples + 1),"
    "  samples = samples + 1, updated_at = excluded.updated_at"
    " RETURNING duration_ns;";

// The same with the least duration kept.
constexpr const char* kRecordLeastSql =
    "INSERT INTO kernel_times(gpu_model, signature, kernel_name, grid_x, grid_y, grid_z,"
    " block_x, block_y, block_z, shared_bytes, duration_ns, samples, updated_at)"
    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1, ?12)"
    " ON CONFLICT(gpu_model, signature) DO UPDATE SET"
    "  duration_ns = MIN(duration_ns, excluded.duration_ns),"
    "  samples = samples + 1, updated_at = excluded.updated_at"
    " RETURNING duration_ns;";

// A family's exact rows: every signature that starts with its header (lookup()).
constexpr const char* kExactRangeSql =
    "SELECT signature, duration_ns FROM kernel_times WHERE gpu_model = ?1 AND signature >= ?2 AND signature < ?3;";
constexpr const char* kExactRangeOpenSql =
    "SELECT signature, duration_ns FROM kernel_times WHERE gpu_model = ?1 AND signature >= ?2;";
constexpr const char* kFamilySql = "SELECT free, pinned FROM settled_families WHERE gpu_model = ?1 AND family = ?2;";
constexpr const char* kFamilyWriteSql =
    "INSERT OR REPLACE INTO settled_families(gpu_model, family, free, pinned, updated_at) VALUES(?1, ?2, ?3, ?4, ?5);";
// settled() takes the first group of a bucket that covers a launch: settled groups before those
// that never settled (as the passthrough's own lookup), and the least disturbed first.
constexpr const char* kGroupsSql =
    "SELECT signature, lo, hi, wide, duration_ns FROM settled_groups WHERE gpu_model = ?1 AND family = ?2"
    " ORDER BY settled DESC, duration_ns;";
constexpr const char* kGroupSql =
    "SELECT lo, hi, wide, duration_ns, settled, records FROM settled_groups WHERE gpu_model = ?1 AND signature = ?2;";
constexpr const char* kGroupWriteSql =
    "INSERT OR REPLACE INTO settled_groups(gpu_model, signature, family, kernel_name, lo, hi, wide, duration_ns,"
    " settled, records, updated_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11);";

// A recorded duration under its work key: the least, and one more sample (or a migrated row's).
constexpr const char* kWorkKeyWriteSql =
    "INSERT INTO work_keys(gpu_model, work_key, kernel_name, duration_ns, samples, updated_at)"
    " VALUES(?1, ?2, ?3, ?4, ?5, ?6)"
    " ON CONFLICT(gpu_model, work_key) DO UPDATE SET"
    "  duration_ns = MIN(duration_ns, excluded.duration_ns),"
    "  samples = samples + excluded.samples, updated_at = excluded.updated_at;";
constexpr const char* kWorkKeysSql = "SELECT work_key, duration_ns FROM work_keys WHERE gpu_model = ?1;";
// What a file older than version 3 recorded, to key by work key (all models: the migration;
// one: a read-only handle on such a file).
constexpr const char* kAllExactSql = "SELECT gpu_model, signature, kernel_name, duration_ns, samples FROM kernel_times;";
constexpr const char* kAllGroupsSql =
    "SELECT gpu_model, signature, kernel_name, duration_ns, records FROM settled_groups;";

// Per-word vectors as BLOBs: bytes as they are, words as u32 LE (the signature's own order).
std::string blob_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::string blob_of(const std::vector<uint32_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
std::string column_blob(sqlite3_stmt* st, int i) {
  const void* p = sqlite3_column_blob(st, i);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st, i)))
           : std::string();
}
std::vector<uint8_t> bytes_of(const std::string& b) { return std::vector<uint8_t>(b.begin(), b.end()); }
std::vector<uint32_t> words_of(const std::string& b) {
  std::vector<uint32_t> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

void bind_blob(sqlite3_stmt* st, int i, const std::string& b) {
  sqlite3_bind_blob(st, i, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT);
}
void bind_text(sqlite3_stmt* st, int i, const std::string& t) {
  sqlite3_bind_text(st, i, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
}

// `into` takes what `other` adds: wider ranges; the settled duration over a never-settled one,
// else the smaller (the least disturbed). Both describe the same words (same signature).
void merge_group(SettledGroup& into, const SettledGroup& other) {
  for (size_t i = 0; i < into.lo.size() && i < other.lo.size(); ++i) {
    const bool none = into.lo[i] > into.hi[i], other_none = other.lo[i] > other.hi[i];
    if (none) {
      into.lo[i] = other.lo[i], into.hi[i] = other.hi[i];
    } else if (!other_none) {
      into.lo[i] = std::min(into.lo[i], other.lo[i]);
      into.hi[i] = std::max(into.hi[i], other.hi[i]);
    }
    into.wide[i] |= other.wide[i];
  }
  if (into.settled == other.settled)
    into.seconds = std::min(into.seconds, other.seconds);
  else if (other.settled)
    into.seconds = other.seconds;
  into.settled |= other.settled;
}

// Writes one duration under `signature`'s work key with `st` (kWorkKeyWriteSql, prepared on the
// connection being written).
bool write_work_key(sqlite3_stmt* st, const std::string& model, const LaunchSignature& signature,
                    const std::string& kernel_name, int64_t duration_ns, int64_t samples, int64_t now) {
  sqlite3_reset(st);
  bind_text(st, 1, model);
  sqlite3_bind_int64(st, 2, static_cast<int64_t>(signature_work_key(signature)));
  bind_text(st, 3, kernel_name);
  sqlite3_bind_int64(st, 4, duration_ns);
  sqlite3_bind_int64(st, 5, samples);
  sqlite3_bind_int64(st, 6, now);
  return sqlite3_step(st) == SQLITE_DONE;
}

// Calls fn(model, signature, kernel_name, duration_ns, samples) for every exact row and every
// group of the file (a version-1 file has no groups: skipped). What a version-3 file keeps in
// work_keys, for files recorded before it.
template <class F>
void for_each_recorded(sqlite3* db, F&& fn) {
  for (const char* sql : {kAllExactSql, kAllGroupsSql}) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
      sqlite3_finalize(st);
      continue;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* model = sqlite3_column_text(st, 0);
      const unsigned char* name = sqlite3_column_text(st, 2);
      const int64_t ns = sqlite3_column_int64(st, 3);
      if (model == nullptr || ns < 0) continue;
      fn(std::string(reinterpret_cast<const char*>(model)), LaunchSignature{column_blob(st, 1)},
         std::string(name ? reinterpret_cast<const char*>(name) : ""), ns, std::max<int64_t>(1, sqlite3_column_int64(st, 4)));
    }
    sqlite3_finalize(st);
  }
}

// The file's schema version (PRAGMA user_version; 0 for a new file).
int user_version(sqlite3* db) {
  sqlite3_stmt* st = nullptr;
  int v = 0;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version;", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return v;
}

// A file older than version 3 keys its rows by work key too, once, in the transaction that sets
// the version (several recording processes may open it at once: the second finds it set and
// does nothing). A new file just gets the version.
void migrate_to_work_keys(sqlite3* db) {
  if (sqlite3_exec(db, "BEGIN IMMEDIATE;", nullptr, nullptr, nullptr) != SQLITE_OK) return;
  bool ok = true;
  if (user_version(db) < kSchemaVersion) {
    sqlite3_stmt* w = nullptr;
    ok = sqlite3_prepare_v2(db, kWorkKeyWriteSql, -1, &w, nullptr) == SQLITE_OK;
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    if (ok)
      for_each_recorded(db, [&](const std::string& model, const LaunchSignature& sig, const std::string& name,
                                int64_t ns, int64_t samples) {
        ok = write_work_key(w, model, sig, name, ns, samples, now) && ok;
      });
    sqlite3_finalize(w);
    const std::string version = fmt::format("PRAGMA user_version = {};", kSchemaVersion);
    ok = ok && sqlite3_exec(db, version.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  sqlite3_exec(db, ok ? "COMMIT;" : "ROLLBACK;", nullptr, nullptr, nullptr);
}

bool is_directory(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

struct KernelTimeDb::Impl {
  std::string file;
  std::string model;

  // The cache: every signature asked about or recorded, with its duration or nullopt (a miss).
  // Misses are kept up to kMaxCachedMisses, then all forgotten at once: launches whose by-value
  // structs carry stack garbage never repeat a signature, and keeping each of their misses grew
  // the sim backend by 188 bytes per launch, without bound.
  std::shared_mutex cache_mu;
  std::unordered_map<std::string, std::optional<uint64_t>> cache;
  size_t cached_misses = 0;

  // Adds a miss (cache_mu held exclusively), forgetting every cached miss first when full.
  void cache_miss(const std::string& signature) {
    if (cached_misses >= kMaxCachedMisses) {
      std::erase_if(cache, [](const auto& kv) { return !kv.second.has_value(); });
      cached_misses = 0;
    }
    if (cache.try_emplace(signature, std::nullopt).second) ++cached_misses;
  }

  // The connection, opened on first use; `failed` stops retrying after an error.
  std::mutex db_mu;
  sqlite3* db = nullptr;
  bool writable = false;
  std::atomic<bool> failed{false};

  ~Impl() {
    sqlite3_finalize(version_st);
    if (db) sqlite3_close_v2(db);
  }

  void fail_once(const char* what) {
    const std::string msg = fmt::format("kernel-time database {}: {}: {}", file, what,
                                        db ? sqlite3_errmsg(db) : "cannot open");
    log::once(log::Level::warn, "kernel_time_db:" + file, msg);
  }

  // Opens the connection (db_mu held). `for_write` creates the file and schema if needed.
  bool open(bool for_write) {
    if (file.empty()) return false;
    if (db && (writable || !for_write)) return true;
    if (failed) return false;
    if (!for_write && !exists(file)) return false;  // nothing recorded yet: a plain miss
    if (db) {  // upgrade a read-only connection
      sqlite3_finalize(version_st);
      version_st = nullptr;
      sqlite3_close_v2(db);
      db = nullptr;
    }
    const int flags = (for_write ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
                      SQLITE_OPEN_FULLMUTEX;
    if (sqlite3_open_v2(file.c_str(), &db, flags, nullptr) != SQLITE_OK) {
      fail_once("open failed");
      if (db) sqlite3_close_v2(db);
      db = nullptr;
      failed = true;
      return false;
    }
    sqlite3_busy_timeout(db, 5000);  // several recording processes may share the file
    if (for_write) {
      const bool older = user_version(db) < kSchemaVersion;
      char* err = nullptr;
      if (sqlite3_exec(db, kCreateSql, nullptr, nullptr, &err) != SQLITE_OK) {
        sqlite3_free(err);
        fail_once("cannot create the kernel_times table");
        sqlite3_close_v2(db);
        db = nullptr;
        failed = true;
        return false;
      }
      // WAL: readers in other processes are not blocked by a recorder; NORMAL: a record is not
      // an fsync (losing the last measurements in a power cut costs only re-measuring them).
      sqlite3_exec(db,
                   "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", nullptr, nullptr, nullptr);
      if (older) migrate_to_work_keys(db);
    }
    writable = for_write;
    return true;
  }

  // The groups of every family asked about so far (read once per family, then updated by this
  // handle's record_groups): settling's own matching answers for them. Lock order: groups_mu,
  // then db_mu.
  std::mutex groups_mu;
  SettlingSignatures groups{1};
  std::unordered_set<std::string> families_read;
  // The median of every duration recorded under each family read (exact rows and groups),
  // computed once when the family is read: the family level.
  std::unordered_map<std::string, uint64_t> family_median;
  // Exact rows of the families read, keyed by their signature with one-byte parameters zeroed
  // (without_flag_bytes): lookup_flags_aside's answers.
  std::unordered_map<std::string, std::vector<uint64_t>> flags_aside;

  // The least duration under each work key of this model (groups_mu), read from the file at the
  // first launch that needs it, then updated by this handle's own records.
  std::unordered_map<uint64_t, uint64_t> work_keys;
  bool work_keys_read = false;

  // Reads work_keys, or derives them from the exact rows and groups of a file older than
  // version 3 (groups_mu held; takes db_mu).
  void read_work_keys() {
    work_keys_read = true;
    work_keys.clear();
    std::lock_guard lock(db_mu);
    if (!open(false)) return;
    if (sqlite3_stmt* st = prepare(kWorkKeysSql)) {
      bind_text(st, 1, model);
      while (sqlite3_step(st) == SQLITE_ROW) {
        const int64_t ns = sqlite3_column_int64(st, 1);
        if (ns >= 0) work_keys[static_cast<uint64_t>(sqlite3_column_int64(st, 0))] = static_cast<uint64_t>(ns);
      }
      sqlite3_finalize(st);
      return;
    }
    for_each_recorded(db, [this](const std::string& m, const LaunchSignature& sig, const std::string&, int64_t ns,
                                 int64_t) { if (m == model) offer_work_key(signature_work_key(sig), ns); });
  }

  // One more duration under a work key (groups_mu held): the least is kept.
  void offer_work_key(uint64_t key, int64_t ns) {
    if (ns < 0) return;
    auto [it, inserted] = work_keys.try_emplace(key, static_cast<uint64_t>(ns));
    if (!inserted) it->second = std::min(it->second, static_cast<uint64_t>(ns));
  }

  // The work-key level of a lookup (groups_mu held).
  std::optional<uint64_t> by_work_key(const LaunchSignature& signature) {
    if (!work_keys_read) read_work_keys();
    if (work_keys.empty()) return std::nullopt;
    const auto it = work_keys.find(signature_work_key(signature));
    return it != work_keys.end() ? std::optional<uint64_t>(it->second) : std::nullopt;
  }

  // A statement, or null when it does not prepare (a version-1 file has no group tables).
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
      sqlite3_finalize(st);
      return nullptr;
    }
    return st;
  }

  // The number of `table`'s rows of `model` (db_mu held, database open); 0 when the table is
  // missing (a file of an older version).
  int64_t rows_of_model(const char* table, const std::string& model) {
    const std::string sql = std::string("SELECT COUNT(*) FROM ") + table + " WHERE gpu_model = ?1;";
    sqlite3_stmt* st = prepare(sql.c_str());
    if (st == nullptr) return 0;
    bind_text(st, 1, model);
    int64_t n = 0;
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
  }

  // The family's groups from the file into `groups`, their durations onto `durations`
  // (groups_mu held; takes db_mu).
  void read_family(const std::string& family, std::vector<uint64_t>* durations) {
    std::lock_guard lock(db_mu);
    if (!open(false)) return;
    SettledGroup proto;
    {
      sqlite3_stmt* st = prepare(kFamilySql);
      if (st == nullptr) return;  // no settled_families: a version-1 database
      bind_text(st, 1, model);
      bind_blob(st, 2, family);
      const bool found = sqlite3_step(st) == SQLITE_ROW;
      if (found) {
        proto.free = bytes_of(column_blob(st, 0));
        proto.pinned = bytes_of(column_blob(st, 1));
      }
      sqlite3_finalize(st);
      if (!found) return;
    }
    sqlite3_stmt* st = prepare(kGroupsSql);
    if (st == nullptr) return;
    bind_text(st, 1, model);
    bind_blob(st, 2, family);
    while (sqlite3_step(st) == SQLITE_ROW) {
      SettledGroup g = proto;
      g.signature.bytes = column_blob(st, 0);
      g.lo = words_of(column_blob(st, 1));
      g.hi = words_of(column_blob(st, 2));
      g.wide = bytes_of(column_blob(st, 3));
      g.seconds = static_cast<double>(sqlite3_column_int64(st, 4)) * 1e-9;
      if (g.seconds >= 0) durations->push_back(static_cast<uint64_t>(std::llround(g.seconds * 1e9)));
      groups.adopt(g);  // ignores a row whose sizes do not fit its family
    }
    sqlite3_finalize(st);
  }

  // The exact rows of `family` (takes db_mu): those whose signature starts with the family's
  // header (name and shape; a range of the primary key), of this very family.
  std::vector<std::pair<std::string, uint64_t>> exact_rows_of(const std::string& family) {
    std::vector<std::pair<std::string, uint64_t>> rows;
    const size_t nul = family.find('\0', 10);
    if (nul == std::string::npos || family.size() < nul + 1 + 28) return rows;
    const std::string low = family.substr(0, nul + 1 + 28);
    std::string high = low;  // the first string above every one that starts with `low`
    while (!high.empty() && static_cast<unsigned char>(high.back()) == 0xff) high.pop_back();
    if (!high.empty()) high.back() = static_cast<char>(static_cast<unsigned char>(high.back()) + 1);
    std::lock_guard lock(db_mu);
    if (!open(false)) return rows;
    sqlite3_stmt* st = prepare(high.empty() ? kExactRangeOpenSql : kExactRangeSql);
    if (st == nullptr) return rows;
    bind_text(st, 1, model);
    bind_blob(st, 2, low);
    if (!high.empty()) bind_blob(st, 3, high);
    std::string of;
    while (sqlite3_step(st) == SQLITE_ROW) {
      LaunchSignature sig{column_blob(st, 0)};
      const int64_t ns = sqlite3_column_int64(st, 1);
      if (ns >= 0 && SettlingSignatures::family_of(sig, &of) && of == family)
        rows.emplace_back(std::move(sig.bytes), static_cast<uint64_t>(ns));
    }
    sqlite3_finalize(st);
    return rows;
  }

  // First use of `family` by this handle (groups_mu held): its groups into `groups`, its exact
  // rows into the cache, so that its later launches ask SQLite nothing.
  void read_family_once(const std::string& family) {
    if (!families_read.insert(family).second) return;
    std::vector<uint64_t> durations;
    read_family(family, &durations);
    const auto rows = exact_rows_of(family);
    for (const auto& row : rows) durations.push_back(row.second);
    if (!durations.empty()) {  // the upper median of an even count
      const auto mid = durations.begin() + static_cast<std::ptrdiff_t>(durations.size() / 2);
      std::nth_element(durations.begin(), mid, durations.end());
      family_median[family] = *mid;
    }
    for (const auto& [sig, ns] : rows)
      if (const std::optional<LaunchSignature> key = without_flag_bytes(LaunchSignature{sig}))
        flags_aside[key->bytes].push_back(ns);
    std::unique_lock lock(cache_mu);
    for (const auto& [sig, ns] : rows) {
      auto [it, inserted] = cache.try_emplace(sig, ns);
      if (!inserted && !it->second) {
        --cached_misses;
        it->second = ns;
      }
    }
  }

  // What the file held changes when another connection (another process, another handle)
  // records: PRAGMA data_version says so without reading the file. Then every family is read
  // again at its next launch (groups_mu held; takes db_mu).
  int64_t data_version = -1;
  sqlite3_stmt* version_st = nullptr;  // prepared once per connection (a prepare costs ~10 us)
  // Returns whether it forgot them.
  bool forget_families_if_changed() {
    int64_t now = -1;
    {
      std::lock_guard lock(db_mu);
      if (!open(false)) return false;
      if (version_st == nullptr && (version_st = prepare("PRAGMA data_version;")) == nullptr) return false;
      if (sqlite3_step(version_st) == SQLITE_ROW) now = sqlite3_column_int64(version_st, 0);
      sqlite3_reset(version_st);
    }
    if (now == data_version) return false;
    families_read.clear();  // also those read before the file existed
    family_median.clear();
    flags_aside.clear();
    groups = SettlingSignatures(1);
    work_keys_read = false;
    work_keys.clear();
    data_version = now;
    return true;
  }

  // The cache's duration for a signature, if it holds one (a cached miss is not an answer here).
  std::optional<uint64_t> cached_hit(const std::string& signature) {
    std::shared_lock lock(cache_mu);
    const auto it = cache.find(signature);
    return it != cache.end() ? it->second : std::nullopt;
  }

  // Merges `groups` into the file (db_mu held, the connection writable), in one transaction.
  bool write_groups(std::span<const SettledGroup> in) {
    if (sqlite3_exec(db, "BEGIN IMMEDIATE;", nullptr, nullptr, nullptr) != SQLITE_OK) {
      fail_once("cannot begin a transaction");
      return false;
    }
    sqlite3_stmt* family_read = prepare(kFamilySql);
    sqlite3_stmt* family_write = prepare(kFamilyWriteSql);
    sqlite3_stmt* group_read = prepare(kGroupSql);
    sqlite3_stmt* group_write = prepare(kGroupWriteSql);
    sqlite3_stmt* work_key_write = prepare(kWorkKeyWriteSql);
    bool ok = family_read && family_write && group_read && group_write && work_key_write;
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    for (size_t k = 0; ok && k < in.size(); ++k) {
      SettledGroup g = in[k];
      std::string family, name;
      if (!SettlingSignatures::family_of(g.signature, &family) ||
          !decode_signature_header(g.signature, &name, nullptr) || g.seconds < 0)
        continue;
      // The family's words: OR over records, a pinned word never free.
      sqlite3_reset(family_read);
      bind_text(family_read, 1, model);
      bind_blob(family_read, 2, family);
      if (sqlite3_step(family_read) == SQLITE_ROW) {
        const std::string free = column_blob(family_read, 0), pinned = column_blob(family_read, 1);
        for (size_t i = 0; i < g.free.size() && i < free.size() && i < pinned.size(); ++i) {
          g.free[i] |= static_cast<uint8_t>(free[i]);
          g.pinned[i] |= static_cast<uint8_t>(pinned[i]);
        }
      }
      for (size_t i = 0; i < g.free.size() && i < g.pinned.size(); ++i)
        if (g.pinned[i]) g.free[i] = 0;
      sqlite3_reset(family_write);
      bind_text(family_write, 1, model);
      bind_blob(family_write, 2, family);
      bind_blob(family_write, 3, blob_of(g.free));
      bind_blob(family_write, 4, blob_of(g.pinned));
      sqlite3_bind_int64(family_write, 5, now);
      ok = sqlite3_step(family_write) == SQLITE_DONE;
      // The group: ranges merged with a record of the same first launch.
      int64_t records = 1;
      sqlite3_reset(group_read);
      bind_text(group_read, 1, model);
      bind_blob(group_read, 2, g.signature.bytes);
      if (ok && sqlite3_step(group_read) == SQLITE_ROW) {
        SettledGroup old = g;
        old.lo = words_of(column_blob(group_read, 0));
        old.hi = words_of(column_blob(group_read, 1));
        old.wide = bytes_of(column_blob(group_read, 2));
        old.seconds = static_cast<double>(sqlite3_column_int64(group_read, 3)) * 1e-9;
        old.settled = sqlite3_column_int64(group_read, 4) != 0;
        records += sqlite3_column_int64(group_read, 5);
        if (old.lo.size() == g.lo.size() && old.hi.size() == g.hi.size() && old.wide.size() == g.wide.size())
          merge_group(g, old);
      }
      sqlite3_reset(group_write);
      bind_text(group_write, 1, model);
      bind_blob(group_write, 2, g.signature.bytes);
      bind_blob(group_write, 3, family);
      bind_text(group_write, 4, name);
      bind_blob(group_write, 5, blob_of(g.lo));
      bind_blob(group_write, 6, blob_of(g.hi));
      bind_blob(group_write, 7, blob_of(g.wide));
      sqlite3_bind_int64(group_write, 8, std::llround(g.seconds * 1e9));
      sqlite3_bind_int64(group_write, 9, g.settled ? 1 : 0);
      sqlite3_bind_int64(group_write, 10, records);
      sqlite3_bind_int64(group_write, 11, now);
      ok = ok && sqlite3_step(group_write) == SQLITE_DONE;
      // The launch's own duration under its work key (not the merged one: that is already there).
      ok = ok && write_work_key(work_key_write, model, in[k].signature, name, std::llround(in[k].seconds * 1e9), 1, now);
    }
    for (sqlite3_stmt* st : {family_read, family_write, group_read, group_write, work_key_write}) sqlite3_finalize(st);
    if (!ok) fail_once("recording settled groups failed");
    sqlite3_exec(db, ok ? "COMMIT;" : "ROLLBACK;", nullptr, nullptr, nullptr);
    return ok;
  }

  std::optional<uint64_t> query(const std::string& signature) {
    std::lock_guard lock(db_mu);
    if (!open(false)) return std::nullopt;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, kLookupSql, -1, &st, nullptr) != SQLITE_OK) {
      fail_once("lookup failed (not a vgpu kernel-time database?)");
      return std::nullopt;
    }
    sqlite3_bind_text(st, 1, model.data(), static_cast<int>(model.size()), SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, signature.data(), static_cast<int>(signature.size()), SQLITE_STATIC);
    std::optional<uint64_t> out;
    if (sqlite3_step(st) == SQLITE_ROW) {
      const int64_t v = sqlite3_column_int64(st, 0);
      if (v >= 0) out = static_cast<uint64_t>(v);
    }
    sqlite3_finalize(st);
    return out;
  }
};

KernelTimeDb::KernelTimeDb(std::string path, std::string gpu_model)
    : impl_(std::make_unique<Impl>()), model_(std::move(gpu_model)) {
  impl_->file = path.empty() ? std::string() : file_for(path, model_);
  impl_->model = model_;
}

KernelTimeDb::~KernelTimeDb() = default;

std::string KernelTimeDb::path_from_environment() {
  return settings::text(settings::Id::kernel_db);
}

std::string KernelTimeDb::file_for(const std::string& path, const std::string& gpu_model) {
  if (!is_directory(path)) return path;
  std::string name;
  for (char c : gpu_model) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    name.push_back(keep ? c : '_');
  }
  return path + "/" + name + ".sqlite";
}

bool KernelTimeDb::available() const { return !impl_->file.empty() && !impl_->failed; }

const char* kernel_db_level_name(KernelDbLevel level) {
  switch (level) {
    case KernelDbLevel::exact: return "exact";
    case KernelDbLevel::group: return "group";
    case KernelDbLevel::work_key: return "work-key";
    case KernelDbLevel::family: return "family";
    case KernelDbLevel::none: return "fallback";
  }
  return "fallback";
}

std::optional<uint64_t> KernelTimeDb::lookup(const LaunchSignature& signature, KernelDbLevel* level) {
  KernelDbLevel unused;
  KernelDbLevel& answered = level ? *level : unused;
  answered = KernelDbLevel::none;
  if (impl_->file.empty()) return std::nullopt;
  if (std::optional<uint64_t> hit = impl_->cached_hit(signature.bytes)) {
    answered = KernelDbLevel::exact;
    return hit;
  }
  std::string family;
  if (!SettlingSignatures::family_of(signature, &family)) {
    std::optional<uint64_t> exact = lookup_exact(signature);
    if (exact) answered = KernelDbLevel::exact;
    return exact;
  }
  std::lock_guard lock(impl_->groups_mu);
  // What this handle read answers; a launch it does not cover asks whether the file changed
  // since (a check of ~5 us, paid by misses only) and, if so, is looked up again.
  for (int pass = 0; pass < 2; ++pass) {
    impl_->read_family_once(family);  // its exact rows are in the cache from now on
    if (std::optional<uint64_t> exact = impl_->cached_hit(signature.bytes)) {
      answered = KernelDbLevel::exact;
      return exact;
    }
    if (const std::optional<double> s = impl_->groups.settled(signature)) {
      answered = KernelDbLevel::group;
      return static_cast<uint64_t>(std::llround(*s * 1e9));
    }
    // Not cached under the exact signature: launches whose garbage never repeats would grow the
    // cache without bound; the work key costs a hash of the signature instead.
    if (std::optional<uint64_t> ns = impl_->by_work_key(signature)) {
      answered = KernelDbLevel::work_key;
      return ns;
    }
    if (pass == 0 && !impl_->forget_families_if_changed()) break;
  }
  return std::nullopt;
}

std::optional<uint64_t> KernelTimeDb::lookup_work_key(const LaunchSignature& signature) {
  if (impl_->file.empty()) return std::nullopt;
  std::lock_guard lock(impl_->groups_mu);
  return impl_->by_work_key(signature);
}

int64_t KernelTimeDb::work_key_count() {
  std::lock_guard lock(impl_->db_mu);
  if (!impl_->open(false)) return 0;
  return impl_->rows_of_model("work_keys", model_);
}

std::optional<uint64_t> KernelTimeDb::lookup_group(const LaunchSignature& signature) {
  if (impl_->file.empty()) return std::nullopt;
  std::string family;
  if (!SettlingSignatures::family_of(signature, &family)) return std::nullopt;
  std::lock_guard lock(impl_->groups_mu);
  impl_->read_family_once(family);
  const std::optional<double> s = impl_->groups.settled(signature);
  if (!s) return std::nullopt;
  return static_cast<uint64_t>(std::llround(*s * 1e9));
}

std::optional<uint64_t> KernelTimeDb::lookup_family(const LaunchSignature& signature) {
  if (impl_->file.empty()) return std::nullopt;
  std::string family;
  if (!SettlingSignatures::family_of(signature, &family)) return std::nullopt;
  std::lock_guard lock(impl_->groups_mu);
  impl_->read_family_once(family);
  const auto it = impl_->family_median.find(family);
  if (it == impl_->family_median.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> KernelTimeDb::lookup_flags_aside(const LaunchSignature& signature) {
  if (impl_->file.empty()) return std::nullopt;
  std::string family;
  if (!SettlingSignatures::family_of(signature, &family)) return std::nullopt;
  const std::optional<LaunchSignature> key = without_flag_bytes(signature);
  if (!key) return std::nullopt;
  std::lock_guard lock(impl_->groups_mu);
  impl_->read_family_once(family);
  const auto it = impl_->flags_aside.find(key->bytes);
  if (it == impl_->flags_aside.end()) {
    // No exact row: a group whose other words cover the launch (a struct of stack garbage beside
    // the functor makes every launch's bytes differ, so only groups were recorded for it).
    const std::optional<double> s = impl_->groups.settled_flags_aside(signature);
    if (!s) return std::nullopt;
    return static_cast<uint64_t>(std::llround(*s * 1e9));
  }
  // Rows that differ in a flag whose value changed the work: the upper median of them.
  std::vector<uint64_t> d = it->second;
  const auto mid = d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2);
  std::nth_element(d.begin(), mid, d.end());
  return *mid;
}

SettlingSignatures::Uncovered KernelTimeDb::explain_miss(const LaunchSignature& signature, LaunchSignature* keyed,
                                                         std::string* detail) {
  if (detail != nullptr) detail->clear();
  std::string family;
  if (impl_->file.empty() || !SettlingSignatures::family_of(signature, &family)) {
    *keyed = signature;
    return SettlingSignatures::Uncovered::family;
  }
  std::lock_guard lock(impl_->groups_mu);
  impl_->read_family_once(family);
  return impl_->groups.uncovered(signature, keyed, detail);
}

bool KernelTimeDb::record_groups(std::span<const SettledGroup> groups) {
  if (impl_->file.empty()) return false;
  if (groups.empty()) return true;
  {
    std::lock_guard lock(impl_->db_mu);
    if (!impl_->open(true) || !impl_->write_groups(groups)) return false;
  }
  // Families this handle has read already see the groups now (others read them from the file),
  // and so do its work keys.
  std::lock_guard lock(impl_->groups_mu);
  for (const SettledGroup& g : groups) {
    if (impl_->work_keys_read) impl_->offer_work_key(signature_work_key(g.signature), std::llround(g.seconds * 1e9));
    std::string family;
    if (SettlingSignatures::family_of(g.signature, &family) && impl_->families_read.count(family))
      impl_->groups.adopt(g);
  }
  return true;
}

int64_t KernelTimeDb::group_count() {
  std::lock_guard lock(impl_->db_mu);
  if (!impl_->open(false)) return 0;
  return impl_->rows_of_model("settled_groups", model_);
}

bool KernelTimeDb::checkpoint() {
  if (impl_->file.empty()) return false;
  std::lock_guard lock(impl_->db_mu);
  if (impl_->db == nullptr || !impl_->writable) return false;
  int frames = 0, copied = 0;
  return sqlite3_wal_checkpoint_v2(impl_->db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied) == SQLITE_OK;
}

std::optional<uint64_t> KernelTimeDb::lookup_exact(const LaunchSignature& signature) {
  if (impl_->file.empty()) return std::nullopt;
  {
    std::shared_lock lock(impl_->cache_mu);
    auto it = impl_->cache.find(signature.bytes);
    if (it != impl_->cache.end()) return it->second;
  }
  std::optional<uint64_t> found = impl_->query(signature.bytes);
  std::unique_lock lock(impl_->cache_mu);
  // A record() that raced with the query wins: it holds the newer value.
  if (auto it = impl_->cache.find(signature.bytes); it != impl_->cache.end()) return it->second;
  if (found)
    impl_->cache.emplace(signature.bytes, found);
  else
    impl_->cache_miss(signature.bytes);
  return found;
}

bool KernelTimeDb::record(const LaunchSignature& signature, uint64_t duration_ns, Merge merge) {
  if (impl_->file.empty()) return false;
  std::string name;
  LaunchShape shape;
  if (!decode_signature_header(signature, &name, &shape)) {
    log::warn("kernel-time database: record() of bytes that are not a launch signature");
    return false;
  }
  std::optional<uint64_t> stored;
  {
    std::lock_guard lock(impl_->db_mu);
    if (!impl_->open(true)) return false;
    // The row and its work key in one transaction (one commit, as one record was before).
    const bool transaction = sqlite3_exec(impl_->db, "BEGIN IMMEDIATE;", nullptr, nullptr, nullptr) == SQLITE_OK;
    auto end = [&](bool ok) {
      if (transaction) sqlite3_exec(impl_->db, ok ? "COMMIT;" : "ROLLBACK;", nullptr, nullptr, nullptr);
    };
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(impl_->db, merge == Merge::least ? kRecordLeastSql : kRecordSql, -1, &st, nullptr) !=
        SQLITE_OK) {
      impl_->fail_once("record failed");
      end(false);
      return false;
    }
    const std::string& sig = signature.bytes;
    sqlite3_bind_text(st, 1, model_.data(), static_cast<int>(model_.size()), SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, sig.data(), static_cast<int>(sig.size()), SQLITE_STATIC);
    sqlite3_bind_text(st, 3, name.data(), static_cast<int>(name.size()), SQLITE_STATIC);
    for (int i = 0; i < 3; ++i) sqlite3_bind_int64(st, 4 + i, shape.grid[i]);
    for (int i = 0; i < 3; ++i) sqlite3_bind_int64(st, 7 + i, shape.block[i]);
    sqlite3_bind_int64(st, 10, shape.dynamic_shared);
    sqlite3_bind_int64(st, 11, static_cast<int64_t>(duration_ns));
    sqlite3_bind_int64(st, 12, static_cast<int64_t>(std::time(nullptr)));
    if (sqlite3_step(st) == SQLITE_ROW) stored = static_cast<uint64_t>(sqlite3_column_int64(st, 0));
    const int rc = sqlite3_finalize(st);
    if (rc != SQLITE_OK || !stored) {
      impl_->fail_once("record failed");
      end(false);
      return false;
    }
    sqlite3_stmt* w = impl_->prepare(kWorkKeyWriteSql);
    const bool keyed = w != nullptr && write_work_key(w, model_, signature, name, static_cast<int64_t>(duration_ns), 1,
                                                      static_cast<int64_t>(std::time(nullptr)));
    sqlite3_finalize(w);
    if (!keyed) impl_->fail_once("recording the work key failed");
    end(true);  // the exact row stands even if its work key could not be written
  }
  {
    std::lock_guard lock(impl_->groups_mu);
    if (impl_->work_keys_read) impl_->offer_work_key(signature_work_key(signature), static_cast<int64_t>(duration_ns));
  }
  std::unique_lock lock(impl_->cache_mu);
  auto [it, inserted] = impl_->cache.try_emplace(signature.bytes, stored);
  if (!inserted) {
    if (!it->second) --impl_->cached_misses;  // a miss no more
    it->second = stored;
  }
  return true;
}

size_t KernelTimeDb::cached_misses() {
  std::shared_lock lock(impl_->cache_mu);
  return impl_->cached_misses;
}

int64_t KernelTimeDb::count() {
  std::lock_guard lock(impl_->db_mu);
  if (!impl_->open(false)) return 0;
  return impl_->rows_of_model("kernel_times", model_);
}

double recorded_or_estimated(KernelTimeDb& db, const GpuFigures& gpu, const LaunchSignature& signature,
                             bool* from_database, const LaunchHints& hints, KernelDbLevel* level) {
  const std::optional<uint64_t> ns = db.lookup(signature, level);
  if (from_database) *from_database = ns.has_value();
  if (ns) return static_cast<double>(*ns) * 1e-9;
  // The same launch recorded with other one-byte parameters (an empty functor's stack byte, a
  // flag): what the GPU measured for this kernel, shape and every size says more than the model.
  if (const std::optional<uint64_t> aside = db.lookup_flags_aside(signature)) {
    if (level) *level = KernelDbLevel::family;
    return static_cast<double>(*aside) * 1e-9;
  }
  const double model = KernelTimeModel::estimate(gpu, signature, hints);
  // Where the model inferred no work (its answer is the launch floor: a persistent kernel's 132
  // blocks, or buffers it cannot see inside a struct of pointers; cuDNN's attention and the fused
  // AdamW got 2.5 us on the sim, 2026-11-26) but this kernel with this grid, block and parameter
  // layout was recorded with other keyed words, what the recording measured says more. Where the
  // model did infer work (a GEMM's sizes, a grid-stride loop's element count), it keeps its answer:
  // another size is other work.
  if (model <= KernelTimeModel::kLaunchFloorS) {
    if (const std::optional<uint64_t> family = db.lookup_family(signature)) {
      if (level) *level = KernelDbLevel::family;
      return std::max(model, static_cast<double>(*family) * 1e-9);
    }
  }
  return model;
}

}  // namespace vgpu
