// Backup: DB::Backup, a consistent copy of an open database (its record store
// and index files) in a new or empty directory. The database (DBImpl,
// query/db_impl.cc) hands it the little it needs through BackupSource, as
// leveldb's DBImpl hands repair and iteration to files of their own.
#pragma once

#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "hedgedb/db.h"
#include "hedgedb/status.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace query {

// What a backup reads of the database it copies.
class BackupSource {
 public:
  virtual ~BackupSource() = default;
  // The database directory and its record store.
  virtual const std::string& db_path() const = 0;
  virtual storage::RecordStore* record_store() = 0;
  // Options::read_only: the copy is the reader's view, caught up first.
  virtual bool is_reader() const = 0;
  // DB::Flush: saves what the open collections' indexes hold.
  virtual Status SaveIndexes() = 0;
  // The descriptors of the catalog's collections, those whose descriptor is
  // damaged left out.
  virtual std::vector<storage::CollectionMeta> IntactCollections() = 0;
  // A reader: DB::CatchUp, its store and catalog brought up to the writer's
  // acknowledged batches.
  virtual Status CatchUpView() = 0;
  // A reader: held while the view is copied, so that it does not change
  // (a writer gets an empty lock).
  virtual std::shared_lock<std::shared_mutex> ReadView() = 0;
};

// DB::Backup of `db` into `dir` (see include/hedgedb/db.h): `dir` must not
// exist or be empty; a copy that failed before it was complete is removed.
Status Backup(BackupSource* db, const std::string& dir, BackupResult* result);

}  // namespace query
}  // namespace hedgedb
