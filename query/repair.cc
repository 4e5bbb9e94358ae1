// RepairDB: RocksDB's repair of the record store, then what hedgedb's own
// files can give back. RocksDB 7.8's repair sets a table file aside whole
// (<store>/lost/) when one of its blocks fails its checksum, so one flipped
// byte in a large table would drop every record in it. The arena snapshot of
// a collection (<id>.harena, checksummed) holds every live row, label and
// batch sequence number as of one collection sequence number: when that is
// still the collection's sequence number and the snapshot agrees with every
// record that survived, the records it holds and the store lacks are the
// ones the set-aside tables took, and they are written back. The set-aside
// tables are then read as far as they can be, to count what is still gone.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/file_util.h"
#include "common/row_layout.h"
#include "hedgedb/db.h"
#include "query/arena_file.h"
#include "query/row_arena.h"
#include "query/verify.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace {

namespace fs = std::filesystem;

std::set<std::string> FilesIn(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.insert(it->path().filename().string());
  }
  return names;
}

// Moves <db>/index aside (to `aside`) so that nothing in index/ describes
// records the repair may drop, should it stop halfway; an earlier repair
// that stopped left its files there already (the older ones: kept).
Status SetIndexFilesAside(const std::string& path, const std::string& aside) {
  std::error_code ec;
  const std::string index = path + "/index";
  if (fs::exists(aside, ec)) {
    fs::remove_all(index, ec);
  } else if (fs::exists(index, ec)) {
    fs::rename(index, aside, ec);
  }
  if (ec) return Status::IOError("cannot move " + index + " aside: " + ec.message());
  fs::create_directory(index, ec);
  if (ec) return Status::IOError("cannot create " + index + ": " + ec.message());
  return Status::OK();
}

// Restores the records of `meta` from its arena snapshot in `aside` if the
// snapshot covers exactly meta.sequence and agrees with every record that
// survived. *complete: the collection's records are then exactly the
// snapshot's.
Status RestoreFromSnapshot(storage::RecordStore* store, const std::string& identity,
                           const std::string& aside, const storage::CollectionMeta& meta,
                           RepairCollection* out, bool* complete) {
  *complete = false;
  const size_t row_bytes = ItemRowBytes(meta.spec);
  const std::string file = aside + "/" + std::to_string(meta.id) + ".harena";
  query::ArenaTables tables;
  query::RowArena arena(row_bytes);
  const Status loaded =
      query::LoadArenaSnapshot(file, query::IndexBinding(identity, meta), row_bytes,
                               meta.spec.row_format, meta.sequence, &tables, &arena);
  if (!loaded.ok()) {
    out->note = query::IsMissingArenaSnapshot(loaded)
                    ? "no arena snapshot"
                    : "arena snapshot not used: " + loaded.ToString();
    return Status::OK();
  }
  std::unordered_map<int64_t, size_t> row_of_id;
  for (size_t r = 0; r < tables.ids.size(); ++r) row_of_id[tables.ids[r]] = r;
  std::vector<uint8_t> survived(tables.ids.size(), 0);
  std::string disagreement;
  const Status scanned = store->ScanChecked(
      meta, nullptr,
      [&](int64_t id, const Status& checked, const storage::StoredRecord& record) {
        if (!checked.ok() || !disagreement.empty()) return;  // a damaged one is restored
        auto it = row_of_id.find(id);
        if (it == row_of_id.end()) {
          disagreement = "item " + std::to_string(id) + " is not in it";
          return;
        }
        const size_t r = it->second;
        const bool has_label = (tables.flags[r] & query::kArenaHasLabel) != 0;
        if (tables.sequences[r] != record.sequence || has_label != record.has_label ||
            (has_label && tables.labels[r] != record.label) ||
            record.row.compare(0, row_bytes, reinterpret_cast<const char*>(arena.row(int64_t(r))),
                               row_bytes) != 0) {
          disagreement = "item " + std::to_string(id) + " differs from its record";
          return;
        }
        survived[r] = 1;
      },
      [](int64_t, const Status&) {});
  if (!scanned.ok()) {
    out->note = "arena snapshot not used: the records cannot be read: " + scanned.ToString();
    return Status::OK();
  }
  if (!disagreement.empty()) {
    out->note = "arena snapshot not used: it disagrees with the records that survived (" +
                disagreement + ")";
    return Status::OK();
  }
  std::vector<storage::StoredRecord> restore;
  for (size_t r = 0; r < tables.ids.size(); ++r) {
    if (survived[r]) continue;
    storage::StoredRecord rec;
    rec.id = tables.ids[r];
    rec.sequence = tables.sequences[r];
    rec.has_label = (tables.flags[r] & query::kArenaHasLabel) != 0;
    rec.label = tables.labels[r];
    rec.row.assign(reinterpret_cast<const char*>(arena.row(int64_t(r))), row_bytes);
    restore.push_back(std::move(rec));
  }
  HEDGEDB_RETURN_IF_ERROR(store->RestoreRecords(meta, restore));
  out->restored = int64_t(restore.size());
  *complete = true;
  return Status::OK();
}

}  // namespace

Status RepairDB(const std::string& path, RepairReport* report) {
  *report = RepairReport();
  std::error_code ec;
  // A store missing while a finished repaired copy waits beside it: a
  // repair was interrupted while swapping them (RecordStore::Repair).
  if (!fs::is_directory(path + "/store", ec) &&
      !fs::exists(path + "/store.repair-new/REPAIRED", ec)) {
    return Status::NotFound("no database at " + path);
  }
  const std::string store_path = path + "/store";
  const std::string aside = path + "/index.repair";
  HEDGEDB_RETURN_IF_ERROR(SetIndexFilesAside(path, aside));
  // The snapshots are bound to the store's identity as it was: RocksDB's
  // repair gives the store a new one.
  std::string identity;
  if (ReadWholeFile(store_path + "/IDENTITY", &identity, 1 << 16).ok()) {
    while (!identity.empty() && (identity.back() == '\n' || identity.back() == '\r')) {
      identity.pop_back();
    }
  }
  const std::set<std::string> lost_before = FilesIn(store_path + "/lost");
  HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Repair(store_path));
  for (const std::string& name : FilesIn(store_path + "/lost")) {
    if (!lost_before.count(name) && name.size() > 4 &&
        name.compare(name.size() - 4, 4, ".sst") == 0) {
      report->set_aside.push_back(store_path + "/lost/" + name);
    }
  }

  storage::StoreOptions so;
  so.create_if_missing = false;
  std::unique_ptr<storage::RecordStore> store;
  HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Open(so, store_path, &store));
  std::vector<storage::CollectionMeta> metas;
  std::vector<storage::RecordStore::DamagedDescriptor> damaged;
  HEDGEDB_RETURN_IF_ERROR(store->LoadCatalog(&metas, &damaged));
  // Collections whose records are exactly their snapshot's now.
  std::set<uint32_t> complete;
  std::unordered_map<uint32_t, size_t> entry_of;  // collection id -> report entry
  for (const auto& meta : metas) {
    RepairCollection c;
    c.name = meta.spec.name;
    bool whole = false;
    HEDGEDB_RETURN_IF_ERROR(RestoreFromSnapshot(store.get(), identity, aside, meta, &c, &whole));
    if (whole) complete.insert(meta.id);
    entry_of[meta.id] = report->collections.size();
    report->collections.push_back(std::move(c));
  }

  // What the set-aside tables held that the store still lacks.
  for (const std::string& file : report->set_aside) {
    storage::RecordStore::SetAsideTable table;
    HEDGEDB_RETURN_IF_ERROR(store->ReadSetAsideTable(file, &table));
    const bool records = table.family == "records";
    const bool items = records || table.family == "payload";
    for (const auto& kv : table.missing_items) {
      auto e = entry_of.find(kv.first);
      if (e == entry_of.end()) continue;  // a collection dropped before
      RepairCollection& c = report->collections[e->second];
      // A complete collection lacks no record; its payloads of items that
      // are gone (removed or replaced since) are not lost either.
      if (records && complete.count(kv.first)) continue;
      int64_t lost = int64_t(kv.second.size());
      if (!records && complete.count(kv.first)) {
        const storage::CollectionMeta& meta = metas[e->second];
        lost = 0;
        for (int64_t id : kv.second) {
          storage::StoredRecord r;
          bool found = false;
          if (store->GetRecord(meta, id, &r, &found).ok() && found) ++lost;
        }
      }
      (records ? c.lost_records : c.lost_payloads) += lost;
    }
    if (!items) report->lost_catalog_entries += table.missing_other;
    if (table.whole) continue;
    if (!items) {
      report->catalog_possibly_lost = true;
      continue;
    }
    for (const auto& meta : metas) {
      if (meta.id < table.gap_first_collection || meta.id > table.gap_last_collection) continue;
      if (records && complete.count(meta.id)) continue;
      report->collections[entry_of[meta.id]].possibly_lost = true;
    }
  }
  store.reset();
  // The index files and snapshots go: each collection is rebuilt from its
  // records when next opened.
  fs::remove_all(aside, ec);
  if (ec) return Status::IOError("cannot delete " + aside + ": " + ec.message());
  return Status::OK();
}

Status RepairDB(const std::string& path) {
  RepairReport report;
  HEDGEDB_RETURN_IF_ERROR(RepairDB(path, &report));
  if (report.complete()) return Status::OK();
  return Status::Corruption("repair of " + path +
                            " could not recover everything: damaged table files are kept in " +
                            path + "/store/lost/");
}

}  // namespace hedgedb
