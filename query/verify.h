// Verify: the read-only checks of DB::Verify and VerifyDB, and the two rules
// that tie an index file to its collection (its path and its binding), shared
// by the database, verify and backup.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "hedgedb/db.h"
#include "hedgedb/status.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace query {

// <db_path>/index/<collection id>.hidx
std::string IndexFilePath(const std::string& db_path, uint32_t collection_id);
// A 64-bit hash of the store's identity, the collection's internal id and its
// spec: a file copied from another collection or database is not trusted.
uint64_t IndexBinding(const std::string& store_identity, const storage::CollectionMeta& meta);

// Checks the collections of `store` (all, or the one named `collection`) and
// the index files under `db_path`, writing nothing. Each collection is read
// from its own snapshot taken after its index file was read, so a database
// in use never shows an index ahead of its records.
//
// `latest` (may be empty): the collection's sequence number in the store as
// it is now. VerifyDB gives it when a writer runs beside the check, whose
// view of the store is as of its start: an index file that the writer saved
// since covers a later sequence, which is not a loss of writes when the
// store has that sequence now (note `index_newer_than_view`, not the problem
// `index_ahead`).
//
// A collection whose records cannot be read (a damaged table block, say) is
// a problem (`records_unreadable`); the others are still checked.
using LatestSequence = std::function<Status(const std::string& collection, uint64_t* sequence)>;
Status VerifyStore(storage::RecordStore* store, const std::string& db_path,
                   const std::string& collection, VerifyReport* report,
                   const LatestSequence& latest = nullptr);

}  // namespace query
}  // namespace hedgedb
