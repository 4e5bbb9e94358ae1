// DB::Backup (query/backup.h): index files first, then a checkpoint of the
// record store (or a reader's view copied key by key), then a check of the
// copy as it will be opened.
#include "query/backup.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "common/file_util.h"
#include "index/coarse_index.h"
#include "query/verify.h"

namespace hedgedb {
namespace query {
namespace {

// Copies the index files, then checkpoints the store, then checks the
// copy (`dir` exists and is empty). *complete: the copy was written (an
// error then only reports damage the database already had).
Status BackupInto(BackupSource* db, const std::string& dir, BackupResult* result, bool* complete) {
  storage::RecordStore* const store = db->record_store();
  // Save what the indexes hold, so that the copy opens without catching
  // up; a failure only makes the copied files older, never wrong.
  (void)db->SaveIndexes();
  HEDGEDB_RETURN_IF_ERROR(MakeDir(dir + "/index"));
  const std::vector<storage::CollectionMeta> metas = db->IntactCollections();
  // Index files before the checkpoint: sequence numbers only grow, so each
  // copied file covers no write the checkpoint lacks.
  for (const auto& meta : metas) {
    std::string bytes;
    const Status read = ReadWholeFile(IndexFilePath(db->db_path(), meta.id), &bytes);
    if (read.IsNotFound()) continue;  // never saved, or dropped meanwhile
    HEDGEDB_RETURN_IF_ERROR(read);
    HEDGEDB_RETURN_IF_ERROR(WriteFileAtomically(IndexFilePath(dir, meta.id), {bytes}));
  }
  std::string copy_identity;
  // A reader's copy: its own view, caught up first (so it holds every
  // batch acknowledged before the call) and copied key by key
  // (RecordStore::CopyView). RocksDB's checkpoint of a reader would link
  // and copy the writer's current files by name, which the writer may
  // have rewritten since the view was read (a log written into a table
  // and deleted): a copy without those batches, or a failed one.
  std::map<uint32_t, int64_t> view_records;
  std::vector<storage::CollectionMeta> view_metas;
  if (db->is_reader()) {
    HEDGEDB_RETURN_IF_ERROR(db->CatchUpView());
    auto view = db->ReadView();
    HEDGEDB_RETURN_IF_ERROR(store->LoadCatalog(&view_metas, nullptr));
    HEDGEDB_RETURN_IF_ERROR(store->CopyView(dir + "/store", &copy_identity, &view_records));
  } else {
    HEDGEDB_RETURN_IF_ERROR(store->Checkpoint(dir + "/store", &copy_identity));
  }
  // The copy has its own identity: bind the copied files to it. A file
  // that does not load (damaged here already) is left out and rebuilt.
  for (const auto& meta : metas) {
    const std::string copied = IndexFilePath(dir, meta.id);
    std::unique_ptr<index::CoarseIndex> idx;
    uint64_t sequence = 0;
    std::string upkeep;  // the copy keeps the index's upkeep history
    const Status loaded = index::CoarseIndex::Load(
        meta.spec, copied, IndexBinding(store->identity(), meta), &idx, &sequence, &upkeep);
    if (loaded.IsNotFound()) continue;
    if (!loaded.ok() ||
        !idx->Save(copied, sequence, IndexBinding(copy_identity, meta), upkeep).ok()) {
      std::remove(copied.c_str());
    }
  }

  // Check the copy as it will be opened. An index file that does not fit
  // its records there (none should) is removed: the copy rebuilds it.
  storage::StoreOptions so;
  so.create_if_missing = false;
  so.read_only = true;
  std::unique_ptr<storage::RecordStore> copy;
  HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Open(so, dir + "/store", &copy));
  VerifyReport report;
  HEDGEDB_RETURN_IF_ERROR(VerifyStore(copy.get(), dir, "", &report));
  std::vector<std::string> damaged;
  for (const VerifyFinding& f : report.problems) {
    if (f.kind.compare(0, 6, "index_") != 0) {
      damaged.push_back(f.kind + " in '" + f.collection + "': " + f.detail);
      continue;
    }
    std::vector<storage::CollectionMeta> metas;
    HEDGEDB_RETURN_IF_ERROR(copy->LoadCatalog(&metas, nullptr));
    for (const auto& m : metas) {
      if (m.spec.name == f.collection) std::remove(IndexFilePath(dir, m.id).c_str());
    }
    for (VerifyCollection& c : report.collections) {
      if (c.name == f.collection) c.index_present = false;
    }
  }
  if (db->is_reader() && damaged.empty()) {
    // The copy must hold the view exactly: each collection with its
    // sequence number and every record (damaged records are reported
    // below instead).
    for (const auto& m : view_metas) {
      auto c = std::find_if(report.collections.begin(), report.collections.end(),
                            [&](const VerifyCollection& v) { return v.name == m.spec.name; });
      const int64_t want = view_records.count(m.id) ? view_records.at(m.id) : 0;
      if (c == report.collections.end() || c->sequence != m.sequence || c->items != want) {
        return Status::IOError("the copy in " + dir + " does not hold collection '" + m.spec.name +
                               "' as the reader saw it (sequence " + std::to_string(m.sequence) +
                               ", " + std::to_string(want) + " records; the copy: " +
                               (c == report.collections.end()
                                    ? std::string("none")
                                    : "sequence " + std::to_string(c->sequence) + ", " +
                                          std::to_string(c->items) + " items") +
                               "); nothing was kept");
      }
    }
  }
  if (result) {
    result->collections.clear();
    for (const VerifyCollection& c : report.collections) {
      result->collections.push_back({c.name, c.items, c.sequence, c.index_present});
    }
  }
  *complete = true;
  if (!damaged.empty()) {
    return Status::Corruption("the copy in " + dir + " was written, but the database holds " +
                              "damaged data (run verify): " + damaged.front());
  }
  return Status::OK();
}

}  // namespace

Status Backup(BackupSource* db, const std::string& dir, BackupResult* result) {
  if (dir.empty()) return Status::InvalidArgument("empty backup directory");
  std::error_code ec;
  const bool existed = std::filesystem::exists(dir, ec);
  if (existed) {
    if (!std::filesystem::is_directory(dir, ec)) {
      return Status::InvalidArgument("backup target " + dir + " exists and is not a directory");
    }
    if (!std::filesystem::is_empty(dir, ec)) {
      return Status::InvalidArgument("backup directory " + dir +
                                     " is not empty; give a new or empty directory");
    }
  } else {
    HEDGEDB_RETURN_IF_ERROR(MakeDir(dir));
  }
  bool complete = false;
  const Status s = BackupInto(db, dir, result, &complete);
  if (!s.ok() && !complete) {
    // Leave no half copy behind; the directory held nothing of the user's.
    std::vector<std::filesystem::path> written;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      written.push_back(it->path());
    }
    for (const auto& p : written) {
      std::error_code removed;
      std::filesystem::remove_all(p, removed);
    }
    if (!existed) std::filesystem::remove(dir, ec);
  }
  return s;
}

}  // namespace query
}  // namespace hedgedb
