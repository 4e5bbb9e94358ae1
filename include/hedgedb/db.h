// hedgedb::DB, the entry point of an embedding program: a database directory
// holding named collections of uncertain embeddings.
//
//   std::unique_ptr<hedgedb::DB> db;
//   hedgedb::Status s = hedgedb::DB::Open(hedgedb::Options(), "/data/mydb", &db);
//   hedgedb::CollectionSpec spec; spec.name = "faces"; spec.kind = hedgedb::Kind::kGaussian;
//   spec.dim = 64; s = db->CreateCollection(spec);
//   s = db->Ingest("faces", batch, &ids);
//   s = db->Search("faces", queries, hedgedb::SearchOptions(), &results);
//
// Thread safety: every method may be called concurrently from many threads.
// Searches on a collection run in parallel; writes to it are serialised.
//
// One process at a time opens a database for writing; any number of others
// can open it with Options::read_only to search it meanwhile (DB::CatchUp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hedgedb/calibration.h"
#include "hedgedb/export.h"
#include "hedgedb/options.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {

// What DB::Backup copied, per collection.
struct BackupCollection {
  std::string name;
  int64_t items = 0;          // live items in the copy
  uint64_t sequence = 0;      // the collection's sequence number in the copy
  bool index_copied = false;  // false: the copy rebuilds the index when opened
};

struct BackupResult {
  std::vector<BackupCollection> collections;
};

// One finding of DB::Verify / VerifyDB.
struct VerifyFinding {
  // What is wrong, e.g. "record_corrupt", "index_corrupt", "index_foreign",
  // "index_ahead", "index_missing_ids", "calibration_corrupt" (the full list:
  // docs/formats.md, "Backup and verify").
  std::string kind;
  std::string collection;  // empty: the whole store
  // The item ids concerned (first_id..last_id), where has_ids.
  bool has_ids = false;
  int64_t first_id = 0;
  int64_t last_id = 0;
  int64_t count = 0;   // items in the range that have the problem
  std::string detail;  // the first error, in words
};

// What verify checked in one collection.
struct VerifyCollection {
  std::string name;
  int64_t items = 0;             // live records
  uint64_t sequence = 0;         // the descriptor's sequence number
  bool index_present = false;    // an index file was found and loaded
  uint64_t index_sequence = 0;   // the sequence the index file covers
  int64_t index_ids = 0;         // ids in the index file
  int64_t index_tombstones = 0;  // of those, ids of removed items
};

struct VerifyReport {
  // Damage: something stored fails its check or disagrees with the records.
  std::vector<VerifyFinding> problems;
  // Harmless states that the next open repairs by itself (a missing index
  // file, an index behind the records).
  std::vector<VerifyFinding> notes;
  std::vector<VerifyCollection> collections;
  bool ok() const { return problems.empty(); }
};

class HEDGEDB_EXPORT DB {
 public:
  // Opens (or creates, per options) the database in directory `path`.
  static Status Open(const Options& options, const std::string& path, std::unique_ptr<DB>* db);

  DB() = default;
  DB(const DB&) = delete;
  DB& operator=(const DB&) = delete;
  // Flushes (see Flush), then closes.
  virtual ~DB() = default;

  virtual Status CreateCollection(const CollectionSpec& spec) = 0;
  // Removes the collection, its records and its index file.
  virtual Status DropCollection(const std::string& name) = 0;
  virtual Status ListCollections(std::vector<std::string>* names) = 0;
  virtual Status DescribeCollection(const std::string& name, CollectionSpec* spec) = 0;

  // Validates and writes one batch atomically and durably (see Options::sync),
  // then returns: the coarse index takes the batch in memory (or is trained,
  // later, at the first search or Flush that has enough items). On success
  // `ids` (if not null) receives the n ids written, in order, and `result` (if
  // not null) what else happened. On error nothing is written.
  virtual Status Ingest(const std::string& collection, const IngestBatch& batch,
                        std::vector<int64_t>* ids, IngestResult* result) = 0;
  Status Ingest(const std::string& collection, const IngestBatch& batch,
                std::vector<int64_t>* ids) {
    return Ingest(collection, batch, ids, nullptr);
  }

  // One Record per id (found = false for unknown ids).
  virtual Status Get(const std::string& collection, const int64_t* ids, size_t n,
                     std::vector<Record>* records) = 0;

  // The ids of the collection's live items, ascending (a consistent view:
  // writes that commit meanwhile are either all in it or all out).
  virtual Status ListIds(const std::string& collection, std::vector<int64_t>* ids) = 0;

  // Removes the items with these ids; unknown ids are an error (nothing is
  // removed). `removed` (if not null) receives the count removed.
  virtual Status Remove(const std::string& collection, const int64_t* ids, size_t n,
                        int64_t* removed) = 0;

  // Top-k search for each of the queries.n queries. Queries use the item layout
  // of the collection's kind, except codes collections, which take logp tables.
  virtual Status Search(const std::string& collection, const EmbeddingView& queries,
                        const SearchOptions& options, std::vector<SearchResult>* results) = 0;

  virtual Status GetStats(const std::string& collection, CollectionStats* stats) = 0;

  // Fits a map from options.score's raw score to P(same label) on labelled
  // pairs (docs/calibration.md), reports its quality before and after
  // (held out), and stores it durably with the collection, replacing an
  // earlier one of that score. From then on searches with that score fill
  // SearchHit::prob and accept SearchOptions::min_prob. Writes to the
  // collection wait while it runs. On error (no labels, one label, too few
  // pairs, bad queries) nothing is stored. `report` may be null.
  virtual Status Calibrate(const std::string& collection, const CalibrateOptions& options,
                           CalibrationReport* report) = 0;
  // Stores a map fitted elsewhere (FitCalibrationMap, or a model file's),
  // re-targeted to `base_rate` if it is in (0, 1) (0: keep the map's).
  virtual Status ImportCalibration(const std::string& collection, const std::string& map_bytes,
                                   double base_rate) = 0;
  // Deletes the calibration of a score (kDefault: the kind's default score).
  // NotFound if there is none.
  virtual Status RemoveCalibration(const std::string& collection, ScoreType score) = 0;

  // Brings every coarse index up to date with its records (training it once
  // it has enough items) and saves the index files that are behind.
  virtual Status Flush() = 0;

  // Options::read_only: brings this reader to the writer's latest
  // acknowledged state (collections created and dropped, items written and
  // removed, calibrations), in memory only; every batch whole or absent.
  // Other calls wait while it runs. A writable database is always current:
  // OK, nothing to do.
  virtual Status CatchUp() = 0;

  // Writes a consistent copy of the database into `dir`, which must not
  // exist or be empty (InvalidArgument otherwise; nothing is written), while
  // other threads keep using the database. The copy holds exactly the
  // batches acknowledged when the record store's checkpoint was taken, each
  // batch whole; its index files cover no write it lacks (index files are
  // copied before the checkpoint; one that would still not fit is left out
  // and rebuilt when the copy is opened). `result` (if not null) receives
  // what each collection of the copy holds.
  //
  // A reader (Options::read_only) first catches up (as CatchUp), then copies
  // its view key by key into a new store and checks the copy against it
  // (each collection's sequence number and record count): the copy holds
  // every batch the writer acknowledged before the call, and never links
  // the writer's files, which the writer may delete or rewrite meanwhile.
  virtual Status Backup(const std::string& dir, BackupResult* result) = 0;

  // Checks, without changing anything and without opening collections:
  // every record's and payload's checksum, the store's table file checksums,
  // each index file against the records (header, checksum, binding, covered
  // sequence, every covered live id present) and the stored calibration
  // maps. `collection` empty: all collections. Returns OK when the checks
  // ran; what they found is in `report` (report->ok()). Unknown collection:
  // NotFound.
  virtual Status Verify(const std::string& collection, VerifyReport* report) = 0;
};

// What RepairDB did for one collection.
struct RepairCollection {
  std::string name;
  // Records written back from the collection's arena snapshot: records that
  // were in a table RocksDB's repair set aside, or failed their checksum.
  int64_t restored = 0;
  // Records (and payloads) that were in a set-aside table and are nowhere
  // now: counted where the table could be read, and `possibly_lost` where a
  // part of it could not (how many were there is unknown).
  int64_t lost_records = 0;
  int64_t lost_payloads = 0;
  bool possibly_lost = false;
  std::string note;  // why the arena snapshot was not used, if it was not
};

struct RepairReport {
  // Files that RocksDB's repair moved to <db>/store/lost/ in this repair
  // (table files with an unreadable block; they stay there).
  std::vector<std::string> set_aside;
  std::vector<RepairCollection> collections;
  // Catalog entries (descriptors, batch tokens, calibration maps) of a
  // set-aside table that are nowhere now, or might be (an unread part).
  int64_t lost_catalog_entries = 0;
  bool catalog_possibly_lost = false;
  // Nothing readable was dropped: every key of every set-aside table is in
  // the repaired store, and no unread part of one may have held something.
  bool complete() const {
    if (lost_catalog_entries > 0 || catalog_possibly_lost) return false;
    for (const RepairCollection& c : collections) {
      if (c.lost_records > 0 || c.lost_payloads > 0 || c.possibly_lost) return false;
    }
    return true;
  }
};

// Repairs a database whose record store is damaged (a lost CURRENT or
// MANIFEST file, a table with a damaged block): RocksDB's repair salvages
// every readable table and log; a table with an unreadable block is set
// aside whole (<db>/store/lost/). Then each collection whose arena snapshot
// covers exactly its sequence number and agrees with every record that
// survived gets its missing (or damaged) records back from the snapshot;
// the set-aside tables are read block by block to count what is still
// missing (`report`). Index files and snapshots are deleted at the end: each
// collection is rebuilt from its records when next opened. The database
// must not be open. OK if the repair ran (report->complete() says whether
// anything is lost); the overload without a report returns Corruption when
// something is.
HEDGEDB_EXPORT Status RepairDB(const std::string& path, RepairReport* report);
HEDGEDB_EXPORT Status RepairDB(const std::string& path);

// DB::Verify on a database that is not open, opened read-only: writes
// nothing to the directory (no log, no index rebuild). Another process must
// not write to the database meanwhile.
HEDGEDB_EXPORT Status VerifyDB(const std::string& path, const std::string& collection,
                               VerifyReport* report);

}  // namespace hedgedb
