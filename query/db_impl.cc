// DBImpl: the hedgedb::DB facade over a database directory:
//   <dir>/store/    the RocksDB record store (source of truth)
//   <dir>/index/    one coarse index file per collection, <collection id>.hidx
#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

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

class DBImpl : public DB {
 public:
  DBImpl(const Options& options, std::string path) : options_(options), path_(std::move(path)) {}
  ~DBImpl() override { Flush(); }

  Status Init() {
    ScopedOmpThreads threads(options_.threads);
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
    HEDGEDB_RETURN_IF_ERROR(store_->LoadCatalog(&metas));
    for (const auto& meta : metas) {
      auto c = NewCollection(meta);
      Status s = c->Open();
      if (s.ok()) {
        collections_[meta.spec.name] = std::move(c);
      } else {
        // One damaged collection must not take the others down with it.
        broken_[meta.spec.name] = Status::Corruption("collection '" + meta.spec.name +
                                                     "' cannot be opened: " + s.ToString());
      }
    }
    return Status::OK();
  }

  Status CreateCollection(const CollectionSpec& spec) override {
    HEDGEDB_RETURN_IF_ERROR(query::ValidateSpec(spec));
    std::unique_lock<std::shared_mutex> lock(catalog_mutex_);
    if (collections_.count(spec.name) || broken_.count(spec.name)) {
      return Status::AlreadyExists("collection '" + spec.name + "' already exists");
    }
    storage::CollectionMeta meta;
    meta.spec = spec;
    HEDGEDB_RETURN_IF_ERROR(store_->CreateCollection(&meta));
    auto c = NewCollection(meta);
    std::remove(IndexPath(meta.id).c_str());  // never trust a leftover file
    HEDGEDB_RETURN_IF_ERROR(c->Open());
    collections_[spec.name] = std::move(c);
    return Status::OK();
  }

  Status DropCollection(const std::string& name) override {
    std::unique_lock<std::shared_mutex> lock(catalog_mutex_);
    auto it = collections_.find(name);
    if (it == collections_.end()) {
      if (broken_.count(name)) return Status::NotSupported("cannot drop a damaged collection");
      return UnknownCollection(name);
    }
    const storage::CollectionMeta meta = it->second->meta();
    HEDGEDB_RETURN_IF_ERROR(store_->DropCollection(meta));
    collections_.erase(it);  // in-flight operations hold their own reference
    std::remove(IndexPath(meta.id).c_str());
    return Status::OK();
  }

  Status ListCollections(std::vector<std::string>* names) override {
    std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
    names->clear();
    for (const auto& kv : collections_) names->push_back(kv.first);
    for (const auto& kv : broken_) names->push_back(kv.first);
    std::sort(names->begin(), names->end());
    return Status::OK();
  }

  Status DescribeCollection(const std::string& name, CollectionSpec* spec) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    *spec = c->spec();
    return Status::OK();
  }

  Status Ingest(const std::string& name, const IngestBatch& batch,
                std::vector<int64_t>* ids) override {
    std::shared_ptr<query::Collection> c;
    HEDGEDB_RETURN_IF_ERROR(Find(name, &c));
    ScopedOmpThreads threads(options_.threads);
    return c->Ingest(batch, ids);
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

  Status Flush() override {
    std::vector<std::shared_ptr<query::Collection>> all;
    {
      std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
      for (const auto& kv : collections_) all.push_back(kv.second);
    }
    Status first;
    for (auto& c : all) {
      Status s = c->SaveIndex();
      if (first.ok() && !s.ok()) first = s;
    }
    return first;
  }

 private:
  std::string IndexPath(uint32_t id) const {
    return path_ + "/index/" + std::to_string(id) + ".hidx";
  }
  std::shared_ptr<query::Collection> NewCollection(const storage::CollectionMeta& meta) {
    return std::make_shared<query::Collection>(store_.get(), meta, IndexPath(meta.id),
                                               options_.index_save_interval);
  }
  static Status UnknownCollection(const std::string& name) {
    return Status::NotFound("no collection named '" + name + "'");
  }
  Status Find(const std::string& name, std::shared_ptr<query::Collection>* c) {
    std::shared_lock<std::shared_mutex> lock(catalog_mutex_);
    auto it = collections_.find(name);
    if (it != collections_.end()) {
      *c = it->second;
      return Status::OK();
    }
    auto b = broken_.find(name);
    if (b != broken_.end()) return b->second;
    return UnknownCollection(name);
  }

  const Options options_;
  const std::string path_;
  std::unique_ptr<storage::RecordStore> store_;
  std::shared_mutex catalog_mutex_;
  std::map<std::string, std::shared_ptr<query::Collection>> collections_;
  std::map<std::string, Status> broken_;
};

}  // namespace

Status DB::Open(const Options& options, const std::string& path, std::unique_ptr<DB>* db) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  auto impl = std::make_unique<DBImpl>(options, path);
  HEDGEDB_RETURN_IF_ERROR(impl->Init());
  *db = std::move(impl);
  return Status::OK();
}

}  // namespace hedgedb
