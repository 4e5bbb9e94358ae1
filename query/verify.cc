#include "query/verify.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "calibration/calibration_map.h"
#include "common/crc32c.h"
#include "common/row_layout.h"
#include "index/coarse_index.h"
#include "query/arena_file.h"
#include "query/row_arena.h"

namespace hedgedb {
namespace query {
namespace {

// Gathers the ids of one kind of problem met during an id-ordered pass into
// ranges: a run of neighbouring ids (in the pass's order) with the problem is
// one finding.
class RangeCollector {
 public:
  RangeCollector(std::vector<VerifyFinding>* out, std::string kind, std::string collection)
      : out_(out), kind_(std::move(kind)), collection_(std::move(collection)) {}

  void Visit(int64_t id, bool bad, const std::string& detail) {
    if (bad) {
      if (in_run_) {
        out_->back().last_id = id;
        ++out_->back().count;
      } else {
        VerifyFinding f;
        f.kind = kind_;
        f.collection = collection_;
        f.has_ids = true;
        f.first_id = f.last_id = id;
        f.count = 1;
        f.detail = detail;
        out_->push_back(std::move(f));
      }
    }
    in_run_ = bad;
  }

 private:
  std::vector<VerifyFinding>* out_;
  const std::string kind_, collection_;
  bool in_run_ = false;
};

void Add(std::vector<VerifyFinding>* out, const std::string& kind, const std::string& collection,
         const std::string& detail) {
  VerifyFinding f;
  f.kind = kind;
  f.collection = collection;
  f.detail = detail;
  out->push_back(std::move(f));
}

// The index file of one collection against its live records (id, sequence),
// in id order.
void VerifyIndexFile(const storage::CollectionMeta& meta, const index::CoarseIndex& idx,
                     uint64_t file_sequence, const std::vector<std::pair<int64_t, uint64_t>>& live,
                     VerifyCollection* summary, VerifyReport* report) {
  const std::string& name = meta.spec.name;
  std::vector<int64_t> ids;
  Status s = idx.Ids(&ids);
  if (!s.ok()) {
    Add(&report->notes, "index_ids_unlisted", name, s.ToString());
    return;
  }
  std::sort(ids.begin(), ids.end());
  summary->index_ids = int64_t(ids.size());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  // Every live item the file covers must be in it; items written after the
  // file are added when the database opens.
  RangeCollector missing(&report->problems, "index_missing_ids", name);
  int64_t live_in_index = 0;
  for (const auto& item : live) {
    const bool present = std::binary_search(ids.begin(), ids.end(), item.first);
    live_in_index += present ? 1 : 0;
    const bool covered = item.second <= file_sequence;
    missing.Visit(item.first, covered && !present,
                  "live items written at or before the index file's sequence " +
                      std::to_string(file_sequence) + " are not in it");
  }
  // The rest are removed items that searches filter out (tombstones).
  summary->index_tombstones = int64_t(ids.size()) - live_in_index;
}

// The arena snapshot: one that the next open would use must hold exactly
// the records (otherwise it would serve rows the store does not hold: a
// problem); one that it would not use is only a note (the open reads the
// records and writes it again).
template <typename Digests>
void VerifyArenaSnapshot(const std::string& db_path, const std::string& store_identity,
                         const storage::CollectionMeta& meta, const Digests& digests,
                         VerifyReport* report) {
  const std::string& name = meta.spec.name;
  const std::string path = ArenaFilePath(db_path, meta.id);
  const size_t row_bytes = ItemRowBytes(meta.spec);
  ArenaTables tables;
  RowArena arena(row_bytes);
  const Status loaded = LoadArenaSnapshot(path, IndexBinding(store_identity, meta), row_bytes,
                                          meta.spec.row_format, meta.sequence, &tables, &arena);
  if (!loaded.ok()) {
    // hedgedb writes a snapshot whole (a new file, renamed into place), so
    // one that is damaged (a checksum, its structure) was changed in place
    // from outside: a process that has it mapped may be serving the changed
    // rows (RowArena::CheckMapped). A stale one, or one of another
    // collection (a copied file), is only unused.
    const bool damaged = loaded.IsCorruption() &&
                         loaded.message().find("another collection") == std::string::npos &&
                         loaded.message().find("holds rows of") == std::string::npos;
    if (damaged) {
      Add(&report->problems, "arena_corrupt", name,
          loaded.ToString() +
              "; the file was changed in place: a process that has it open may serve the changed "
              "rows until it reopens (delete the file: the next open reads the records)");
    } else if (!IsMissingArenaSnapshot(loaded)) {
      Add(&report->notes, "arena_unused", name,
          loaded.ToString() + "; the next open reads the records and writes it again");
    }
    return;
  }
  std::string mismatch;
  if (tables.ids.size() != digests.size()) {
    mismatch = "it holds " + std::to_string(tables.ids.size()) + " items, the records " +
               std::to_string(digests.size());
  }
  for (size_t r = 0; r < tables.ids.size() && mismatch.empty(); ++r) {
    const auto it = digests.find(tables.ids[r]);
    const bool has_label = (tables.flags[r] & kArenaHasLabel) != 0;
    if (it == digests.end()) {
      mismatch = "item " + std::to_string(tables.ids[r]) + " has no record";
    } else if (it->second.row_crc != Crc32c(arena.row(int64_t(r)), row_bytes) ||
               it->second.has_label != has_label ||
               (has_label && it->second.label != tables.labels[r])) {
      mismatch = "item " + std::to_string(tables.ids[r]) + " differs from its record";
    }
  }
  if (!mismatch.empty()) {
    Add(&report->problems, "arena_mismatch", name,
        "arena snapshot " + path + " would be used but " + mismatch +
            " (delete the file: the next open reads the records)");
  }
}

Status VerifyCollectionAt(storage::RecordStore* store, const std::string& db_path,
                          const std::string& name, const LatestSequence& latest,
                          VerifyReport* report) {
  // Read the index file first, then take the snapshot: a file saved
  // meanwhile covers a sequence at or before the snapshot's.
  std::vector<storage::CollectionMeta> metas;
  HEDGEDB_RETURN_IF_ERROR(store->LoadCatalog(&metas, nullptr));
  auto found = std::find_if(metas.begin(), metas.end(),
                            [&](const storage::CollectionMeta& m) { return m.spec.name == name; });
  if (found == metas.end()) return Status::OK();  // dropped meanwhile
  const std::string path = IndexFilePath(db_path, found->id);
  std::unique_ptr<index::CoarseIndex> idx;
  uint64_t file_sequence = 0;
  const Status loaded = index::CoarseIndex::Load(
      found->spec, path, IndexBinding(store->identity(), *found), &idx, &file_sequence);

  const std::shared_ptr<const rocksdb::Snapshot> snapshot = store->Snapshot();
  HEDGEDB_RETURN_IF_ERROR(store->LoadCatalog(&metas, nullptr, snapshot.get()));
  found = std::find_if(metas.begin(), metas.end(),
                       [&](const storage::CollectionMeta& m) { return m.spec.name == name; });
  if (found == metas.end()) return Status::OK();
  const storage::CollectionMeta meta = *found;

  VerifyCollection summary;
  summary.name = name;
  summary.sequence = meta.sequence;
  std::vector<std::pair<int64_t, uint64_t>> live;  // id, sequence of its batch
  // What the arena snapshot must hold for each live record: CRC32C of its
  // row, and its label (has_label, label).
  struct RowDigest {
    uint32_t row_crc = 0;
    bool has_label = false;
    int64_t label = 0;
  };
  std::unordered_map<int64_t, RowDigest> digests;
  RangeCollector bad_records(&report->problems, "record_corrupt", name);
  RangeCollector ahead(&report->problems, "record_ahead", name);
  RangeCollector bad_payloads(&report->problems, "payload_corrupt", name);
  HEDGEDB_RETURN_IF_ERROR(store->ScanChecked(
      meta, snapshot.get(),
      [&](int64_t id, const Status& checked, const storage::StoredRecord& r) {
        bad_records.Visit(id, !checked.ok(), checked.ToString());
        const bool newer = checked.ok() && r.sequence > meta.sequence;
        ahead.Visit(id, newer,
                    "records written at sequence " + std::to_string(r.sequence) +
                        ", after the collection's " + std::to_string(meta.sequence));
        if (checked.ok()) {
          live.emplace_back(id, r.sequence);
          digests[id] = {Crc32c(r.row.data(), r.row.size()), r.has_label, r.label};
        }
      },
      [&](int64_t id, const Status& checked) {
        bad_payloads.Visit(id, !checked.ok(), checked.ToString());
      }));
  summary.items = int64_t(live.size());

  std::vector<std::pair<uint8_t, std::string>> maps;
  HEDGEDB_RETURN_IF_ERROR(store->LoadCalibrations(meta, &maps, snapshot.get()));
  for (const auto& kv : maps) {
    calibration::CalibrationMap map;
    Status s = calibration::CalibrationMap::Decode(kv.second, &map);
    if (s.ok() && uint8_t(map.score_type) != kv.first) {
      s = Status::Corruption("calibration map is stored under another score type");
    }
    if (!s.ok()) Add(&report->problems, "calibration_corrupt", name, s.ToString());
  }

  if (loaded.IsNotFound()) {
    Add(&report->notes, "index_missing", name,
        "no index file " + path + "; the next open rebuilds it from the records");
  } else if (!loaded.ok()) {
    // CoarseIndex::Load names a binding mismatch; every other failure is
    // damage to the file itself.
    const bool foreign = loaded.message().find("binding mismatch") != std::string::npos;
    Add(&report->problems, foreign ? "index_foreign" : "index_corrupt", name, loaded.ToString());
  } else {
    summary.index_present = true;
    summary.index_sequence = file_sequence;
    uint64_t now = 0;
    if (file_sequence > meta.sequence && latest && latest(name, &now).ok() &&
        now >= file_sequence) {
      Add(&report->notes, "index_newer_than_view", name,
          "index file covers sequence " + std::to_string(file_sequence) +
              ", saved by the running writer after this check read the records at sequence " +
              std::to_string(meta.sequence) + " (the store has " + std::to_string(now) +
              " now): not checked");
    } else if (file_sequence > meta.sequence) {
      Add(&report->problems, "index_ahead", name,
          "index file covers sequence " + std::to_string(file_sequence) + ", past the records' " +
              std::to_string(meta.sequence));
    } else if (!idx->is_trained()) {
      Add(&report->notes, "index_untrained", name,
          "the index file holds an untrained index; the next open rebuilds it");
    } else {
      if (file_sequence < meta.sequence) {
        Add(&report->notes, "index_behind", name,
            "index file covers sequence " + std::to_string(file_sequence) + " of " +
                std::to_string(meta.sequence) + "; the next open adds the later records");
      }
      VerifyIndexFile(meta, *idx, file_sequence, live, &summary, report);
    }
  }
  VerifyArenaSnapshot(db_path, store->identity(), meta, digests, report);
  report->collections.push_back(std::move(summary));
  return Status::OK();
}

}  // namespace

std::string IndexFilePath(const std::string& db_path, uint32_t collection_id) {
  return db_path + "/index/" + std::to_string(collection_id) + ".hidx";
}

uint64_t IndexBinding(const std::string& store_identity, const storage::CollectionMeta& meta) {
  // The spec as created: calibrate's refit of match_a/b changes scores, not
  // the rows or the index, so the files stay bound to the first values.
  CollectionSpec spec = meta.spec;
  if (meta.refitted) {
    spec.match_a = meta.created_match_a;
    spec.match_b = meta.created_match_b;
  }
  const std::string identity =
      store_identity + "/" + std::to_string(meta.id) + "/" + storage::SpecToJson(spec);
  const uint32_t lo = Crc32c(identity.data(), identity.size());
  const uint32_t hi = Crc32c(identity.data(), identity.size(), 0x9E3779B9u);
  return (uint64_t(hi) << 32) | lo;
}

Status VerifyStore(storage::RecordStore* store, const std::string& db_path,
                   const std::string& collection, VerifyReport* report,
                   const LatestSequence& latest) {
  *report = VerifyReport();
  std::vector<storage::CollectionMeta> metas;
  std::vector<storage::RecordStore::DamagedDescriptor> damaged;
  HEDGEDB_RETURN_IF_ERROR(store->LoadCatalog(&metas, &damaged));
  bool known = collection.empty();
  for (const auto& d : damaged) {
    if (!collection.empty() && d.name != collection) continue;
    known = true;
    Add(&report->problems, "descriptor_corrupt", d.name, d.status.ToString());
  }
  for (const auto& m : metas) known = known || m.spec.name == collection;
  if (!known) return Status::NotFound("no collection named '" + collection + "'");

  const Status files = store->VerifyFileChecksums();
  if (!files.ok()) Add(&report->problems, "store_checksum", "", files.ToString());

  std::set<std::string> index_files;  // index files and arena snapshots
  for (const auto& m : metas) {
    index_files.insert(std::to_string(m.id) + ".hidx");
    index_files.insert(std::to_string(m.id) + ".harena");
    if (!collection.empty() && m.spec.name != collection) continue;
    // A read that fails (RocksDB's checksum of a table block, an I/O
    // error) ends this collection's check, not the report.
    // Findings of the part that was read stay; its summary is not listed
    // (its counts would be partial).
    const Status s = VerifyCollectionAt(store, db_path, m.spec.name, latest, report);
    if (!s.ok()) {
      Add(&report->problems, "records_unreadable", m.spec.name,
          s.ToString() +
              " (the collection's records or payloads cannot all be read; the other "
              "collections were checked; 'hedgedb repair' salvages what is readable)");
    }
  }
  if (collection.empty() && damaged.empty()) {
    // Files of no collection (a drop that could not delete its file) are
    // never loaded: harmless, but worth knowing.
    std::error_code ec;
    for (std::filesystem::directory_iterator it(db_path + "/index", ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string file = it->path().filename().string();
      if (file.size() > 5 && file.compare(file.size() - 5, 5, ".hidx") == 0 &&
          !index_files.count(file)) {
        Add(&report->notes, "index_orphan", "", "index file " + file + " belongs to no collection");
      }
      if (file.size() > 7 && file.compare(file.size() - 7, 7, ".harena") == 0 &&
          !index_files.count(file)) {
        Add(&report->notes, "arena_orphan", "",
            "arena snapshot " + file + " belongs to no collection");
      }
    }
  }
  return Status::OK();
}

}  // namespace query
}  // namespace hedgedb
