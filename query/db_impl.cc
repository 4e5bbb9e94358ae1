// DBImpl: the hedgedb::DB facade over a database directory:
//   <dir>/store/    the RocksDB record store (source of truth)
//   <dir>/index/    one coarse index file per collection, <collection id>.hidx
// Collections are opened on first use: a command touching one collection
// loads only that one, and a damaged collection fails only its own calls.
#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "common/crc32c.h"
#include "hedgedb/db.h"
#include "query/collection.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace {

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::OK();
  return Status::IOError("cannot create directory " + path + ": " + std::strerror(errno));
}

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

class DBImpl : public DB {
 public:
  DBImpl(const Options& options, std::string path) : options_(options), path_(std::move(path)) {}
  ~DBImpl() override { Flush(); }

  Status Init() {
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
    storage::StoreOptions so;
    so.create_if_missing = options_.create_if_missing;
    so.sync = options_.sync;
    HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Open(so, path_ + "/store", &store_));
    std::vector<storage::CollectionMeta> metas;
    std::vector<storage::RecordStore::DamagedDescriptor> damaged;
    HEDGEDB_RETURN_IF_ERROR(store_->LoadCatalog(&metas, &damaged));
    for (const auto& meta : metas) {
      auto entry = std::make_shared<CatalogEntry>();
      entry->meta = meta;
      catalog_[meta.spec.name] = std::move(entry);
    }
    for (const auto& d : damaged) {
      auto entry = std::make_shared<CatalogEntry>();
      entry->meta.spec.name = d.name;
      entry->descriptor_error = d.status;
      catalog_[d.name] = std::move(entry);
    }
    return CheckForLostCollections();
  }

  Status CreateCollection(const CollectionSpec& spec) override {
    HEDGEDB_RETURN_IF_ERROR(query::ValidateSpec(spec));
    std::unique_lock<std::shared_mutex> lock(catalog_mutex_);
    if (catalog_.count(spec.name)) {
      return Status::AlreadyExists("collection '" + spec.name + "' already exists");
    }
    auto entry = std::make_shared<CatalogEntry>();
    entry->meta.spec = spec;
    HEDGEDB_RETURN_IF_ERROR(store_->CreateCollection(&entry->meta));
    std::remove(IndexPath(entry->meta.id).c_str());  // never trust a leftover file
    entry->tried = true;
    entry->collection = NewCollection(entry->meta);
    ScopedOmpThreads threads(options_.threads);
    entry->open_error = entry->collection->Open();
    if (!entry->open_error.ok()) entry->collection.reset();
    catalog_[spec.name] = entry;
    return entry->open_error;
  }

  Status DropCollection(const std::string& name) override {
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
    }
    catalog_.erase(it);  // in-flight operations hold their own reference
    return Status::OK();
  }

  Status ListCollections(std::vector<std::string>* names) override {
    std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
    names->clear();
    for (const auto& kv : catalog_) names->push_back(kv.first);
    return Status::OK();
  }

  Status DescribeCollection(const std::string& name, CollectionSpec* spec) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    *spec = c->spec();
    return Status::OK();
  }

  Status Ingest(const std::string& name, const IngestBatch& batch, std::vector<int64_t>* ids,
                IngestResult* result) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    ScopedOmpThreads threads(options_.threads);
    return c->Ingest(batch, ids, result);
  }

  Status Get(const std::string& name, const int64_t* ids, size_t n,
             std::vector<Record>* records) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->Get(ids, n, records);
  }

  Status Remove(const std::string& name, const int64_t* ids, size_t n, int64_t* removed) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->Remove(ids, n, removed);
  }

  Status Search(const std::string& name, const EmbeddingView& queries, const SearchOptions& options,
                std::vector<SearchResult>* results) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    ScopedOmpThreads threads(options_.threads);
    return c->Search(queries, options, results);
  }

  Status GetStats(const std::string& name, CollectionStats* stats) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->Stats(stats);
  }

  Status Calibrate(const std::string& name, const CalibrateOptions& options,
                   CalibrationReport* report) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    ScopedOmpThreads threads(options_.threads);
    return c->Calibrate(options, report);
  }

  Status ImportCalibration(const std::string& name, const std::string& map_bytes,
                           double base_rate) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->ImportCalibration(map_bytes, base_rate);
  }

  Status RemoveCalibration(const std::string& name, ScoreType score) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    return c->RemoveCalibration(score);
  }

  Status Flush() override {
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

 private:
  std::string IndexPath(uint32_t id) const {
    return path_ + "/index/" + std::to_string(id) + ".hidx";
  }
  // Ties an index file to one collection of one store: a file copied from
  // another collection or database is not trusted.
  uint64_t IndexBinding(const storage::CollectionMeta& meta) const {
    const std::string identity =
        store_->identity() + "/" + std::to_string(meta.id) + "/" + storage::SpecToJson(meta.spec);
    const uint32_t lo = Crc32c(identity.data(), identity.size());
    const uint32_t hi = Crc32c(identity.data(), identity.size(), 0x9E3779B9u);
    return (uint64_t(hi) << 32) | lo;
  }
  std::shared_ptr<query::Collection> NewCollection(const storage::CollectionMeta& meta) {
    return std::make_shared<query::Collection>(store_.get(), meta, IndexPath(meta.id),
                                               IndexBinding(meta), options_.index_save_interval);
  }
  void Warn(const std::string& message) const {
    if (options_.on_warning) options_.on_warning(message);
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
      Status s = query::ValidateSpec(entry->meta.spec);
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
  std::shared_mutex catalog_mutex_;
  std::map<std::string, std::shared_ptr<CatalogEntry>> catalog_;
};

}  // namespace

Status DB::Open(const Options& options, const std::string& path, std::unique_ptr<DB>* db) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  auto impl = std::make_unique<DBImpl>(options, path);
  HEDGEDB_RETURN_IF_ERROR(impl->Init());
  *db = std::move(impl);
  return Status::OK();
}

Status RepairDB(const std::string& path) {
  if (!IsDir(path + "/store")) return Status::NotFound("no database at " + path);
  HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Repair(path + "/store"));
  std::error_code ec;
  std::filesystem::directory_iterator it(path + "/index", ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code removed;
    std::filesystem::remove(it->path(), removed);
    if (removed) {
      return Status::IOError("cannot delete index file " + it->path().string() + ": " +
                             removed.message());
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return Status::IOError("cannot list " + path + "/index: " + ec.message());
  }
  return Status::OK();
}

}  // namespace hedgedb
