#include "front/launch/kernel_time_db.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "common/log.h"
#include "common/settings.h"

namespace vgpu {
namespace {

constexpr int kSchemaVersion = 1;

constexpr const char* kCreateSql =
    "CREATE TABLE IF NOT EXISTS kernel_times("
    " gpu_model TEXT NOT NULL, signature BLOB NOT NULL, kernel_name TEXT NOT NULL,"
    " grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,"
    " block_x INTEGER, block_y INTEGER, block_z INTEGER, shared_bytes INTEGER,"
    " duration_ns INTEGER NOT NULL, samples INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " PRIMARY KEY (gpu_model, signature));";

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
                   fmt::format("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
                               "PRAGMA user_version = {};", kSchemaVersion).c_str(),
                   nullptr, nullptr, nullptr);
    }
    writable = for_write;
    return true;
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

std::optional<uint64_t> KernelTimeDb::lookup(const LaunchSignature& signature) {
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

bool KernelTimeDb::record(const LaunchSignature& signature, uint64_t duration_ns) {
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
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(impl_->db, kRecordSql, -1, &st, nullptr) != SQLITE_OK) {
      impl_->fail_once("record failed");
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
      return false;
    }
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
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(impl_->db, "SELECT COUNT(*) FROM kernel_times WHERE gpu_model = ?1;", -1,
                         &st, nullptr) != SQLITE_OK)
    return 0;
  sqlite3_bind_text(st, 1, model_.data(), static_cast<int>(model_.size()), SQLITE_STATIC);
  int64_t n = 0;
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

double recorded_or_estimated(KernelTimeDb& db, const GpuFigures& gpu, const LaunchSignature& signature,
                             bool* from_database, const LaunchHints& hints) {
  const std::optional<uint64_t> ns = db.lookup(signature);
  if (from_database) *from_database = ns.has_value();
  return ns ? static_cast<double>(*ns) * 1e-9 : KernelTimeModel::estimate(gpu, signature, hints);
}

}  // namespace vgpu
