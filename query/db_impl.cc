// DBImpl: the hedgedb::DB facade over a database directory:
//   <dir>/store/    the RocksDB record store (source of truth)
//   <dir>/index/    per collection: its coarse index file, <collection id>.hidx,
//                   and its arena snapshot, <collection id>.harena (both caches
//                   of the records, rebuilt from them when missing or stale)
// Collections are opened on first use: a command touching one collection
// loads only that one, and a damaged collection fails only its own calls.
// A reader (Options::read_only) follows the store of the process that holds
// the database open for writing and writes nothing: its collections keep
// their indexes in memory, and CatchUp applies the writer's later batches.
// Backup lives in query/backup.cc, Verify and the index file rules in
// query/verify.cc, RepairDB in query/repair.cc.
#include <omp.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "common/file_util.h"
#include "hedgedb/db.h"
#include "index/coarse_index.h"
#include "query/arena_file.h"
#include "query/backup.h"
#include "query/collection.h"
#include "query/verify.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace {

// Memtables at least this large are written to tables when the database
// closes (DBImpl::~DBImpl).
constexpr uint64_t kFlushMemtablesOnCloseBytes = uint64_t(16) << 20;

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Applies Options::threads to the OpenMP regions (FAISS, rescoring) that run
// on the calling thread for the duration of one call.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()), active_(threads > 0) {
    if (active_) omp_set_num_threads(threads);
  }
  ~ScopedOmpThreads() {
    if (active_) omp_set_num_threads(saved_);
  }

 private:
  int saved_;
  bool active_;
};

// A collection of the catalog, opened on first use so that one damaged or
// expensive collection never stands in the way of another.
struct CatalogEntry {
  storage::CollectionMeta meta;
  Status descriptor_error;  // the descriptor itself is damaged
  std::mutex open_mutex;
  bool tried = false;  // Open was attempted (guarded by open_mutex)
  std::shared_ptr<query::Collection> collection;
  Status open_error;
};

class DBImpl : public DB, private query::BackupSource {
 public:
  DBImpl(const Options& options, std::string path) : options_(options), path_(std::move(path)) {}
  ~DBImpl() override {
    if (options_.read_only) return;
    Flush();
    // A large write-ahead log would be replayed by the next open (seconds
    // for a million items): write it to tables now. Its records are durable
    // either way, so a failure changes nothing.
    if (store_) (void)store_->FlushMemtables(kFlushMemtablesOnCloseBytes);
  }

  Status Init() {
    storage::StoreOptions so;
    if (options_.read_only) {
      if (!IsDir(path_ + "/store")) return Status::NotFound("no database at " + path_);
      so.create_if_missing = false;
      so.follow = true;
      HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Open(so, path_ + "/store", &store_));
      // Index files of collections created after this reader's view are
      // not lost writes: no CheckForLostCollections.
      return ReloadCatalog();
    }
    if (!IsDir(path_)) {
      if (!options_.create_if_missing) return Status::NotFound("no database at " + path_);
      HEDGEDB_RETURN_IF_ERROR(MakeDir(path_));
    } else if (options_.error_if_exists && IsDir(path_ + "/store")) {
      return Status::AlreadyExists("a database exists at " + path_);
    }
    if (!IsDir(path_ + "/store") && !options_.create_if_missing) {
      return Status::NotFound("no database at " + path_);
    }
    HEDGEDB_RETURN_IF_ERROR(MakeDir(path_ + "/index"));
    so.create_if_missing = options_.create_if_missing;
    so.sync = options_.sync;
    HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Open(so, path_ + "/store", &store_));
    RemoveUnfinishedFiles();
    HEDGEDB_RETURN_IF_ERROR(ReloadCatalog());
    return CheckForLostCollections();
  }

  Status CreateCollection(const CollectionSpec& spec) override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    HEDGEDB_RETURN_IF_ERROR(query::ValidateSpec(spec));
    std::unique_lock<std::shared_mutex> lock(catalog_mutex_);
    if (catalog_.count(spec.name)) {
      return Status::AlreadyExists("collection '" + spec.name + "' already exists");
    }
    auto entry = std::make_shared<CatalogEntry>();
    entry->meta.spec = spec;
    HEDGEDB_RETURN_IF_ERROR(store_->CreateCollection(&entry->meta));
    // Never trust a leftover file.
    std::remove(IndexPath(entry->meta.id).c_str());
    std::remove(query::ArenaFilePath(path_, entry->meta.id).c_str());
    entry->tried = true;
    entry->collection = NewCollection(entry->meta);
    ScopedOmpThreads threads(options_.threads);
    entry->open_error = entry->collection->Open();
    if (!entry->open_error.ok()) entry->collection.reset();
    catalog_[spec.name] = entry;
    return entry->open_error;
  }

  Status DropCollection(const std::string& name) override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    std::unique_lock<std::shared_mutex> lock(catalog_mutex_);
    auto it = catalog_.find(name);
    if (it == catalog_.end()) return UnknownCollection(name);
    std::shared_ptr<CatalogEntry> entry = it->second;
    {
      // A write in flight finishes first; later ones fail (MarkDropped).
      std::lock_guard<std::mutex> open_lock(entry->open_mutex);
      entry->tried = true;
      entry->open_error = UnknownCollection(name);
      if (entry->collection) entry->collection->MarkDropped();
      entry->collection.reset();
    }
    // Works for damaged collections too: nothing of them needs to open.
    if (!entry->descriptor_error.ok()) {
      HEDGEDB_RETURN_IF_ERROR(store_->DropDamagedDescriptor(name));
    } else {
      HEDGEDB_RETURN_IF_ERROR(store_->DropCollection(entry->meta));
      std::remove(IndexPath(entry->meta.id).c_str());
      std::remove(query::ArenaFilePath(path_, entry->meta.id).c_str());
    }
    catalog_.erase(it);  // in-flight operations hold their own reference
    return Status::OK();
  }

  Status ListCollections(std::vector<std::string>* names) override {
    auto view = ReadView();
    std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
    names->clear();
    for (const auto& kv : catalog_) names->push_back(kv.first);
    return Status::OK();
  }

  Status DescribeCollection(const std::string& name, CollectionSpec* spec) override {
    auto view = ReadView();
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    *spec = c->spec();
    return Status::OK();
  }

  Status Ingest(const std::string& name, const IngestBatch& batch, std::vector<int64_t>* ids,
                IngestResult* result) override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    ScopedOmpThreads threads(options_.threads);
    return c->Ingest(batch, ids, result);
  }

  Status Get(const std::string& name, const int64_t* ids, size_t n,
             std::vector<Record>* records) override {
    auto view = ReadView();
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->Get(ids, n, records);
  }

  Status ListIds(const std::string& name, std::vector<int64_t>* ids) override {
    auto view = ReadView();
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    c->ListIds(ids);
    return Status::OK();
  }

  Status Remove(const std::string& name, const int64_t* ids, size_t n, int64_t* removed) override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->Remove(ids, n, removed);
  }

  Status Search(const std::string& name, const EmbeddingView& queries, const SearchOptions& options,
                std::vector<SearchResult>* results) override {
    auto view = ReadView();
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    ScopedOmpThreads threads(options_.threads);
    return c->Search(queries, options, results);
  }

  Status GetStats(const std::string& name, CollectionStats* stats) override {
    auto view = ReadView();
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->Stats(stats);
  }

  Status Calibrate(const std::string& name, const CalibrateOptions& options,
                   CalibrationReport* report) override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    ScopedOmpThreads threads(options_.threads);
    return c->Calibrate(options, report);
  }

  Status ImportCalibration(const std::string& name, const std::string& map_bytes,
                           double base_rate) override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->ImportCalibration(map_bytes, base_rate);
  }

  Status RemoveCalibration(const std::string& name, ScoreType score) override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->RemoveCalibration(score);
  }

  Status Backup(const std::string& dir, BackupResult* result) override {
    ScopedOmpThreads threads(options_.threads);
    return query::Backup(this, dir, result);
  }

  Status Verify(const std::string& collection, VerifyReport* report) override {
    auto view = ReadView();
    ScopedOmpThreads threads(options_.threads);
    return query::VerifyStore(store_.get(), path_, collection, report);
  }

  Status Flush() override {
    HEDGEDB_RETURN_IF_ERROR(Writable());
    std::vector<std::shared_ptr<query::Collection>> opened;
    {
      std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
      for (const auto& kv : catalog_) {
        std::lock_guard<std::mutex> open_lock(kv.second->open_mutex);
        if (kv.second->collection) opened.push_back(kv.second->collection);
      }
    }
    ScopedOmpThreads threads(options_.threads);
    Status first;
    for (auto& c : opened) {
      Status s = c->SaveIndex();
      if (first.ok() && !s.ok()) first = s;
    }
    return first;
  }

  Status CatchUp() override {
    if (!options_.read_only) return Status::OK();
    std::unique_lock<std::shared_mutex> view(view_mutex_);
    HEDGEDB_RETURN_IF_ERROR(store_->CatchUp());
    ScopedOmpThreads threads(options_.threads);
    return ReloadCatalog();
  }

 private:
  // The one check of every write: a reader refuses them all.
  Status Writable() const {
    if (!options_.read_only) return Status::OK();
    return Status::NotSupported("database " + path_ + " is open read-only");
  }
  // A reader's store changes only at CatchUp, which holds this exclusively:
  // a call holding it shared sees one state of the store throughout (RocksDB's
  // secondary instance has no snapshots). A writer needs no such lock.
  // (Also query::BackupSource's.)
  std::shared_lock<std::shared_mutex> ReadView() override {
    if (!options_.read_only) return std::shared_lock<std::shared_mutex>();
    return std::shared_lock<std::shared_mutex>(view_mutex_);
  }
  // Fills the catalog from the store (Init), or brings it to the store's
  // current state (CatchUp): collections created, dropped or recreated meanwhile
  // get new entries; open ones that stay catch up in memory (the first error
  // is returned once all were tried).
  Status ReloadCatalog() {
    std::vector<storage::CollectionMeta> metas;
    std::vector<storage::RecordStore::DamagedDescriptor> damaged;
    HEDGEDB_RETURN_IF_ERROR(store_->LoadCatalog(&metas, &damaged));
    std::unique_lock<std::shared_mutex> lock(catalog_mutex_);
    std::map<std::string, std::shared_ptr<CatalogEntry>> catalog;
    Status first;
    for (const auto& meta : metas) {
      auto it = catalog_.find(meta.spec.name);
      std::shared_ptr<CatalogEntry> entry;
      if (it != catalog_.end() && it->second->descriptor_error.ok() &&
          it->second->meta.id == meta.id) {
        entry = it->second;
        std::lock_guard<std::mutex> open_lock(entry->open_mutex);
        if (entry->collection) {
          const Status s = entry->collection->CatchUp(meta);
          if (first.ok() && !s.ok()) first = s;
          entry->meta = s.ok() ? meta : entry->collection->meta();
        } else if (entry->tried) {
          entry.reset();  // it failed to open: try again from the new state
        } else {
          entry->meta = meta;
        }
      }
      if (!entry) {
        entry = std::make_shared<CatalogEntry>();
        entry->meta = meta;
      }
      catalog[meta.spec.name] = std::move(entry);
    }
    for (const auto& d : damaged) {
      auto entry = std::make_shared<CatalogEntry>();
      entry->meta.spec.name = d.name;
      entry->descriptor_error = d.status;
      catalog[d.name] = std::move(entry);
    }
    catalog_.swap(catalog);
    return first;
  }

  std::string IndexPath(uint32_t id) const { return query::IndexFilePath(path_, id); }
  uint64_t IndexBinding(const storage::CollectionMeta& meta) const {
    return query::IndexBinding(store_->identity(), meta);
  }
  // query::BackupSource: what Backup (query/backup.cc) reads of this database.
  const std::string& db_path() const override { return path_; }
  storage::RecordStore* record_store() override { return store_.get(); }
  bool is_reader() const override { return options_.read_only; }
  Status SaveIndexes() override { return Flush(); }
  std::vector<storage::CollectionMeta> IntactCollections() override {
    std::vector<storage::CollectionMeta> metas;
    std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
    for (const auto& kv : catalog_) {
      if (kv.second->descriptor_error.ok()) metas.push_back(kv.second->meta);
    }
    return metas;
  }
  Status CatchUpView() override { return CatchUp(); }

  std::shared_ptr<query::Collection> NewCollection(const storage::CollectionMeta& meta) {
    query::UpkeepPolicy upkeep;
    upkeep.recheck_fraction = options_.index_recheck_fraction;
    upkeep.retrain_recall = options_.index_retrain_recall;
    upkeep.retrain_imbalance = options_.index_retrain_imbalance;
    upkeep.run_inline = options_.index_upkeep_inline;
    upkeep.threads = options_.threads;
    auto c = std::make_shared<query::Collection>(
        store_.get(), meta, IndexPath(meta.id), query::ArenaFilePath(path_, meta.id),
        IndexBinding(meta), options_.index_save_interval, upkeep);
    if (options_.read_only) c->SetReadOnly();
    return c;
  }
  void Warn(const std::string& message) const {
    if (options_.on_warning) options_.on_warning(message);
  }
  // Temporary files of index files and arena snapshots (`<file>.tmp.<pid>`,
  // common/file_util.h) that a writer left when it died mid-write: the store's
  // lock is held now, so no other writer is writing them. A snapshot's can be
  // as large as the collection's rows.
  void RemoveUnfinishedFiles() {
    std::error_code ec;
    std::filesystem::directory_iterator it(path_ + "/index", ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().find(".tmp.") == std::string::npos) continue;
      std::error_code ignored;
      std::filesystem::remove(it->path(), ignored);
    }
  }
  // Collection ids are never reused and the index file of a collection is
  // only written after its descriptor was committed: an index file whose id
  // the store has not handed out yet means the store lost the writes that
  // created that collection (its write-ahead log was damaged or deleted).
  // The file is left in place (CreateCollection discards it when it reuses
  // the id).
  Status CheckForLostCollections() {
    uint32_t next_id = 0;
    HEDGEDB_RETURN_IF_ERROR(store_->NextCollectionId(&next_id));
    std::error_code ec;
    std::filesystem::directory_iterator it(path_ + "/index", ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const size_t digits = name.find_first_not_of("0123456789");
      if (digits == 0 || digits == std::string::npos || name.substr(digits) != ".hidx") continue;
      const unsigned long long id = std::strtoull(name.c_str(), nullptr, 10);
      if (id < next_id) continue;
      Warn("lost writes: index file index/" + name + " belongs to collection id " +
           std::to_string(id) + ", but the store has only handed out ids below " +
           std::to_string(next_id) +
           ": the store lost the collection's creation and its writes (damaged or deleted "
           "write-ahead log)");
    }
    return Status::OK();
  }
  static Status UnknownCollection(const std::string& name) {
    return Status::NotFound("no collection named '" + name + "'");
  }
  // The open collection, opening it on first use. A collection that cannot
  // be opened reports why on every use; 'drop' still removes it.
  Status Find(const std::string& name, std::shared_ptr<query::Collection>* c) {
    std::shared_ptr<CatalogEntry> entry;
    {
      std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
      auto it = catalog_.find(name);
      if (it == catalog_.end()) return UnknownCollection(name);
      entry = it->second;
    }
    if (!entry->descriptor_error.ok()) {
      return Status::Corruption("collection '" + name + "' cannot be opened (drop it, or repair " +
                                "the database): " + entry->descriptor_error.ToString());
    }
    std::lock_guard<std::mutex> open_lock(entry->open_mutex);
    if (!entry->tried) {
      entry->tried = true;
      auto opened = NewCollection(entry->meta);
      ScopedOmpThreads threads(options_.threads);
      // The spec was checked at create; a descriptor edited or written by
      // another version meets the same rules (ranges) before anything is
      // allocated for it.
      Status s = query::ValidateSpec(entry->meta.spec, /*exercise_index=*/false);
      try {
        if (s.ok()) s = opened->Open();
      } catch (const std::exception& e) {  // e.g. bad_alloc growing the arena
        s = Status::IOError(std::string("opening failed: ") + e.what());
      }
      if (s.ok()) {
        if (!opened->lost_writes().empty()) Warn(opened->lost_writes());
        entry->collection = std::move(opened);
      } else {
        entry->open_error = Status::Corruption("collection '" + name +
                                               "' cannot be opened (drop it, or repair the " +
                                               "database): " + s.ToString());
      }
    }
    if (!entry->collection) return entry->open_error;
    *c = entry->collection;
    return Status::OK();
  }

  const Options options_;
  const std::string path_;
  std::unique_ptr<storage::RecordStore> store_;
  std::shared_mutex view_mutex_;  // ReadView
  std::shared_mutex catalog_mutex_;
  std::map<std::string, std::shared_ptr<CatalogEntry>> catalog_;
};

}  // namespace

Status DB::Open(const Options& options, const std::string& path, std::unique_ptr<DB>* db) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  if (!(options.index_recheck_fraction >= 0) || !std::isfinite(options.index_recheck_fraction)) {
    return Status::InvalidArgument("index_recheck_fraction must be a finite number >= 0, got " +
                                   std::to_string(options.index_recheck_fraction));
  }
  if (!(options.index_retrain_recall >= 0 && options.index_retrain_recall <= 1)) {
    return Status::InvalidArgument("index_retrain_recall must be in [0, 1], got " +
                                   std::to_string(options.index_retrain_recall));
  }
  if (!(options.index_retrain_imbalance == 0 ||
        (options.index_retrain_imbalance >= 1 && std::isfinite(options.index_retrain_imbalance)))) {
    return Status::InvalidArgument(
        "index_retrain_imbalance must be 0 (never) or a finite number >= 1, got " +
        std::to_string(options.index_retrain_imbalance));
  }
  auto impl = std::make_unique<DBImpl>(options, path);
  HEDGEDB_RETURN_IF_ERROR(impl->Init());
  *db = std::move(impl);
  return Status::OK();
}

Status VerifyDB(const std::string& path, const std::string& collection, VerifyReport* report) {
  if (!IsDir(path + "/store")) return Status::NotFound("no database at " + path);
  storage::StoreOptions so;
  so.create_if_missing = false;
  so.read_only = true;
  std::unique_ptr<storage::RecordStore> store;
  Status opened = storage::RecordStore::Open(so, path + "/store", &store);
  if (opened.IsCorruption() || opened.IsIOError()) {
    // A store that cannot be opened is the first problem a check reports
    // (with the way out in its message), not a failure of the check.
    VerifyFinding f;
    f.kind = "store_unreadable";
    f.detail = opened.ToString();
    if (f.detail.find("repair") == std::string::npos) f.detail += " (run 'hedgedb repair')";
    report->problems.push_back(std::move(f));
    return Status::OK();
  }
  HEDGEDB_RETURN_IF_ERROR(opened);
  const int64_t writer = storage::RecordStore::WriterPid(path + "/store");
  query::LatestSequence latest;
  if (writer > 0) {
    // The store was read as of the open above; the writer's index files may
    // be newer. A fresh open tells whether the store has reached them.
    latest = [&path, &so](const std::string& name, uint64_t* sequence) {
      std::unique_ptr<storage::RecordStore> now;
      HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Open(so, path + "/store", &now));
      std::vector<storage::CollectionMeta> metas;
      HEDGEDB_RETURN_IF_ERROR(now->LoadCatalog(&metas, nullptr));
      for (const auto& m : metas) {
        if (m.spec.name != name) continue;
        *sequence = m.sequence;
        return Status::OK();
      }
      return Status::NotFound("no collection named '" + name + "'");
    };
  }
  HEDGEDB_RETURN_IF_ERROR(query::VerifyStore(store.get(), path, collection, report, latest));
  if (writer > 0) {
    VerifyFinding f;
    f.kind = "writer_running";
    f.detail = "process " + std::to_string(writer) +
               " holds the database open for writing: this check read the store as of its "
               "start, and what the writer changed meanwhile was not checked (stop the writer, "
               "or call DB::Verify inside it, for a check of one state)";
    report->notes.insert(report->notes.begin(), std::move(f));
  }
  return Status::OK();
}

}  // namespace hedgedb
