// RecordStore: the RocksDB source of truth of a database directory.
//
// Column families:
//   meta     "c/<name>" -> collection descriptor (JSON: spec, id, sequence,
//            max id), "next_collection_id" -> decimal,
//            "t/<collection id u32 BE><token>" -> batch token (JSON)
//            "k/<collection id u32 BE><score type u8>" -> calibration map
//            (calibration/calibration_map.h: versioned, checksummed)
//   records  <collection id u32 BE><item id, sign-flipped u64 BE> -> record
//   payload  same key -> payload bytes
// Record values carry a format version and a CRC32C; a value that fails its
// check is reported as corruption, never used. Every mutation of a collection
// is one WriteBatch that also advances the collection's sequence number, so a
// batch is all or nothing and the sequence number says which records exist.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class Env;
class Snapshot;
class WriteBatch;
struct Options;
struct WriteOptions;
}  // namespace rocksdb

namespace hedgedb {
namespace storage {

// A collection as the catalog stores it.
struct CollectionMeta {
  CollectionSpec spec;
  uint32_t id = 0;        // internal, never reused
  uint64_t sequence = 0;  // sequence number of the last committed write
  int64_t max_id = -1;    // largest item id ever held
  // The match parameters the collection was created with, once calibrate
  // has refitted spec.match_a/b: the index and arena files stay bound to
  // them (query::IndexBinding), since a and b change scores, not rows.
  bool refitted = false;
  float created_match_a = 0, created_match_b = 0;
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

// An ingest batch's token (IngestBatch::token), stored with the batch so that
// a retry of the same batch can be recognised.
struct BatchToken {
  std::string token;
  uint64_t sequence = 0;      // the batch's collection sequence number
  int64_t count = 0;          // items in the batch
  int64_t first_id = 0;       // automatic ids: first_id .. first_id + count - 1
  bool explicit_ids = false;  // the caller gave the ids
  uint32_t content_crc = 0;   // CRC32C of the ids (if explicit) and item rows
};

struct StoreOptions {
  bool create_if_missing = true;
  bool error_if_exists = false;
  bool sync = false;  // fsync the WAL before acknowledging a write
  // Opens without writing anything to the directory (RocksDB's read-only
  // mode: no new log, manifest or marker); every write fails. For verify.
  bool read_only = false;
  // Opens beside a process that may hold the store open for writing
  // (RocksDB's secondary instance; implies read_only): reads see the store
  // as of the open or of the last CatchUp, and nothing is written anywhere
  // (RocksDB's info log of the instance is discarded).
  bool follow = false;
  // Tests: an environment that injects faults (nullptr: the default).
  rocksdb::Env* env = nullptr;
};

class RecordStore {
 public:
  // Opens the store at `path` (<database>/store). With create_if_missing, a
  // missing or empty directory gets a new store, but a directory with files
  // and no CURRENT file (a damaged store) is Corruption: nothing is created
  // over it. A store that another process (or this one) holds open for
  // writing is IOError "database <database> is locked by another process".
  static Status Open(const StoreOptions& options, const std::string& path,
                     std::unique_ptr<RecordStore>* store);
  // RocksDB's repair of a damaged store (for example one that lost its
  // CURRENT or MANIFEST): salvages every readable table and log. The store
  // must not be open.
  static Status Repair(const std::string& path);
  // A table file that RocksDB's repair set aside (into <store>/lost/: a
  // block failed its checksum, so RocksDB dropped the whole file), read as
  // far as it can be: forward from its first key up to the first unreadable
  // block, and backward from its last key down to one. Each key read is
  // looked up in this store's family of the same name.
  struct SetAsideTable {
    std::string family;   // the table's column family ("" if unknown)
    bool opened = false;  // its footer and index could be read
    bool whole = false;   // every block was read
    int64_t keys_read = 0;
    // Keys read that this store lacks, by collection id (records and
    // payload keys), and of the other families (catalog, tokens, maps).
    std::map<uint32_t, std::vector<int64_t>> missing_items;
    int64_t missing_other = 0;
    // What was not read (!whole): the collections whose keys may lie
    // between the last key read forward and the first read backward
    // (records and payload families; 0 .. UINT32_MAX when unknown).
    uint32_t gap_first_collection = 0, gap_last_collection = 0;
  };
  Status ReadSetAsideTable(const std::string& file, SetAsideTable* out);
  // Writes records exactly as given (each with its own batch's sequence
  // number), synced; the descriptor is not changed. For repair, which
  // restores records of an arena snapshot that it checked.
  Status RestoreRecords(const CollectionMeta& meta, const std::vector<StoredRecord>& records);
  // The pid of the process that holds the store at `path` open for writing
  // (RocksDB's fcntl lock on its LOCK file, as F_GETLK reports it); 0 if
  // none, or if it is this process.
  static int64_t WriterPid(const std::string& path);
  ~RecordStore();

  // A collection descriptor that cannot be decoded.
  struct DamagedDescriptor {
    std::string name;
    Status status;
  };
  // The collections of the catalog. A damaged descriptor fails the call, or,
  // with `damaged`, is listed there and the others are still returned.
  // With `snapshot`, the catalog as of that snapshot.
  Status LoadCatalog(std::vector<CollectionMeta>* collections,
                     std::vector<DamagedDescriptor>* damaged = nullptr,
                     const rocksdb::Snapshot* snapshot = nullptr);
  // Deletes the descriptor of a collection whose descriptor is damaged (its
  // records, under an unknown id, stay until a repair).
  Status DropDamagedDescriptor(const std::string& name);
  // The id the next new collection gets (ids are never reused, so every
  // collection the store ever had has a smaller one).
  Status NextCollectionId(uint32_t* id);
  // Registers a new collection; fills meta->id.
  Status CreateCollection(CollectionMeta* meta);
  // Deletes the descriptor, records and payloads of a collection.
  Status DropCollection(const CollectionMeta& meta);

  // Deletes `deletes`, then writes `puts` (so an id in both is replaced,
  // its old payload gone), and stores `meta` (whose sequence the caller has
  // advanced) and `token` (if not null), in one atomic, durable batch.
  Status Commit(const CollectionMeta& meta, const std::vector<RecordWrite>& puts,
                const std::vector<int64_t>& deletes, const BatchToken* token = nullptr);
  // found = false if the collection never committed a batch with this token.
  Status GetBatchToken(const CollectionMeta& meta, const std::string& token, BatchToken* out,
                       bool* found);

  // Calibration maps of a collection, one per score type: opaque bytes to the
  // store (the caller encodes and checks them). Each put or delete is one
  // synced write, so a map is either the old one or the new one.
  Status PutCalibration(const CollectionMeta& meta, uint8_t score_type, const std::string& bytes);
  Status DeleteCalibration(const CollectionMeta& meta, uint8_t score_type);
  // Rewrites the descriptor with `meta` (a spec whose match parameters were
  // refitted; id, sequence and max id unchanged), removes every stored map of
  // the collection and stores `bytes` under `score_type`: one synced batch, so
  // a reader sees the old spec with the old maps or the new with the new map.
  Status ReplaceSpecAndCalibration(const CollectionMeta& meta, uint8_t score_type,
                                   const std::string& bytes);
  // Every stored map of the collection: (score type, bytes).
  Status LoadCalibrations(const CollectionMeta& meta,
                          std::vector<std::pair<uint8_t, std::string>>* maps,
                          const rocksdb::Snapshot* snapshot = nullptr);

  // RocksDB's unique identity of this store (stable across reopen; a copy of
  // the directory keeps it, a new store gets another).
  const std::string& identity() const { return identity_; }

  // Visits every record of a collection in id order; stops at the first error.
  Status Scan(const CollectionMeta& meta, const std::function<Status(const StoredRecord&)>& visit);
  // Scan for a reader catching up: visits the id of every record in id
  // order, and decodes (with its checks) only the records written after
  // `sequence`, which go to `visit_newer`.
  Status ScanSince(const CollectionMeta& meta, uint64_t sequence,
                   const std::function<void(int64_t id)>& visit_id,
                   const std::function<Status(const StoredRecord&)>& visit_newer);
  // follow: reads from now on see every write the writer's store had
  // committed to its log (RocksDB's TryCatchUpWithPrimary). The caller keeps
  // reads out meanwhile: a follower has no snapshots (see Snapshot).
  //
  // A catch-up reads the writer's MANIFEST, then its log files. A writer
  // that meanwhile writes a log into a table file (flush, or the recovery of
  // a writer's open) and deletes the log leaves a view that lacks those
  // batches although they were acknowledged before the catch-up began. So a
  // catch-up counts only if the writer's MANIFEST (the file CURRENT names,
  // and its length) is the same before and after it: every table or log
  // change goes through the MANIFEST before a log is deleted. Otherwise it
  // is repeated, up to kCatchUpAttempts times; then IOError (the writer kept
  // rewriting its files; try again). Open does the same once after opening.
  static constexpr int kCatchUpAttempts = 20;
  Status CatchUp();
  // follow: a copy of the store as this reader sees it now (a new store in
  // `dir`, which must not exist, holding every key of every column family;
  // nothing of the writer's files is linked or copied, so the writer may
  // delete or rewrite them meanwhile). `identity` receives the copy's
  // identity and `records` the number of records copied per collection id.
  // The caller keeps the view from changing (no CatchUp) meanwhile.
  Status CopyView(const std::string& dir, std::string* identity,
                  std::map<uint32_t, int64_t>* records);
  // Writes the memtables to table files if they hold at least `min_bytes`,
  // so that the next open need not replay that much write-ahead log (a
  // million items take seconds to replay). For closing a large store.
  Status FlushMemtables(uint64_t min_bytes);

  // Visits every payload of a collection in id order (as of `snapshot` if
  // not null); stops at the first error, a payload failing its check
  // included.
  Status ScanPayloads(const CollectionMeta& meta, const rocksdb::Snapshot* snapshot,
                      const std::function<Status(int64_t id, const std::string& payload)>& visit);

  // Verify: visits every record and every payload of a collection as of
  // `snapshot`, in id order, each with the result of its checks. Unlike Scan,
  // a value that fails its checksum, version or length is passed on (with the
  // error) and the scan goes on; only a failed read stops it.
  Status ScanChecked(const CollectionMeta& meta, const rocksdb::Snapshot* snapshot,
                     const std::function<void(int64_t id, const Status& checked,
                                              const StoredRecord& record)>& visit_record,
                     const std::function<void(int64_t id, const Status& checked)>& visit_payload);
  // RocksDB's checksum check of every table file (reads them all).
  Status VerifyFileChecksums();
  // A consistent copy of the store in `dir` (which must not exist): RocksDB's
  // checkpoint, hard links where the file system allows, copies otherwise.
  // Every write acknowledged before the call is in it; every batch in it is
  // whole. The copy gets an identity of its own (RocksDB 7.8's checkpoint
  // writes none; the first open would invent one): `identity` receives it.
  Status Checkpoint(const std::string& dir, std::string* identity);

  // found = false if absent.
  Status GetRecord(const CollectionMeta& meta, int64_t id, StoredRecord* record, bool* found);
  // With `snapshot`, the payload as of that snapshot.
  Status GetPayload(const CollectionMeta& meta, int64_t id, std::string* payload, bool* found,
                    const rocksdb::Snapshot* snapshot = nullptr);
  // A consistent point in time to read from (released with the pointer).
  // A follower's reads change only at CatchUp, so it gives a null snapshot
  // (RocksDB's secondary instance has none), which reads take as "now".
  std::shared_ptr<const rocksdb::Snapshot> Snapshot();

  // Encoding, exposed for tests that corrupt records on purpose.
  static std::string RecordKey(uint32_t collection_id, int64_t id);
  static std::string EncodeRecord(uint64_t sequence, const RecordWrite& w, size_t row_bytes);
  // The same into `out` (replacing its contents; its capacity is reused).
  static void EncodeRecord(uint64_t sequence, const RecordWrite& w, size_t row_bytes,
                           std::string* out);
  static Status DecodeRecord(std::string_view key, std::string_view value, size_t row_bytes,
                             StoredRecord* record);
  // Raw access to the records column family (tests only).
  Status PutRawRecordForTest(const std::string& key, const std::string& value);

 private:
  RecordStore() = default;
  Status PutMeta(const CollectionMeta& meta, void* batch);
  Status EnsureFamilyTables();
  // Every write goes through here: after one failed write, RocksDB's WAL may
  // be unusable, so later writes are refused (with the first error) until
  // the store is reopened.
  Status Write(const rocksdb::WriteOptions& options, rocksdb::WriteBatch* batch,
               const std::string& what);

  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* records_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* payload_cf_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  bool sync_ = false;
  bool follow_ = false;
  std::string path_;  // the store directory
  // follow: how to open the secondary instance, and the writer's MANIFEST
  // state (CatchUp) the instance last caught up with ("": open afresh).
  Status OpenFollower();
  std::string scratch_;
  std::unique_ptr<rocksdb::Options> follow_options_;
  std::string synced_manifest_;
  std::string identity_;
  std::mutex write_error_mutex_;
  std::string write_error_;  // the first failed write; empty while healthy
};

// Spec <-> JSON (the catalog format; also used by the CLI's stats).
std::string SpecToJson(const CollectionSpec& spec);
Status SpecFromJson(const std::string& json, CollectionSpec* spec);

}  // namespace storage
}  // namespace hedgedb
