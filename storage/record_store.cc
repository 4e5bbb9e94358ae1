#include "storage/record_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/json_fields.h"
#include "common/row_layout.h"

namespace hedgedb {
namespace storage {
namespace {

constexpr uint8_t kRecordFormatVersion = 1;
constexpr uint8_t kPayloadFormatVersion = 1;
// version u8, flags u8, reserved u16, sequence u64, label i64, row bytes u32
constexpr size_t kRecordHeaderBytes = 1 + 1 + 2 + 8 + 8 + 4;
constexpr size_t kCrcBytes = 4;
constexpr char kNextCollectionIdKey[] = "next_collection_id";

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  if (s.IsCorruption()) return Status::Corruption(what + ": " + s.ToString());
  if (s.IsNotFound()) return Status::NotFound(what + ": " + s.ToString());
  if (s.IsInvalidArgument()) return Status::InvalidArgument(what + ": " + s.ToString());
  return Status::IOError(what + ": " + s.ToString());
}

std::string CollectionPrefix(uint32_t collection_id) {
  std::string k(4, '\0');
  for (int i = 0; i < 4; ++i) k[i] = char((collection_id >> (24 - 8 * i)) & 0xFF);
  return k;
}

std::string MetaKey(const std::string& name) { return "c/" + name; }

std::string TokenKey(uint32_t collection_id, const std::string& token) {
  return "t/" + CollectionPrefix(collection_id) + token;
}

std::string CalibrationKey(uint32_t collection_id, uint8_t score_type) {
  return "k/" + CollectionPrefix(collection_id) + std::string(1, char(score_type));
}

std::string EncodePayload(const std::string& payload) {
  std::string v;
  v.push_back(char(kPayloadFormatVersion));
  v += payload;
  uint32_t crc = Crc32c(v.data(), v.size());
  PutFixed<uint32_t>(&v, crc);
  return v;
}

Status DecodePayload(const std::string& value, int64_t id, std::string* payload) {
  if (value.size() < 1 + kCrcBytes || uint8_t(value[0]) != kPayloadFormatVersion) {
    return Status::Corruption("payload of item " + std::to_string(id) + " has a bad header");
  }
  uint32_t stored = GetFixed<uint32_t>(value.data() + value.size() - 4);
  if (Crc32c(value.data(), value.size() - 4) != stored) {
    return Status::Corruption("payload of item " + std::to_string(id) + " fails its checksum");
  }
  payload->assign(value.data() + 1, value.size() - 1 - kCrcBytes);
  return Status::OK();
}

}  // namespace

std::string SpecToJson(const CollectionSpec& spec) {
  nlohmann::json j = {{"name", spec.name},       {"kind", KindName(spec.kind)},
                      {"dim", spec.dim},         {"components", spec.components},
                      {"code_k", spec.code_k},   {"index_factory", spec.index_factory},
                      {"match_a", spec.match_a}, {"match_b", spec.match_b},
                      {"samples", spec.samples}, {"seed", spec.seed}};
  // Absent when empty: descriptors without metadata keep their old bytes.
  if (!spec.metadata.empty()) j["metadata"] = spec.metadata;
  // Absent for float32, which descriptors written before row formats
  // existed mean: they keep their bytes and read back as float32.
  if (spec.row_format != RowFormat::kFloat32) j["row_format"] = RowFormatName(spec.row_format);
  return j.dump();
}

Status SpecFromJson(const std::string& text, CollectionSpec* spec) {
  // Integer fields must hold JSON integers within int's range
  // (common/json_fields.h); the first bad one is reported.
  Status bad_field;
  auto integer = [&](const nlohmann::json& j, const char* field) -> int {
    int64_t v = 0;
    Status s = JsonInteger(j, field, std::numeric_limits<int>::min(),
                           std::numeric_limits<int>::max(), "bad collection descriptor", &v);
    if (!s.ok() && bad_field.ok()) bad_field = s;
    return int(v);
  };
  try {
    auto j = nlohmann::json::parse(text);
    spec->name = j.at("name").get<std::string>();
    if (!ParseKind(j.at("kind").get<std::string>(), &spec->kind)) {
      return Status::Corruption("unknown kind in collection descriptor");
    }
    spec->dim = integer(j, "dim");
    spec->components = integer(j, "components");
    spec->code_k = integer(j, "code_k");
    spec->index_factory = j.at("index_factory").get<std::string>();
    // A number beyond float's range would become inf, which the spec
    // cannot print back (found by fuzzing).
    for (const char* field : {"match_a", "match_b"}) {
      const nlohmann::json& v = j.at(field);
      if (!v.is_number() || !(std::fabs(v.get<double>()) <= std::numeric_limits<float>::max())) {
        return Status::Corruption(std::string("bad collection descriptor: ") + field +
                                  " must be a finite float, got " + v.dump());
      }
    }
    spec->match_a = j.at("match_a").get<float>();
    spec->match_b = j.at("match_b").get<float>();
    spec->samples = integer(j, "samples");
    if (!j.at("seed").is_number_unsigned()) {
      return Status::Corruption("bad collection descriptor: seed must be an integer >= 0, got " +
                                j.at("seed").dump());
    }
    spec->seed = j.at("seed").get<uint64_t>();
    spec->metadata = j.contains("metadata") ? j.at("metadata").get<std::string>() : "";
    spec->row_format = RowFormat::kFloat32;
    if (j.contains("row_format") &&
        !ParseRowFormat(j.at("row_format").get<std::string>(), &spec->row_format)) {
      return Status::Corruption("bad collection descriptor: unknown row_format " +
                                j.at("row_format").dump());
    }
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("bad collection descriptor: ") + e.what());
  }
  return bad_field;
}

std::string RecordStore::RecordKey(uint32_t collection_id, int64_t id) {
  std::string k = CollectionPrefix(collection_id);
  // Flip the sign bit so that signed ids sort in numeric order.
  uint64_t u = uint64_t(id) ^ (uint64_t(1) << 63);
  for (int i = 0; i < 8; ++i) k.push_back(char((u >> (56 - 8 * i)) & 0xFF));
  return k;
}

// The collection id of a record or payload key (its first 4 bytes).
static uint32_t CollectionOfKey(std::string_view key) {
  uint32_t c = 0;
  for (int i = 0; i < 4; ++i) c = (c << 8) | uint8_t(key[i]);
  return c;
}

static int64_t IdFromKey(std::string_view key) {
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = (u << 8) | uint8_t(key[4 + i]);
  return int64_t(u ^ (uint64_t(1) << 63));
}

std::string RecordStore::EncodeRecord(uint64_t sequence, const RecordWrite& w, size_t row_bytes) {
  std::string v;
  EncodeRecord(sequence, w, row_bytes, &v);
  return v;
}

void RecordStore::EncodeRecord(uint64_t sequence, const RecordWrite& w, size_t row_bytes,
                               std::string* out) {
  std::string& v = *out;
  v.clear();
  v.reserve(kRecordHeaderBytes + row_bytes + kCrcBytes);
  v.push_back(char(kRecordFormatVersion));
  v.push_back(char(w.has_label ? 1 : 0));
  v.append(2, '\0');
  PutFixed<uint64_t>(&v, sequence);
  int64_t label = w.has_label ? w.label : 0;
  PutFixed<int64_t>(&v, label);
  uint32_t n = uint32_t(row_bytes);
  PutFixed<uint32_t>(&v, n);
  // The row's floats are stored in the host's order (little-endian on every
  // supported platform: x86-64, AArch64).
  v.append(static_cast<const char*>(w.row), row_bytes);
  uint32_t crc = Crc32c(v.data(), v.size());
  PutFixed<uint32_t>(&v, crc);
}

Status RecordStore::DecodeRecord(std::string_view key, std::string_view value, size_t row_bytes,
                                 StoredRecord* r) {
  int64_t id = key.size() == 12 ? IdFromKey(key) : 0;
  const std::string where = "record of item " + std::to_string(id);
  if (key.size() != 12) return Status::Corruption("record key of bad length");
  if (value.size() < kRecordHeaderBytes + kCrcBytes) {
    return Status::Corruption(where + " is truncated");
  }
  uint32_t stored_crc = GetFixed<uint32_t>(value.data() + value.size() - 4);
  if (Crc32c(value.data(), value.size() - 4) != stored_crc) {
    return Status::Corruption(where + " fails its checksum");
  }
  if (uint8_t(value[0]) != kRecordFormatVersion) {
    return Status::Corruption(where + " has unknown format version " +
                              std::to_string(uint8_t(value[0])));
  }
  uint32_t n = GetFixed<uint32_t>(value.data() + 20);
  if (n != row_bytes || value.size() != kRecordHeaderBytes + n + kCrcBytes) {
    return Status::Corruption(where + " has " + std::to_string(n) + " row bytes, expected " +
                              std::to_string(row_bytes));
  }
  r->id = id;
  r->has_label = (uint8_t(value[1]) & 1) != 0;
  r->sequence = GetFixed<uint64_t>(value.data() + 4);
  r->label = GetFixed<int64_t>(value.data() + 12);
  r->row.assign(value.data() + kRecordHeaderBytes, n);
  return Status::OK();
}

namespace {

// The column families of a store, in handle order.
std::vector<rocksdb::ColumnFamilyDescriptor> StoreFamilies() {
  rocksdb::ColumnFamilyOptions cf_options;
  rocksdb::ColumnFamilyOptions records_options;
  // Float rows barely compress; skip the CPU cost.
  records_options.compression = rocksdb::kNoCompression;
  return {{rocksdb::kDefaultColumnFamilyName, cf_options},
          {"meta", cf_options},
          {"records", records_options},
          {"payload", cf_options}};
}

// A directory that holds files but no CURRENT is a damaged store, not an
// empty one: RocksDB's create_if_missing would start a new store over it and
// every old table would be lost, and any other open would fail with
// RocksDB's words for it. Every open says so, and names the way out.
Status CheckNotDamagedStore(const std::string& path, bool creating) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return Status::OK();
  if (std::filesystem::exists(path + "/CURRENT", ec)) return Status::OK();
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    (void)entry;
    return Status::Corruption(
        "record store " + path + " holds files but no CURRENT file: it is damaged" +
        (creating ? ", not empty; refusing to create a new store over it" : "") +
        " (run 'hedgedb repair', or hedgedb.repair from Python)");
  }
  return Status::OK();
}

// RocksDB's lock error (a second writer) in words that name the database and
// the way out. RocksDB holds an fcntl lock on <store>/LOCK: F_GETLK names the
// process that holds it.
Status LockedError(const rocksdb::Status& s, const std::string& store_path) {
  const std::string database = std::filesystem::path(store_path).parent_path().string();
  const std::string way_out =
      ": one process at a time opens a database for writing; open it read-only to search it "
      "beside the writer";
  if (s.ToString().find("lock hold by current process") != std::string::npos) {
    return Status::IOError("database " + database + " is already open in this process (pid " +
                           std::to_string(::getpid()) + ")" + way_out);
  }
  const int64_t pid = RecordStore::WriterPid(store_path);
  const std::string holder = pid > 0 ? " (pid " + std::to_string(pid) + ")" : "";
  return Status::IOError("database " + database + " is locked by another process" + holder +
                         way_out);
}

bool IsLockError(const rocksdb::Status& s) {
  const std::string text = s.ToString();
  return s.IsIOError() && (text.find("/LOCK:") != std::string::npos ||
                           text.find("lock hold by current process") != std::string::npos);
}

// What RocksDB's GetDbIdentity gives, read from the IDENTITY file where it
// gives nothing (a secondary instance in RocksDB 7.8).
Status ReadIdentity(rocksdb::DB* db, const std::string& path, std::string* identity) {
  HEDGEDB_RETURN_IF_ERROR(FromRocks(db->GetDbIdentity(*identity), "reading the store identity"));
  if (!identity->empty()) return Status::OK();
  HEDGEDB_RETURN_IF_ERROR(ReadWholeFile(path + "/IDENTITY", identity, 1 << 16));
  while (!identity->empty() && (identity->back() == '\n' || identity->back() == '\r')) {
    identity->pop_back();
  }
  if (identity->empty()) return Status::Corruption("record store " + path + " has no identity");
  return Status::OK();
}

}  // namespace

// RocksDB 7.8 resumes by itself after a retryable write error (disk full)
// once space is back, but if every memtable was empty it keeps writing to the
// WAL file whose write failed, and the next write aborts the process on an
// assertion (fixed upstream in RocksDB 9.1, "Don't write to WAL after
// previous WAL write error"). No automatic resume, then: the store refuses
// writes after a failure until it is reopened (RecordStore::Write).
class NoAutomaticResume : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status error,
                            bool* auto_recovery) override {
    error.PermitUncheckedError();
    *auto_recovery = false;
  }
};

// A read-only open must leave the directory as it was; RocksDB would
// otherwise start a new info LOG file (and rotate the old one).
class NoLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

namespace {

// RocksDB's own info log (its LOG file) asserts, and so aborts the process,
// on the next line after a write to it failed (Debian's librocksdb 7.8 keeps
// assertions on): opening a store on a full disk died that way. This one
// writes the same file with plain write(2) and drops the lines that do not
// fit: a full disk costs log lines, never the process.
class StoreInfoLog : public rocksdb::Logger {
 public:
  // The previous LOG becomes LOG.old (one kept). nullptr if LOG cannot be
  // created (RocksDB then makes its own, or fails the open).
  static std::shared_ptr<rocksdb::Logger> Open(const std::string& dir, bool create_dir) {
    std::error_code ec;
    if (create_dir) std::filesystem::create_directories(dir, ec);
    const std::string path = dir + "/LOG";
    std::filesystem::rename(path, path + ".old", ec);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return nullptr;
    return std::make_shared<StoreInfoLog>(fd);
  }
  explicit StoreInfoLog(int fd) : Logger(rocksdb::InfoLogLevel::INFO_LEVEL), fd_(fd) {}
  ~StoreInfoLog() override { ::close(fd_); }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    const int n = std::vsnprintf(line, sizeof(line) - 1, format, ap);
    if (n < 0) return;
    size_t len = std::min(size_t(n), sizeof(line) - 2);
    if (len == 0 || line[len - 1] != '\n') line[len++] = '\n';
    const ssize_t written = ::write(fd_, line, len);
    (void)written;  // a line that does not fit is dropped
  }

 private:
  int fd_;
};

}  // namespace

Status RecordStore::Write(const rocksdb::WriteOptions& options, rocksdb::WriteBatch* batch,
                          const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(write_error_mutex_);
    if (!write_error_.empty()) {
      return Status::IOError(what + ": the record store failed a write earlier (" + write_error_ +
                             "); nothing was written since. Close and reopen the database once "
                             "the cause (for example a full disk) is fixed");
    }
  }
  Status s = FromRocks(db_->Write(options, batch), what);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(write_error_mutex_);
    if (write_error_.empty()) write_error_ = s.ToString();
  }
  return s;
}

// A copy of the directory tree `from` in `to` (which must not exist): files
// hard-linked where possible, copied otherwise; RocksDB's LOCK file left out.
Status LinkOrCopyTree(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) return Status::IOError("cannot create " + to + ": " + ec.message());
  for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string target = to + "/" + name;
    std::error_code e;
    if (it->is_directory(e)) {
      HEDGEDB_RETURN_IF_ERROR(LinkOrCopyTree(it->path().string(), target));
      continue;
    }
    if (name == "LOCK") continue;
    // Table files are never changed once written: a link is a copy. Logs
    // and the MANIFEST are copied (RocksDB's repair reads them; a link
    // would do too, but a copy keeps the original's bytes whatever happens).
    const bool table = it->path().extension() == ".sst";
    if (table) fs::create_hard_link(it->path(), target, e);
    if (!table || e) {
      e.clear();
      fs::copy_file(it->path(), target, e);
    }
    if (e) return Status::IOError("cannot copy " + it->path().string() + ": " + e.message());
  }
  if (ec) return Status::IOError("cannot list " + from + ": " + ec.message());
  return Status::OK();
}

// The newest MANIFEST-<n> file of a store directory, or "".
std::string NewestManifest(const std::string& path) {
  std::string newest;
  uint64_t newest_number = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("MANIFEST-", 0) != 0) continue;
    const uint64_t number = std::strtoull(name.c_str() + 9, nullptr, 10);
    if (newest.empty() || number > newest_number) {
      newest = name;
      newest_number = number;
    }
  }
  return newest;
}

int64_t RecordStore::WriterPid(const std::string& path) {
  int64_t pid = 0;
  const int fd = ::open((path + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(fd, F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK && lock.l_pid > 0) {
      pid = lock.l_pid;
    }
    ::close(fd);
  }
  return pid;
}

Status RecordStore::Repair(const std::string& path) {
  // A lost CURRENT file only names the newest MANIFEST: restoring it loses
  // nothing, where RocksDB's repair rewrites the store from its tables and
  // logs.
  std::error_code ec;
  const std::string manifest = NewestManifest(path);
  if (!std::filesystem::exists(path + "/CURRENT", ec) && !manifest.empty()) {
    HEDGEDB_RETURN_IF_ERROR(WriteFileAtomically(path + "/CURRENT", {manifest + "\n"}));
    StoreOptions check;
    check.create_if_missing = false;
    std::unique_ptr<RecordStore> store;
    if (Open(check, path, &store).ok()) return Status::OK();
    std::filesystem::remove(path + "/CURRENT", ec);  // that manifest is no good either
  }
  // RocksDB 7.8's repair is not safe to interrupt: it writes each log into a
  // new table before it moves the log to lost/, so a repair killed in
  // between and run again makes a second table with the same keys and
  // sequence numbers, and every later read of them aborts the process (an
  // assertion in DBIter; found by bench/crash_harness.cc). So it repairs a
  // copy (table files hard-linked: RocksDB never changes one), marks the
  // copy finished, and swaps it in; the store itself is untouched until
  // then, and an interrupted swap is finished by the next repair.
  namespace fs = std::filesystem;
  const std::string fresh = path + ".repair-new", old = path + ".repair-old";
  const std::string done_marker = "/REPAIRED";
  if (fs::exists(path, ec)) {
    fs::remove_all(old, ec);  // the store is whole: the old copy is not needed
    fs::remove(path + done_marker, ec);
  }
  if (!fs::exists(fresh + done_marker, ec)) {
    fs::remove_all(fresh, ec);
    if (!fs::exists(path, ec)) return Status::NotFound("no record store at " + path);
    HEDGEDB_RETURN_IF_ERROR(LinkOrCopyTree(path, fresh));
    rocksdb::DBOptions db_options;
    db_options.create_if_missing = false;
    HEDGEDB_RETURN_IF_ERROR(FromRocks(rocksdb::RepairDB(fresh, db_options, StoreFamilies()),
                                      "repairing record store " + path));
    HEDGEDB_RETURN_IF_ERROR(WriteFileAtomically(fresh + done_marker, {"repaired\n"}));
  }
  if (fs::exists(path, ec)) {
    fs::rename(path, old, ec);
    if (ec) return Status::IOError("cannot move " + path + " aside: " + ec.message());
  }
  fs::rename(fresh, path, ec);
  if (ec)
    return Status::IOError("cannot move the repaired " + fresh + " to " + path + ": " +
                           ec.message());
  HEDGEDB_RETURN_IF_ERROR(SyncDirectory(fs::path(path).parent_path().string()));
  fs::remove(path + done_marker, ec);
  fs::remove_all(old, ec);
  return Status::OK();
}

Status RecordStore::Open(const StoreOptions& options, const std::string& path,
                         std::unique_ptr<RecordStore>* out) {
  HEDGEDB_RETURN_IF_ERROR(CheckNotDamagedStore(path, options.create_if_missing));
  rocksdb::Options db_options;
  db_options.listeners.push_back(std::make_shared<NoAutomaticResume>());
  if (options.env) db_options.env = options.env;
  db_options.create_if_missing = options.create_if_missing;
  db_options.error_if_exists = options.error_if_exists;
  db_options.create_missing_column_families = true;
  // Replay the write-ahead log up to its first damaged or torn record and
  // drop the rest: the store opens as a consistent prefix of its batches.
  // kAbsoluteConsistency would refuse to open after any torn tail (also the
  // harmless one of an unacknowledged write cut by a power loss), and
  // kTolerateCorruptedTailRecords would still refuse on damage in the middle;
  // either leaves every collection unusable. What the prefix lost is
  // reported by the collections (index files record the sequence they
  // covered; docs/formats.md "Atomicity and durability").
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = StoreFamilies();
  std::unique_ptr<RecordStore> store(new RecordStore());
  store->sync_ = options.sync;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  const bool read_only = options.read_only || options.follow;
  if (read_only) {
    // Nothing may be written, not even RocksDB's info log.
    db_options.create_if_missing = false;
    db_options.create_missing_column_families = false;
    db_options.info_log = std::make_shared<NoLogger>();
  }
  if (options.follow) {
    // A secondary instance keeps every table file open, so that one the
    // writer deletes after a compaction stays readable until CatchUp. Its
    // scratch directory would only hold the info log, which is discarded:
    // the path is never created. CatchUp opens it (a steady view).
    db_options.max_open_files = -1;
    std::error_code ec;
    std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    store->scratch_ = (tmp / ("hedgedb-reader-" + std::to_string(::getpid()))).string();
    store->follow_options_ = std::make_unique<rocksdb::Options>(db_options);
    store->follow_ = true;
    store->path_ = path;
    if (!std::filesystem::exists(path + "/CURRENT", ec)) {
      return Status::NotFound("cannot open record store " + path + ": no CURRENT file");
    }
    HEDGEDB_RETURN_IF_ERROR(store->CatchUp());
    HEDGEDB_RETURN_IF_ERROR(ReadIdentity(store->db_.get(), path, &store->identity_));
    *out = std::move(store);
    return Status::OK();
  } else if (options.read_only) {
    s = rocksdb::DB::OpenForReadOnly(db_options, path, families, &store->handles_, &raw);
  } else {
    db_options.info_log = StoreInfoLog::Open(path, options.create_if_missing);
    s = rocksdb::DB::Open(db_options, path, families, &store->handles_, &raw);
  }
  if (IsLockError(s)) return LockedError(s, path);
  if (!s.ok()) return FromRocks(s, "cannot open record store " + path);
  store->db_.reset(raw);
  store->follow_ = options.follow;
  store->path_ = path;
  HEDGEDB_RETURN_IF_ERROR(ReadIdentity(store->db_.get(), path, &store->identity_));
  store->meta_cf_ = store->handles_[1];
  store->records_cf_ = store->handles_[2];
  store->payload_cf_ = store->handles_[3];
  if (!read_only) HEDGEDB_RETURN_IF_ERROR(store->EnsureFamilyTables());
  *out = std::move(store);
  return Status::OK();
}

// RocksDB's repair learns a column family's id from the tables that hold it;
// the log entries of a family that has no table yet are dropped. One marker
// key per family, flushed once when the store is new, gives every family a
// table. The marker uses collection id 0, which no collection has.
Status RecordStore::EnsureFamilyTables() {
  const std::string marker = RecordKey(0, 0);
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), records_cf_, marker, &value);
  if (s.ok()) return Status::OK();
  if (!s.IsNotFound()) return FromRocks(s, "reading the store marker");
  rocksdb::WriteBatch batch;
  for (rocksdb::ColumnFamilyHandle* family : handles_) {
    HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Put(family, marker, "hedgedb"), "batching"));
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  HEDGEDB_RETURN_IF_ERROR(Write(wo, &batch, "writing the store marker"));
  return FromRocks(db_->Flush(rocksdb::FlushOptions(), handles_), "flushing the store marker");
}

RecordStore::~RecordStore() {
  if (db_) {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
  }
}

Status RecordStore::LoadCatalog(std::vector<CollectionMeta>* collections,
                                std::vector<DamagedDescriptor>* damaged,
                                const rocksdb::Snapshot* snapshot) {
  collections->clear();
  if (damaged) damaged->clear();
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, meta_cf_));
  for (it->Seek("c/"); it->Valid() && it->key().starts_with("c/"); it->Next()) {
    CollectionMeta meta;
    const std::string name = it->key().ToString().substr(2);
    Status s;
    try {
      auto j = nlohmann::json::parse(it->value().ToString());
      s = SpecFromJson(j.at("spec").dump(), &meta.spec);
      if (s.ok()) {
        meta.id = j.at("id").get<uint32_t>();
        meta.sequence = j.at("sequence").get<uint64_t>();
        meta.max_id = j.at("max_id").get<int64_t>();
        if (j.contains("created_match")) {
          const nlohmann::json& c = j.at("created_match");
          if (!c.is_array() || c.size() != 2 || !c[0].is_number() || !c[1].is_number() ||
              !(std::fabs(c[0].get<double>()) <= std::numeric_limits<float>::max()) ||
              !(std::fabs(c[1].get<double>()) <= std::numeric_limits<float>::max())) {
            s = Status::Corruption("descriptor of collection '" + name +
                                   "': created_match must be two finite floats, got " + c.dump());
          } else {
            meta.refitted = true;
            meta.created_match_a = c[0].get<float>();
            meta.created_match_b = c[1].get<float>();
          }
        }
        if (!s.ok()) {
          // reported below
        } else if (j.at("crc").get<uint32_t>() !=
                   Crc32c(j.at("spec").dump().data(), j.at("spec").dump().size())) {
          s = Status::Corruption("descriptor of collection '" + name + "' fails its checksum");
        } else if (meta.spec.name != name) {
          s = Status::Corruption("descriptor of collection '" + name + "' names '" +
                                 meta.spec.name + "'");
        }
      }
    } catch (const std::exception& e) {
      s = Status::Corruption("bad descriptor of collection '" + name + "': " + e.what());
    }
    if (s.ok()) {
      collections->push_back(meta);
    } else if (damaged) {
      damaged->push_back({name, s});
    } else {
      return s;
    }
  }
  return FromRocks(it->status(), "reading the catalog");
}

Status RecordStore::DropDamagedDescriptor(const std::string& name) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::WriteBatch batch;
  HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Delete(meta_cf_, MetaKey(name)), "batching"));
  return Write(wo, &batch, "dropping collection " + name);
}

Status RecordStore::PutMeta(const CollectionMeta& meta, void* batch_ptr) {
  auto* batch = static_cast<rocksdb::WriteBatch*>(batch_ptr);
  auto spec = nlohmann::json::parse(SpecToJson(meta.spec));
  std::string spec_text = spec.dump();
  nlohmann::json j = {{"spec", spec},
                      {"id", meta.id},
                      {"sequence", meta.sequence},
                      {"max_id", meta.max_id},
                      {"crc", Crc32c(spec_text.data(), spec_text.size())}};
  if (meta.refitted) j["created_match"] = {meta.created_match_a, meta.created_match_b};
  return FromRocks(batch->Put(meta_cf_, MetaKey(meta.spec.name), j.dump()), "writing descriptor");
}

Status RecordStore::NextCollectionId(uint32_t* id) {
  std::string next;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_cf_, kNextCollectionIdKey, &next);
  if (s.IsNotFound()) {
    *id = 1;
    return Status::OK();
  }
  if (!s.ok()) return FromRocks(s, "reading the catalog");
  char* end = nullptr;
  const unsigned long long value = std::strtoull(next.c_str(), &end, 10);
  if (next.empty() || *end != '\0' || value == 0 || value > 0xFFFFFFFFull) {
    return Status::Corruption("the catalog's next collection id is damaged: '" + next + "'");
  }
  *id = uint32_t(value);
  return Status::OK();
}

Status RecordStore::CreateCollection(CollectionMeta* meta) {
  uint32_t id = 0;
  HEDGEDB_RETURN_IF_ERROR(NextCollectionId(&id));
  meta->id = id;
  rocksdb::WriteBatch batch;
  HEDGEDB_RETURN_IF_ERROR(FromRocks(
      batch.Put(meta_cf_, kNextCollectionIdKey, std::to_string(id + 1)), "writing the catalog"));
  HEDGEDB_RETURN_IF_ERROR(PutMeta(*meta, &batch));
  rocksdb::WriteOptions wo;
  wo.sync = true;  // catalog changes are rare: always make them durable
  return Write(wo, &batch, "creating collection " + meta->spec.name);
}

Status RecordStore::DropCollection(const CollectionMeta& meta) {
  rocksdb::WriteBatch batch;
  std::string begin = CollectionPrefix(meta.id);
  std::string end = CollectionPrefix(meta.id + 1);
  HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.DeleteRange(records_cf_, begin, end), "dropping"));
  HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.DeleteRange(payload_cf_, begin, end), "dropping"));
  HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Delete(meta_cf_, MetaKey(meta.spec.name)), "dropping"));
  HEDGEDB_RETURN_IF_ERROR(FromRocks(
      batch.DeleteRange(meta_cf_, TokenKey(meta.id, ""), TokenKey(meta.id + 1, "")), "dropping"));
  HEDGEDB_RETURN_IF_ERROR(FromRocks(
      batch.DeleteRange(meta_cf_, CalibrationKey(meta.id, 0), CalibrationKey(meta.id + 1, 0)),
      "dropping"));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return Write(wo, &batch, "dropping collection " + meta.spec.name);
}

Status RecordStore::Commit(const CollectionMeta& meta, const std::vector<RecordWrite>& puts,
                           const std::vector<int64_t>& deletes, const BatchToken* token) {
  const size_t row_bytes = ItemRowBytes(meta.spec);
  // The batch's size, about (tag, family, lengths, key, value per put), so
  // that it is allocated once.
  constexpr size_t kPerPut = 32;
  size_t reserve = 1024 + deletes.size() * 2 * kPerPut;
  for (const RecordWrite& w : puts) {
    reserve += kPerPut + kRecordHeaderBytes + row_bytes + kCrcBytes;
    if (w.payload) reserve += kPerPut + 1 + w.payload->size() + kCrcBytes;
  }
  rocksdb::WriteBatch batch(reserve);
  if (token) {
    nlohmann::json j = {{"sequence", token->sequence},
                        {"count", token->count},
                        {"first_id", token->first_id},
                        {"explicit_ids", token->explicit_ids},
                        {"content_crc", token->content_crc}};
    HEDGEDB_RETURN_IF_ERROR(
        FromRocks(batch.Put(meta_cf_, TokenKey(meta.id, token->token), j.dump()), "batching"));
  }
  for (int64_t id : deletes) {
    std::string key = RecordKey(meta.id, id);
    HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Delete(records_cf_, key), "batching"));
    HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Delete(payload_cf_, key), "batching"));
  }
  std::string value;  // one buffer for every record
  for (const RecordWrite& w : puts) {
    std::string key = RecordKey(meta.id, w.id);
    EncodeRecord(meta.sequence, w, row_bytes, &value);
    HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Put(records_cf_, key, value), "batching"));
    if (w.payload) {
      HEDGEDB_RETURN_IF_ERROR(
          FromRocks(batch.Put(payload_cf_, key, EncodePayload(*w.payload)), "batching"));
    }
  }
  HEDGEDB_RETURN_IF_ERROR(PutMeta(meta, &batch));
  rocksdb::WriteOptions wo;
  wo.sync = sync_;
  return Write(wo, &batch, "writing to collection " + meta.spec.name);
}

Status RecordStore::GetBatchToken(const CollectionMeta& meta, const std::string& token,
                                  BatchToken* out, bool* found) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_cf_, TokenKey(meta.id, token), &value);
  *found = false;
  if (s.IsNotFound()) return Status::OK();
  HEDGEDB_RETURN_IF_ERROR(FromRocks(s, "reading batch token"));
  try {
    auto j = nlohmann::json::parse(value);
    out->token = token;
    out->sequence = j.at("sequence").get<uint64_t>();
    out->count = j.at("count").get<int64_t>();
    out->first_id = j.at("first_id").get<int64_t>();
    out->explicit_ids = j.at("explicit_ids").get<bool>();
    out->content_crc = j.at("content_crc").get<uint32_t>();
  } catch (const std::exception& e) {
    return Status::Corruption("batch token record of collection '" + meta.spec.name +
                              "' is damaged: " + e.what());
  }
  *found = true;
  return Status::OK();
}

Status RecordStore::PutCalibration(const CollectionMeta& meta, uint8_t score_type,
                                   const std::string& bytes) {
  rocksdb::WriteBatch batch;
  HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Put(meta_cf_, CalibrationKey(meta.id, score_type), bytes),
                                    "batching calibration"));
  rocksdb::WriteOptions wo;
  wo.sync = true;  // rare, and a user acts on it: always durable
  return Write(wo, &batch, "storing the calibration of collection " + meta.spec.name);
}

Status RecordStore::DeleteCalibration(const CollectionMeta& meta, uint8_t score_type) {
  rocksdb::WriteBatch batch;
  HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Delete(meta_cf_, CalibrationKey(meta.id, score_type)),
                                    "batching calibration"));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return Write(wo, &batch, "removing the calibration of collection " + meta.spec.name);
}

Status RecordStore::ReplaceSpecAndCalibration(const CollectionMeta& meta, uint8_t score_type,
                                              const std::string& bytes) {
  rocksdb::WriteBatch batch;
  HEDGEDB_RETURN_IF_ERROR(PutMeta(meta, &batch));
  HEDGEDB_RETURN_IF_ERROR(FromRocks(
      batch.DeleteRange(meta_cf_, CalibrationKey(meta.id, 0), CalibrationKey(meta.id + 1, 0)),
      "batching calibration"));
  HEDGEDB_RETURN_IF_ERROR(FromRocks(batch.Put(meta_cf_, CalibrationKey(meta.id, score_type), bytes),
                                    "batching calibration"));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return Write(wo, &batch,
               "storing the match parameters and calibration of collection " + meta.spec.name);
}

Status RecordStore::LoadCalibrations(const CollectionMeta& meta,
                                     std::vector<std::pair<uint8_t, std::string>>* maps,
                                     const rocksdb::Snapshot* snapshot) {
  maps->clear();
  const std::string begin = CalibrationKey(meta.id, 0);
  const std::string end = CalibrationKey(meta.id + 1, 0);
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::Slice upper(end);
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, meta_cf_));
  for (it->Seek(begin); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    if (key.size() != begin.size()) {
      return Status::Corruption("calibration key of collection '" + meta.spec.name +
                                "' has a bad length");
    }
    maps->emplace_back(uint8_t(key[key.size() - 1]), it->value().ToString());
  }
  return FromRocks(it->status(), "reading the calibrations of collection " + meta.spec.name);
}

// A full sequential pass over one collection's keys (below `upper`): read
// ahead, and do not flush the block cache with blocks read once.
static rocksdb::ReadOptions CollectionScanOptions(const rocksdb::Slice* upper,
                                                  const rocksdb::Snapshot* snapshot) {
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = upper;
  ro.snapshot = snapshot;
  ro.readahead_size = 4 << 20;
  ro.fill_cache = false;
  return ro;
}

Status RecordStore::Scan(const CollectionMeta& meta,
                         const std::function<Status(const StoredRecord&)>& visit) {
  return ScanSince(meta, 0, nullptr, visit);  // every record's sequence is at least 1
}

Status RecordStore::ScanSince(const CollectionMeta& meta, uint64_t sequence,
                              const std::function<void(int64_t id)>& visit_id,
                              const std::function<Status(const StoredRecord&)>& visit_newer) {
  const size_t row_bytes = ItemRowBytes(meta.spec);
  std::string begin = CollectionPrefix(meta.id);
  std::string end = CollectionPrefix(meta.id + 1);
  const rocksdb::Slice upper(end);
  const rocksdb::ReadOptions ro = CollectionScanOptions(&upper, nullptr);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, records_cf_));
  StoredRecord record;
  for (it->Seek(begin); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    const std::string_view value(it->value().data(), it->value().size());
    if (visit_id && key.size() == 12) visit_id(IdFromKey(key));
    // The header's sequence, unchecked, only decides what to skip: a record
    // of an older batch was checked when the reader loaded it.
    if (sequence > 0 && value.size() >= kRecordHeaderBytes &&
        GetFixed<uint64_t>(value.data() + 4) <= sequence) {
      continue;
    }
    HEDGEDB_RETURN_IF_ERROR(DecodeRecord(key, value, row_bytes, &record));
    HEDGEDB_RETURN_IF_ERROR(visit_newer(record));
  }
  return FromRocks(it->status(), "scanning collection " + meta.spec.name);
}

Status RecordStore::ScanPayloads(
    const CollectionMeta& meta, const rocksdb::Snapshot* snapshot,
    const std::function<Status(int64_t id, const std::string& payload)>& visit) {
  const std::string begin = CollectionPrefix(meta.id);
  const std::string end = CollectionPrefix(meta.id + 1);
  const rocksdb::Slice upper(end);
  const rocksdb::ReadOptions ro = CollectionScanOptions(&upper, snapshot);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, payload_cf_));
  std::string payload;
  for (it->Seek(begin); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (key.size() != 12) return Status::Corruption("payload key of unexpected length");
    const int64_t id = IdFromKey(key);
    HEDGEDB_RETURN_IF_ERROR(DecodePayload(it->value().ToString(), id, &payload));
    HEDGEDB_RETURN_IF_ERROR(visit(id, payload));
  }
  return FromRocks(it->status(), "scanning the payloads of collection " + meta.spec.name);
}

Status RecordStore::FlushMemtables(uint64_t min_bytes) {
  uint64_t bytes = 0;
  if (!db_->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &bytes) ||
      bytes < min_bytes) {
    return Status::OK();
  }
  rocksdb::FlushOptions options;
  options.wait = true;
  return FromRocks(db_->Flush(options, handles_), "flushing the memtables");
}

namespace {

// The writer's MANIFEST as a catch-up would read it: the file CURRENT names
// and its length ("" if CURRENT cannot be read, as while it is replaced).
std::string ManifestState(const std::string& path) {
  std::string current;
  if (!ReadWholeFile(path + "/CURRENT", &current, 4096).ok()) return "";
  while (!current.empty() && (current.back() == '\n' || current.back() == '\r')) {
    current.pop_back();
  }
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path + "/" + current, ec);
  if (current.empty() || ec) return "";
  return current + ":" + std::to_string(size);
}

}  // namespace

Status RecordStore::OpenFollower() {
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::OpenAsSecondary(*follow_options_, path_, scratch_,
                                                         StoreFamilies(), &handles, &raw);
  if (!s.ok()) return FromRocks(s, "cannot open record store " + path_);
  // The old instance goes only once the new one is open: a failed reopen
  // leaves the view as it was.
  std::unique_ptr<rocksdb::DB> old(raw);
  old.swap(db_);
  std::swap(handles, handles_);
  meta_cf_ = handles_[1];
  records_cf_ = handles_[2];
  payload_cf_ = handles_[3];
  if (old) {
    for (auto* h : handles) old->DestroyColumnFamilyHandle(h);
    old->Close();
  }
  return Status::OK();
}

Status RecordStore::CatchUp() {
  if (!follow_) return Status::OK();
  Status last;
  for (int attempt = 0; attempt < kCatchUpAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5 * attempt));
    const std::string before = ManifestState(path_);
    if (before.empty()) {
      last = Status::IOError("cannot read the writer's CURRENT file in " + path_);
      continue;
    }
    // The same MANIFEST as at the last catch-up: no log was written into a
    // table since, so the instance's memtables (the logs it read) hold no
    // value that a table now supersedes, and reading the logs' new records
    // is enough. Otherwise a fresh instance: RocksDB 7.8's secondary keeps
    // the memtables of a log that the writer has since written into a table,
    // and a point read (Get) looks there first, so it returned a payload
    // that a later upsert had replaced (tests/python/test_readers.py).
    last = before == synced_manifest_ ? FromRocks(db_->TryCatchUpWithPrimary(),
                                                  "catching up with the writer's record store")
                                      : OpenFollower();
    if (!last.ok()) {
      synced_manifest_.clear();
      continue;
    }
    if (before == ManifestState(path_)) {
      synced_manifest_ = before;
      return Status::OK();
    }
    synced_manifest_.clear();  // changed meanwhile: open afresh
  }
  if (!last.ok()) return last;
  return Status::IOError("catching up with the writer's record store " + path_ +
                         ": the writer changed its MANIFEST during each of " +
                         std::to_string(kCatchUpAttempts) +
                         " attempts (it was writing its log into table files), so the view "
                         "might lack acknowledged batches; try again");
}

Status RecordStore::CopyView(const std::string& dir, std::string* identity,
                             std::map<uint32_t, int64_t>* records) {
  records->clear();
  StoreOptions so;
  so.create_if_missing = true;
  so.error_if_exists = true;
  std::unique_ptr<RecordStore> copy;
  HEDGEDB_RETURN_IF_ERROR(Open(so, dir, &copy));
  // Written without a log, then flushed: the copy's files are complete once
  // the flush returns, and a failure leaves a copy the caller deletes.
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  constexpr size_t kBatchBytes = size_t(8) << 20;
  for (size_t f = 0; f < handles_.size(); ++f) {
    rocksdb::ReadOptions ro;
    ro.readahead_size = 4 << 20;
    ro.fill_cache = false;
    ro.verify_checksums = true;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[f]));
    rocksdb::WriteBatch batch;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      HEDGEDB_RETURN_IF_ERROR(
          FromRocks(batch.Put(copy->handles_[f], it->key(), it->value()), "batching the copy"));
      if (handles_[f] == records_cf_ && it->key().size() == 12) {
        const uint32_t id = CollectionOfKey(std::string_view(it->key().data(), 4));
        if (id != 0) ++(*records)[id];  // 0: the family's marker
      }
      if (batch.GetDataSize() >= kBatchBytes) {
        HEDGEDB_RETURN_IF_ERROR(copy->Write(wo, &batch, "writing the copy " + dir));
        batch.Clear();
      }
    }
    HEDGEDB_RETURN_IF_ERROR(FromRocks(it->status(), "reading the store for a copy"));
    HEDGEDB_RETURN_IF_ERROR(copy->Write(wo, &batch, "writing the copy " + dir));
  }
  rocksdb::FlushOptions fo;
  fo.wait = true;
  HEDGEDB_RETURN_IF_ERROR(
      FromRocks(copy->db_->Flush(fo, copy->handles_), "flushing the copy " + dir));
  *identity = copy->identity();
  return Status::OK();
}

Status RecordStore::ScanChecked(
    const CollectionMeta& meta, const rocksdb::Snapshot* snapshot,
    const std::function<void(int64_t, const Status&, const StoredRecord&)>& visit_record,
    const std::function<void(int64_t, const Status&)>& visit_payload) {
  const size_t row_bytes = ItemRowBytes(meta.spec);
  const std::string begin = CollectionPrefix(meta.id);
  const std::string end = CollectionPrefix(meta.id + 1);
  const rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro = CollectionScanOptions(&upper, snapshot);
  ro.verify_checksums = true;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, records_cf_));
    StoredRecord record;
    for (it->Seek(begin); it->Valid(); it->Next()) {
      const std::string_view key(it->key().data(), it->key().size());
      const int64_t id = key.size() == 12 ? IdFromKey(key) : 0;
      const Status s = DecodeRecord(key, std::string_view(it->value().data(), it->value().size()),
                                    row_bytes, &record);
      visit_record(id, s, record);
    }
    HEDGEDB_RETURN_IF_ERROR(FromRocks(it->status(), "scanning collection " + meta.spec.name));
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, payload_cf_));
  std::string payload;
  for (it->Seek(begin); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    const int64_t id = key.size() == 12 ? IdFromKey(key) : 0;
    visit_payload(id, DecodePayload(it->value().ToString(), id, &payload));
  }
  return FromRocks(it->status(), "scanning the payloads of collection " + meta.spec.name);
}

Status RecordStore::ReadSetAsideTable(const std::string& file, SetAsideTable* out) {
  *out = SetAsideTable();
  rocksdb::Options options;
  options.info_log = std::make_shared<NoLogger>();
  rocksdb::SstFileReader reader(options);
  if (!reader.Open(file).ok()) {
    out->gap_last_collection = std::numeric_limits<uint32_t>::max();
    return Status::OK();  // nothing of it can be read
  }
  out->opened = true;
  const auto properties = reader.GetTableProperties();
  if (properties) out->family = properties->column_family_name;
  rocksdb::ColumnFamilyHandle* family = nullptr;
  if (out->family == "records") family = records_cf_;
  if (out->family == "payload") family = payload_cf_;
  if (out->family == "meta") family = meta_cf_;
  if (out->family == rocksdb::kDefaultColumnFamilyName) family = handles_[0];
  const bool items = family == records_cf_ || family == payload_cf_;
  auto look_up = [&](const rocksdb::Slice& key) {
    ++out->keys_read;
    std::string value;
    const rocksdb::Status s = family ? db_->Get(rocksdb::ReadOptions(), family, key, &value)
                                     : rocksdb::Status::NotFound();
    if (!s.IsNotFound()) return;
    if (items && key.size() == 12) {
      const std::string_view k(key.data(), key.size());
      if (CollectionOfKey(k) != 0) out->missing_items[CollectionOfKey(k)].push_back(IdFromKey(k));
    } else {
      ++out->missing_other;
    }
  };
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(reader.NewIterator(ro));
  std::string last_forward;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    look_up(it->key());
    last_forward = it->key().ToString();
  }
  if (it->status().ok()) {
    out->whole = true;
    return Status::OK();
  }
  std::string first_backward;
  it.reset(reader.NewIterator(ro));
  for (it->SeekToLast(); it->Valid() && it->key().ToString() > last_forward; it->Prev()) {
    look_up(it->key());
    first_backward = it->key().ToString();
  }
  out->gap_first_collection =
      (items && last_forward.size() >= 4) ? CollectionOfKey(last_forward) : 0;
  out->gap_last_collection = (items && first_backward.size() >= 4)
                                 ? CollectionOfKey(first_backward)
                                 : std::numeric_limits<uint32_t>::max();
  return Status::OK();
}

Status RecordStore::RestoreRecords(const CollectionMeta& meta,
                                   const std::vector<StoredRecord>& records) {
  const size_t row_bytes = ItemRowBytes(meta.spec);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::WriteBatch batch;
  std::string value;
  for (size_t i = 0; i < records.size(); ++i) {
    const StoredRecord& r = records[i];
    if (r.row.size() != row_bytes) {
      return Status::InvalidArgument("restoring item " + std::to_string(r.id) + ": bad row length");
    }
    RecordWrite w;
    w.id = r.id;
    w.has_label = r.has_label;
    w.label = r.label;
    w.row = r.row.data();
    EncodeRecord(r.sequence, w, row_bytes, &value);
    HEDGEDB_RETURN_IF_ERROR(
        FromRocks(batch.Put(records_cf_, RecordKey(meta.id, r.id), value), "batching"));
    if (batch.GetDataSize() >= (size_t(8) << 20) || i + 1 == records.size()) {
      HEDGEDB_RETURN_IF_ERROR(Write(wo, &batch, "restoring records of " + meta.spec.name));
      batch.Clear();
    }
  }
  return Status::OK();
}

Status RecordStore::VerifyFileChecksums() {
  return FromRocks(db_->VerifyChecksum(), "verifying the store's file checksums");
}

Status RecordStore::Checkpoint(const std::string& dir, std::string* identity) {
  rocksdb::Checkpoint* raw = nullptr;
  HEDGEDB_RETURN_IF_ERROR(
      FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "starting a checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  HEDGEDB_RETURN_IF_ERROR(
      FromRocks(checkpoint->CreateCheckpoint(dir), "writing a checkpoint to " + dir));
  // A copy is another store: it must not pass for this one (index bindings).
  *identity = db_->GetEnv()->GenerateUniqueId();
  return WriteFileAtomically(dir + "/IDENTITY", {*identity});
}

Status RecordStore::GetRecord(const CollectionMeta& meta, int64_t id, StoredRecord* record,
                              bool* found) {
  std::string key = RecordKey(meta.id, id), value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), records_cf_, key, &value);
  *found = false;
  if (s.IsNotFound()) return Status::OK();
  HEDGEDB_RETURN_IF_ERROR(FromRocks(s, "reading item " + std::to_string(id)));
  HEDGEDB_RETURN_IF_ERROR(DecodeRecord(key, value, ItemRowBytes(meta.spec), record));
  *found = true;
  return Status::OK();
}

std::shared_ptr<const rocksdb::Snapshot> RecordStore::Snapshot() {
  if (follow_) return nullptr;
  rocksdb::DB* db = db_.get();
  return std::shared_ptr<const rocksdb::Snapshot>(
      db->GetSnapshot(), [db](const rocksdb::Snapshot* s) { db->ReleaseSnapshot(s); });
}

Status RecordStore::GetPayload(const CollectionMeta& meta, int64_t id, std::string* payload,
                               bool* found, const rocksdb::Snapshot* snapshot) {
  std::string value;
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::Status s = db_->Get(ro, payload_cf_, RecordKey(meta.id, id), &value);
  *found = false;
  payload->clear();
  if (s.IsNotFound()) return Status::OK();
  HEDGEDB_RETURN_IF_ERROR(FromRocks(s, "reading payload of item " + std::to_string(id)));
  HEDGEDB_RETURN_IF_ERROR(DecodePayload(value, id, payload));
  *found = true;
  return Status::OK();
}

Status RecordStore::PutRawRecordForTest(const std::string& key, const std::string& value) {
  return FromRocks(db_->Put(rocksdb::WriteOptions(), records_cf_, key, value), "raw put");
}

}  // namespace storage
}  // namespace hedgedb
