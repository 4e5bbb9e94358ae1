// RecordStore: the RocksDB source of truth of a database directory.
//
// Column families:
//   meta     "c/<name>" -> collection descriptor (JSON: spec, id, sequence,
//            max id), "next_collection_id" -> decimal
//   records  <collection id u32 BE><item id, sign-flipped u64 BE> -> record
//   payload  same key -> payload bytes
// Record values carry a format version and a CRC32C; a value that fails its
// check is reported as corruption, never used. Every mutation of a collection
// is one WriteBatch that also advances the collection's sequence number, so a
// batch is all or nothing and the sequence number says which records exist.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace hedgedb {
namespace storage {

// A collection as the catalog stores it.
struct CollectionMeta {
  CollectionSpec spec;
  uint32_t id = 0;        // internal, never reused
  uint64_t sequence = 0;  // sequence number of the last committed write
  int64_t max_id = -1;    // largest item id ever held
};

// One item to write. `row` points to ItemRowBytes(spec) bytes.
struct RecordWrite {
  int64_t id = 0;
  bool has_label = false;
  int64_t label = 0;
  const void* row = nullptr;
  const std::string* payload = nullptr;  // nullptr: none
};

// A decoded record (row bytes copied out).
struct StoredRecord {
  int64_t id = 0;
  uint64_t sequence = 0;  // sequence number of the batch that wrote it
  bool has_label = false;
  int64_t label = 0;
  std::string row;  // ItemRowBytes(spec) bytes
};

struct StoreOptions {
  bool create_if_missing = true;
  bool error_if_exists = false;
  bool sync = false;  // fsync the WAL before acknowledging a write
};

class RecordStore {
 public:
  static Status Open(const StoreOptions& options, const std::string& path,
                     std::unique_ptr<RecordStore>* store);
  ~RecordStore();

  Status LoadCatalog(std::vector<CollectionMeta>* collections);
  // Registers a new collection; fills meta->id.
  Status CreateCollection(CollectionMeta* meta);
  // Deletes the descriptor, records and payloads of a collection.
  Status DropCollection(const CollectionMeta& meta);

  // Writes `puts` and deletes `deletes` and stores `meta` (whose sequence the
  // caller has advanced) in one atomic, durable batch.
  Status Commit(const CollectionMeta& meta, const std::vector<RecordWrite>& puts,
                const std::vector<int64_t>& deletes);

  // Visits every record of a collection in id order; stops at the first error.
  Status Scan(const CollectionMeta& meta, const std::function<Status(const StoredRecord&)>& visit);

  // found = false if absent.
  Status GetRecord(const CollectionMeta& meta, int64_t id, StoredRecord* record, bool* found);
  Status GetPayload(const CollectionMeta& meta, int64_t id, std::string* payload, bool* found);

  // Encoding, exposed for tests that corrupt records on purpose.
  static std::string RecordKey(uint32_t collection_id, int64_t id);
  static std::string EncodeRecord(uint64_t sequence, const RecordWrite& w, size_t row_bytes);
  static Status DecodeRecord(std::string_view key, std::string_view value, size_t row_bytes,
                             StoredRecord* record);
  // Raw access to the records column family (tests only).
  Status PutRawRecordForTest(const std::string& key, const std::string& value);

 private:
  RecordStore() = default;
  Status PutMeta(const CollectionMeta& meta, void* batch);

  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* records_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* payload_cf_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  bool sync_ = false;
};

// Spec <-> JSON (the catalog format; also used by the CLI's stats).
std::string SpecToJson(const CollectionSpec& spec);
Status SpecFromJson(const std::string& json, CollectionSpec* spec);

}  // namespace storage
}  // namespace hedgedb
