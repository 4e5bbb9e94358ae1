#include "query/collection.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/crc32c.h"
#include "common/row_layout.h"
#include "common/spec_limits.h"
#include "index/coarse_index.h"
#include "index/factory_rules.h"
#include "query/arena_file.h"
#include "query/row_checks.h"
#include "query/scorer.h"

namespace hedgedb {
namespace query {
namespace {

// Every write advances the descriptor's sequence in the same batch as its
// records: a record past it is damage.
Status CheckNotNewer(const storage::StoredRecord& r, const storage::CollectionMeta& meta) {
  if (r.sequence <= meta.sequence) return Status::OK();
  return Status::Corruption("record of item " + std::to_string(r.id) +
                            " is newer than its collection's descriptor");
}

}  // namespace

Status ValidateSpec(const CollectionSpec& s, bool exercise_index) {
  // The first character may not be '.' or '-': no "." or "..", no hidden
  // names, nothing a command line reads as a flag.
  static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
  if (!std::regex_match(s.name, kName)) {
    return Status::InvalidArgument("collection name '" + s.name +
                                   "' must be 1-128 characters of A-Z a-z 0-9 _ . - starting "
                                   "with a letter, digit or _");
  }
  if (s.dim < 1 || s.dim > kMaxDim) {
    return Status::InvalidArgument("dim must be in [1, " + std::to_string(kMaxDim) + "], got " +
                                   std::to_string(s.dim));
  }
  if (s.kind == Kind::kMog) {
    if (s.components < 1 || s.components > kMaxComponents) {
      return Status::InvalidArgument("components must be in [1, " + std::to_string(kMaxComponents) +
                                     "] for mog, got " + std::to_string(s.components));
    }
  } else if (s.components != 1) {
    return Status::InvalidArgument("components applies to mog collections only");
  }
  if (s.kind == Kind::kCodes) {
    if (s.code_k < 2 || s.code_k > kMaxCodeAlphabet) {
      return Status::InvalidArgument("code-k must be in [2, " + std::to_string(kMaxCodeAlphabet) +
                                     "] for codes, got " + std::to_string(s.code_k));
    }
  } else if (s.code_k != 0) {
    return Status::InvalidArgument("code-k applies to codes collections only");
  }
  if (s.row_format != RowFormat::kFloat32 && s.row_format != RowFormat::kFloat16 &&
      s.row_format != RowFormat::kBfloat16) {
    return Status::InvalidArgument("unknown row format " + std::to_string(int(s.row_format)));
  }
  // Codes are bytes: a compact format would say something untrue of them.
  if (s.kind == Kind::kCodes && s.row_format != RowFormat::kFloat32) {
    return Status::InvalidArgument(std::string("row format ") + RowFormatName(s.row_format) +
                                   " applies to point, gaussian and mog collections only (codes "
                                   "are stored as bytes)");
  }
  if (!(s.match_a > 0) || !std::isfinite(s.match_a)) {
    return Status::InvalidArgument("match-a must be finite and > 0, got " +
                                   std::to_string(s.match_a));
  }
  if (!std::isfinite(s.match_b)) return Status::InvalidArgument("match-b must be finite");
  if (s.metadata.size() > kMaxCollectionMetadata) {
    return Status::InvalidArgument("metadata must be at most " +
                                   std::to_string(kMaxCollectionMetadata) + " bytes, got " +
                                   std::to_string(s.metadata.size()));
  }
  // The descriptor is JSON, which holds UTF-8 text only.
  try {
    (void)nlohmann::json(s.metadata).dump();
  } catch (const nlohmann::json::exception&) {
    return Status::InvalidArgument("metadata must be UTF-8 text");
  }
  if (s.samples < 1 || s.samples > 4096) {
    return Status::InvalidArgument("samples must be in [1, 4096], got " +
                                   std::to_string(s.samples));
  }
  if (s.kind == Kind::kMog && s.samples % s.components != 0) {
    return Status::InvalidArgument("samples (" + std::to_string(s.samples) +
                                   ") must be a multiple of components (" +
                                   std::to_string(s.components) + ") for stratified sampling");
  }
  if (exercise_index) return index::CoarseIndex::Validate(s);
  index::FactoryShape shape;  // the grammar only: nothing FAISS could abort on
  return index::CheckFactoryString(s, index::CoarseIndex::FactoryFor(s), &shape);
}

Collection::Collection(storage::RecordStore* store, const storage::CollectionMeta& meta,
                       std::string index_path, std::string arena_path, uint64_t index_binding,
                       int64_t index_save_interval, const UpkeepPolicy& upkeep)
    : store_(store),
      meta_(meta),
      arena_path_(std::move(arena_path)),
      index_binding_(index_binding),
      row_bytes_(ItemRowBytes(meta.spec)),
      table_(row_bytes_, meta.spec.row_format),
      keeper_(&meta_, &table_, std::move(index_path), index_binding, index_save_interval),
      upkeep_(upkeep) {}

Collection::~Collection() {
  {
    std::lock_guard<std::mutex> guard(upkeep_mutex_);
    upkeep_stop_ = true;
  }
  upkeep_cv_.notify_all();
  if (upkeep_thread_.joinable()) upkeep_thread_.join();
}

namespace {
std::function<void(const char*)>& UpkeepHook() {
  static std::function<void(const char*)> hook;
  return hook;
}
void AtUpkeepStep(const char* step) {
  if (UpkeepHook()) UpkeepHook()(step);
}
}  // namespace

void Collection::SetUpkeepHookForTest(std::function<void(const char*)> hook) {
  UpkeepHook() = std::move(hook);
}

void Collection::UpkeepIfDue() {
  if (!(upkeep_.recheck_fraction > 0) || read_only_) return;
  {
    std::shared_lock<RwMutex> lock(state_mutex_);
    if (!keeper_.CheckDue(upkeep_)) return;
  }
  if (upkeep_.run_inline) {
    RunUpkeep();
    return;
  }
  std::lock_guard<std::mutex> guard(upkeep_mutex_);
  if (upkeep_stop_) return;
  upkeep_wanted_ = true;
  if (!upkeep_thread_.joinable()) upkeep_thread_ = std::thread([this] { UpkeepLoop(); });
  upkeep_cv_.notify_one();
}

void Collection::UpkeepLoop() {
  // The database's thread count applies to this thread's FAISS work too.
  if (upkeep_.threads > 0) omp_set_num_threads(upkeep_.threads);
  std::unique_lock<std::mutex> guard(upkeep_mutex_);
  while (true) {
    upkeep_cv_.wait(guard, [&] { return upkeep_stop_ || upkeep_wanted_; });
    if (upkeep_stop_) return;
    upkeep_wanted_ = false;
    guard.unlock();
    RunUpkeep();
    guard.lock();
  }
}

void Collection::RunUpkeep() {
  std::lock_guard<std::mutex> one(upkeep_run_mutex_);
  std::vector<uint8_t> rows;
  std::vector<int64_t> ids, live_rows;  // live_rows[i]: the row of ids[i]
  int64_t end_row = 0;                  // rows [0, end_row) are accounted for
  UpkeepCheck check;
  CollectionSpec spec;
  Status s;
  {
    // Writes wait on write_mutex_ while the check reads the rows and the
    // index, not on the state lock: a writer queued there (the lock prefers
    // writers) would stall every search behind it until the check is done.
    std::lock_guard<std::mutex> write_lock(write_mutex_);
    if (dropped_) return;
    std::shared_lock<RwMutex> lock(state_mutex_);
    if (UpkeepStopping() || !keeper_.CheckDue(upkeep_)) return;
    table_.GatherLive(&rows, &ids, 0);
    live_rows = table_.live_rows();
    end_row = table_.rows();
    spec = meta_.spec;
    s = keeper_.Measure(rows, ids, upkeep_, &check);
  }
  AtUpkeepStep("measured");
  if (!s.ok() || !check.retrain) {
    std::unique_lock<RwMutex> lock(state_mutex_);
    if (s.ok()) {
      keeper_.RecordCheck(check);
    } else {
      keeper_.NoteCheckFailed(check, s.ToString());
    }
    return;
  }
  {
    std::unique_lock<RwMutex> lock(state_mutex_);
    if (check.retuned_knob > 0) keeper_.ApplyRetune(check);  // recall holds meanwhile
    keeper_.SetRetraining(true);
  }
  AtUpkeepStep("retraining");
  // No lock: searches and writes go on against the old index. (A close that
  // comes during the training waits for it: FAISS's k-means has no stop.)
  std::unique_ptr<index::CoarseIndex> fresh;
  if (UpkeepStopping()) s = Status::Internal("the collection was closed");
  if (s.ok()) s = IndexKeeper::BuildIndex(spec, rows, ids, &fresh);
  // The baseline of the lists' balance is what k-means left on the items it
  // clustered: under fast churn the writes caught up below may already have
  // moved the data on, which is growth the next check should see.
  if (s.ok()) check.trained_imbalance = fresh->ListImbalance();
  std::vector<uint8_t>().swap(rows);
  AtUpkeepStep("trained");
  // The new index misses what happened since the rows were gathered: the
  // ids of gathered rows that died since leave it (first: an id written
  // again has a new row past end_row), then the live rows past end_row join.
  auto catch_up = [&]() -> Status {
    std::vector<int64_t> dead, kept_rows, kept_ids;
    kept_rows.reserve(live_rows.size());
    kept_ids.reserve(ids.size());
    for (size_t i = 0; i < live_rows.size(); ++i) {
      if (table_.flags()[size_t(live_rows[i])] & kRowLive) {
        kept_rows.push_back(live_rows[i]);
        kept_ids.push_back(ids[i]);
      } else {
        dead.push_back(ids[i]);
      }
    }
    bool physical = false;
    if (!dead.empty()) {
      HEDGEDB_RETURN_IF_ERROR(fresh->Remove(dead.data(), int64_t(dead.size()), &physical));
      if (!physical) return Status::Internal("the new index cannot remove items");
    }
    std::vector<uint8_t> new_rows;
    std::vector<int64_t> new_ids;
    table_.GatherLive(&new_rows, &new_ids, end_row);
    HEDGEDB_RETURN_IF_ERROR(fresh->Add(new_rows.data(), int64_t(new_ids.size()), new_ids.data()));
    const auto& live = table_.live_rows();
    for (auto it = std::lower_bound(live.begin(), live.end(), end_row); it != live.end(); ++it) {
      kept_rows.push_back(*it);
      kept_ids.push_back(table_.ids()[size_t(*it)]);
    }
    live_rows.swap(kept_rows);
    ids.swap(kept_ids);
    end_row = table_.rows();
    return Status::OK();
  };
  if (s.ok() && !UpkeepStopping()) {
    // The bulk of what came meanwhile (writes wait, as for the check).
    std::lock_guard<std::mutex> write_lock(write_mutex_);
    std::shared_lock<RwMutex> lock(state_mutex_);
    s = catch_up();
  }
  AtUpkeepStep("caught-up");
  bool adopted = false;
  if (s.ok() && !UpkeepStopping()) {
    // Writes wait from here: the new index takes the rest, its file is
    // written at the sequence it then covers, and it replaces the old one.
    std::unique_lock<std::mutex> write_lock(write_mutex_);
    if (dropped_ || UpkeepStopping()) {
      s = Status::Internal("the collection was closed or dropped");
    } else {
      std::shared_lock<RwMutex> shared(state_mutex_);
      if (keeper_.stale()) s = Status::Internal("the index went stale meanwhile");
      if (s.ok()) s = catch_up();
      bool saved = false;
      if (s.ok()) {
        AtUpkeepStep("saving");
        saved = keeper_.SaveIndex(*fresh, check).ok();
      }
      shared.unlock();
      if (s.ok()) {
        std::unique_lock<RwMutex> lock(state_mutex_);
        keeper_.AdoptIndex(&fresh, saved, check);
        keeper_.SetRetraining(false);
        adopted = true;
      }
    }
  }
  if (!adopted) {
    if (s.ok()) s = Status::Internal("the collection is closing");
    std::unique_lock<RwMutex> lock(state_mutex_);
    keeper_.SetRetraining(false);
    keeper_.RecordCheck(check, s.message());
  }
  fresh.reset();  // the old index (or the abandoned new one), freed outside the locks
  AtUpkeepStep(adopted ? "adopted" : "abandoned");
}

Status Collection::LoadRowsLocked(bool* from_snapshot) {
  *from_snapshot = false;
  Status s = table_.LoadSnapshot(arena_path_, index_binding_, meta_.sequence, meta_.max_id);
  if (s.ok()) {
    arena_sequence_ = meta_.sequence;
    arena_source_ = "snapshot";
    *from_snapshot = true;
    return Status::OK();
  }
  // No snapshot, or one that is stale or damaged: the records are the truth.
  if (!IsMissingArenaSnapshot(s)) {
    arena_note_ = "read from the records: " + s.ToString();
    // A writer deletes it: should writing the new one fail, a later open
    // must not meet the old one again once the sequence numbers match it.
    if (!read_only_) std::remove(arena_path_.c_str());
  }
  arena_source_ = "records";
  return store_->Scan(meta_, [&](const storage::StoredRecord& r) {
    HEDGEDB_RETURN_IF_ERROR(CheckNotNewer(r, meta_));
    table_.Append(r.id, r.has_label, r.label, reinterpret_cast<const uint8_t*>(r.row.data()),
                  r.sequence);
    return Status::OK();
  });
}

Status Collection::Open() {
  std::unique_lock<std::mutex> write_lock(write_mutex_);
  std::unique_lock<RwMutex> lock(state_mutex_);
  bool from_snapshot = false;
  HEDGEDB_RETURN_IF_ERROR(LoadRowsLocked(&from_snapshot));
  HEDGEDB_RETURN_IF_ERROR(LoadCalibrationsLocked());
  HEDGEDB_RETURN_IF_ERROR(keeper_.Open());
  if (!from_snapshot && !read_only_) NoteArenaWritten(WriteArenaLocked());
  return Status::OK();
}

Status Collection::WriteArenaLocked() const {
  return table_.WriteSnapshot(arena_path_, meta_.sequence, index_binding_);
}

void Collection::NoteArenaWritten(const Status& written) {
  if (written.ok()) {
    arena_sequence_ = meta_.sequence;
  } else {
    arena_note_ = "arena snapshot not saved: " + written.ToString();
    // What is on disk is behind the records from now on: never leave it for
    // a later open whose sequence number it might match.
    std::remove(arena_path_.c_str());
    arena_sequence_ = 0;
  }
}

void Collection::MarkDropped() {
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  dropped_ = true;
}

Status Collection::SaveIndex() {
  std::unique_lock<std::mutex> write_lock(write_mutex_);
  if (dropped_) return Status::OK();
  std::unique_lock<RwMutex> lock(state_mutex_);
  if (!keeper_.trained()) {
    Status s = keeper_.Train();
    (void)s;  // a failure marks the index stale: it is not saved below
  }
  Status s;
  if (keeper_.saved_sequence() != meta_.sequence || keeper_.upkeep_unsaved()) s = keeper_.Save();
  if (arena_sequence_ != meta_.sequence && !read_only_) {
    // Searches go on while the rows are written (write_mutex_ keeps them as
    // they are); the outcome is noted under the exclusive lock again.
    lock.unlock();
    Status written;
    {
      std::shared_lock<RwMutex> shared(state_mutex_);
      written = WriteArenaLocked();
    }
    lock.lock();
    NoteArenaWritten(written);
    // Rows that changed under the mapping were served: say so to the
    // caller (Flush), not only in the stats.
    if (s.ok() && written.IsCorruption()) s = written;
  }
  return s;
}

Status Collection::TrainIfDue() {
  {
    std::shared_lock<RwMutex> lock(state_mutex_);
    if (!keeper_.TrainDue()) return Status::OK();
  }
  std::unique_lock<std::mutex> write_lock(write_mutex_);
  if (dropped_) return Status::OK();
  std::unique_lock<RwMutex> lock(state_mutex_);
  Status s = keeper_.Train();
  (void)s;  // a failure marks the index stale: searches stay exhaustive and correct
  return Status::OK();
}

Status Collection::ValidateItems(const IngestBatch& b) const {
  HEDGEDB_RETURN_IF_ERROR(CheckItemRows(RowShapeOf(meta_.spec), b.data));
  const size_t n = size_t(b.data.n);
  // Strictly ascending ids (the common case) are distinct without a set.
  size_t ascending = b.ids && n > 0 ? 1 : n;
  while (ascending < n && b.ids[ascending - 1] < b.ids[ascending]) ++ascending;
  if (ascending < n) {
    std::unordered_set<int64_t> seen;
    seen.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (!seen.insert(b.ids[i]).second) {
        return Status::InvalidArgument("id " + std::to_string(b.ids[i]) +
                                       " appears more than once in the batch");
      }
    }
  }
  return Status::OK();
}

void Collection::PackItemRow(const EmbeddingView& v, int64_t i, uint8_t* row) const {
  ::hedgedb::PackItemRow(RowShapeOf(meta_.spec), v, i, row);
}

Status Collection::FindReplay(const IngestBatch& batch, uint32_t content_crc,
                              std::vector<int64_t>* ids, IngestResult* result) {
  storage::BatchToken seen;
  bool found = false;
  HEDGEDB_RETURN_IF_ERROR(store_->GetBatchToken(meta_, batch.token, &seen, &found));
  if (!found) return Status::NotFound("new token");
  if (seen.count != batch.data.n || seen.explicit_ids != (batch.ids != nullptr) ||
      seen.content_crc != content_crc) {
    return Status::InvalidArgument("batch token '" + batch.token +
                                   "' was already used for a different batch (sequence " +
                                   std::to_string(seen.sequence) + ", " +
                                   std::to_string(seen.count) + " items); nothing written");
  }
  ids->resize(size_t(seen.count));
  for (int64_t i = 0; i < seen.count; ++i) {
    (*ids)[i] = batch.ids ? batch.ids[i] : seen.first_id + i;
  }
  if (result) {
    result->replayed = true;
    result->sequence = seen.sequence;
  }
  return Status::OK();
}

Status Collection::Ingest(const IngestBatch& batch, std::vector<int64_t>* ids_out,
                          IngestResult* result) {
  if (batch.data.n == 0) {
    // Nothing to write (a filtered-out file, an empty shard's part): no
    // batch, no sequence number, the token is not recorded.
    if (ids_out) ids_out->clear();
    if (result) *result = IngestResult();
    return Status::OK();
  }
  HEDGEDB_RETURN_IF_ERROR(ValidateItems(batch));
  if (batch.upsert && !batch.ids) {
    return Status::InvalidArgument("upsert needs the ids of the items to replace or add");
  }
  if (batch.token.size() > 256) {
    return Status::InvalidArgument("batch token is " + std::to_string(batch.token.size()) +
                                   " bytes; at most 256");
  }
  const int64_t n = batch.data.n;
  std::vector<uint8_t> rows(size_t(n) * row_bytes_);
  for (int64_t i = 0; i < n; ++i) PackItemRow(batch.data, i, rows.data() + i * row_bytes_);
  // The coarse vectors of the rows as stored (a compact row format's
  // rounded values), as the index will encode them: a half-float index
  // (SQfp16) cannot hold every finite value.
  HEDGEDB_RETURN_IF_ERROR(
      index::CoarseIndex::CheckCoarseRange(meta_.spec, rows.data(), n, batch.ids));
  uint32_t content_crc = 0;
  if (!batch.token.empty()) {  // everything the batch writes
    if (batch.ids) content_crc = Crc32c(batch.ids, size_t(n) * sizeof(int64_t));
    content_crc = Crc32c(rows.data(), rows.size(), content_crc);
    const uint8_t has_labels = batch.labels ? 1 : 0, has_payloads = batch.payloads ? 1 : 0;
    // An upsert and an insert of the same items are different batches.
    const uint8_t upsert = batch.upsert ? 1 : 0;
    if (upsert) content_crc = Crc32c(&upsert, 1, content_crc);
    content_crc = Crc32c(&has_labels, 1, content_crc);
    if (batch.labels) content_crc = Crc32c(batch.labels, size_t(n) * sizeof(int64_t), content_crc);
    if (batch.labels && batch.has_labels)
      content_crc = Crc32c(batch.has_labels, size_t(n), content_crc);
    content_crc = Crc32c(&has_payloads, 1, content_crc);
    for (int64_t i = 0; batch.payloads && i < n; ++i) {
      const uint64_t length = batch.payloads[i].size();
      content_crc = Crc32c(&length, sizeof(length), content_crc);
      content_crc = Crc32c(batch.payloads[i].data(), batch.payloads[i].size(), content_crc);
    }
  }
  if (result) *result = IngestResult();

  std::unique_lock<std::mutex> write_lock(write_mutex_);
  if (dropped_) return Status::NotFound("collection '" + meta_.spec.name + "' was dropped");
  std::vector<int64_t> ids(static_cast<size_t>(n));
  if (!batch.token.empty()) {
    Status replay = FindReplay(batch, content_crc, &ids, result);
    if (replay.ok()) {
      if (ids_out) *ids_out = std::move(ids);
      return Status::OK();
    }
    if (!replay.IsNotFound()) return replay;
  }
  std::vector<int64_t> replaced;  // upsert: the ids that exist
  if (batch.ids) {
    for (int64_t i = 0; i < n; ++i) {
      ids[i] = batch.ids[i];
      if (!table_.Contains(ids[i])) continue;  // the ids only change under write_mutex_
      if (!batch.upsert) {
        return Status::AlreadyExists("id " + std::to_string(ids[i]) +
                                     " already exists in collection '" + meta_.spec.name +
                                     "' (upsert replaces existing items)");
      }
      replaced.push_back(ids[i]);
    }
  } else {
    if (meta_.max_id > INT64_MAX - n) return Status::InvalidArgument("id space exhausted");
    for (int64_t i = 0; i < n; ++i) ids[i] = meta_.max_id + 1 + i;
  }
  {
    // Room for the batch in memory before the commit: once it is durable,
    // applying it must not fail halfway (the arena snapshot would save a
    // half-applied state).
    std::unique_lock<RwMutex> lock(state_mutex_);
    try {
      table_.Reserve(n);
    } catch (const std::bad_alloc&) {
      return Status::IOError("out of memory for " + std::to_string(n) +
                             " more items in collection '" + meta_.spec.name +
                             "'; nothing was written");
    }
  }
  std::vector<storage::RecordWrite> writes(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    writes[i].id = ids[i];
    writes[i].has_label = batch.labels != nullptr && (!batch.has_labels || batch.has_labels[i]);
    writes[i].label = writes[i].has_label ? batch.labels[i] : 0;
    writes[i].row = rows.data() + i * row_bytes_;
    writes[i].payload = batch.payloads ? &batch.payloads[i] : nullptr;
  }
  storage::CollectionMeta next = meta_;
  next.sequence += 1;
  next.max_id = std::max(next.max_id, *std::max_element(ids.begin(), ids.end()));
  storage::BatchToken token;
  if (!batch.token.empty()) {
    token.token = batch.token;
    token.sequence = next.sequence;
    token.count = n;
    token.first_id = ids.front();
    token.explicit_ids = batch.ids != nullptr;
    token.content_crc = content_crc;
  }
  // Replaced ids are deleted and written in the one batch: old or new,
  // never both or neither.
  HEDGEDB_RETURN_IF_ERROR(
      CommitWrite(next, writes, replaced, batch.token.empty() ? nullptr : &token));

  // Durable from here on: the call succeeds whatever the index does.
  std::unique_lock<RwMutex> lock(state_mutex_);
  // Only these change; the spec (read without the lock) stays as it is.
  meta_.sequence = next.sequence;
  meta_.max_id = next.max_id;
  if (result) {
    result->sequence = next.sequence;
    result->replaced = int64_t(replaced.size());
  }
  // The old rows die (and leave the index) before the new ones are added
  // under the same ids.
  RetireLocked(replaced);
  const int64_t first_row = table_.rows();
  for (int64_t i = 0; i < n; ++i) {
    table_.Append(ids[i], writes[i].has_label, writes[i].label, rows.data() + i * row_bytes_,
                  next.sequence);
    if (payload_index_ && batch.payloads) payload_index_->Add(first_row + i, batch.payloads[i]);
  }
  WriteAppliedLocked();
  // Adds to a trained index; training waits for the next search or flush.
  Status s = keeper_.Sync(first_row, /*train=*/false, rows.data(), ids.data());
  if (s.ok()) s = keeper_.SaveIfDue();
  if (!s.ok() && result) {
    result->index_warning = keeper_.note().empty() ? s.ToString() : keeper_.note();
  }
  if (ids_out) *ids_out = std::move(ids);
  lock.unlock();
  write_lock.unlock();
  UpkeepIfDue();
  return Status::OK();
}

void Collection::ListIds(std::vector<int64_t>* ids) const {
  std::shared_lock<RwMutex> lock(state_mutex_);
  ids->clear();
  ids->reserve(size_t(table_.live_count()));
  for (int64_t r : table_.live_rows()) ids->push_back(table_.ids()[size_t(r)]);
  std::sort(ids->begin(), ids->end());
}

Status Collection::Get(const int64_t* ids, size_t n, std::vector<Record>* records) {
  const RowShape shape = RowShapeOf(meta_.spec);
  const size_t D = size_t(shape.dim), C = shape.mixture_components();
  std::vector<float> widened(shape.kind == Kind::kCodes ? 0 : shape.item_row_size());
  records->assign(n, Record());
  storage::CollectionMeta meta;
  std::shared_ptr<const rocksdb::Snapshot> snapshot;
  {
    std::shared_lock<RwMutex> lock(state_mutex_);
    // The store as memory shows it: a batch committed but not applied yet
    // (an upsert's new payload, a removal's deleted one) is not in it.
    while (!AppliedSnapshotLocked(&snapshot)) {
      lock.unlock();
      WaitForWrite();
      lock.lock();
    }
    meta = meta_;
    for (size_t i = 0; i < n; ++i) {
      Record& rec = (*records)[i];
      rec.id = ids[i];
      const int64_t r = table_.RowOf(ids[i]);
      if (r < 0) continue;
      rec.found = true;
      rec.has_label = table_.has_label(r);
      rec.label = table_.labels()[size_t(r)];
      const uint8_t* row = table_.arena().row(r);
      if (shape.kind == Kind::kCodes) {
        rec.codes.assign(row, row + D);
        continue;
      }
      // The stored values, widened exactly (a compact row format returns
      // the rounded values that searches score).
      WidenItemRow(shape, row, widened.data());
      const float* f = widened.data();
      if (shape.kind == Kind::kPoint) {
        rec.vec.assign(f, f + D);
      } else {
        if (shape.kind == Kind::kMog) {
          rec.weights.assign(f + shape.weights_offset(), f + shape.weights_offset() + C);
        }
        rec.mean.assign(f + shape.mean_offset(), f + shape.mean_offset() + C * D);
        rec.var.assign(f + shape.var_offset(), f + shape.var_offset() + C * D);
      }
    }
  }
  // Payloads come from the record store: read them (as of the snapshot)
  // without holding the lock that writers need.
  for (Record& rec : *records) {
    if (!rec.found) continue;
    bool found_payload = false;
    HEDGEDB_RETURN_IF_ERROR(
        store_->GetPayload(meta, rec.id, &rec.payload, &found_payload, snapshot.get()));
  }
  return Status::OK();
}

Status Collection::Remove(const int64_t* ids, size_t n, int64_t* removed) {
  if (n == 0) return Status::InvalidArgument("no ids to remove");
  std::unique_lock<std::mutex> write_lock(write_mutex_);
  if (dropped_) return Status::NotFound("collection '" + meta_.spec.name + "' was dropped");
  std::vector<int64_t> unique(ids, ids + n);
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  for (int64_t id : unique) {
    if (!table_.Contains(id)) {
      return Status::NotFound("id " + std::to_string(id) + " is not in collection '" +
                              meta_.spec.name + "' (nothing removed)");
    }
  }
  storage::CollectionMeta next = meta_;
  next.sequence += 1;
  HEDGEDB_RETURN_IF_ERROR(CommitWrite(next, {}, unique, nullptr));

  // Durable from here on: the call succeeds whatever the index does.
  std::unique_lock<RwMutex> lock(state_mutex_);
  // Only these change; the spec (read without the lock) stays as it is.
  meta_.sequence = next.sequence;
  meta_.max_id = next.max_id;
  RetireLocked(unique);
  WriteAppliedLocked();
  if (removed) *removed = int64_t(unique.size());
  lock.unlock();
  write_lock.unlock();
  UpkeepIfDue();
  return Status::OK();
}

Status Collection::CommitWrite(const storage::CollectionMeta& next,
                               const std::vector<storage::RecordWrite>& puts,
                               const std::vector<int64_t>& deletes,
                               const storage::BatchToken* token) {
  {
    std::lock_guard<std::mutex> guard(snapshot_mutex_);
    // Reads that needed the snapshot during the last write: take it while
    // the store still holds what memory shows, for the reads that come
    // before this write is applied.
    if (snapshot_wanted_ && !applied_snapshot_) applied_snapshot_ = store_->Snapshot();
    committing_ = true;
  }
  Status s = store_->Commit(next, puts, deletes, token);
  if (!s.ok()) {
    std::lock_guard<std::mutex> guard(snapshot_mutex_);
    committing_ = false;
  }
  return s;
}

void Collection::WriteAppliedLocked() {
  std::lock_guard<std::mutex> guard(snapshot_mutex_);
  applied_snapshot_.reset();
  committing_ = false;
  // The next write takes a snapshot before its commit only if reads needed
  // one during this write.
  snapshot_wanted_ = snapshot_used_;
  snapshot_used_ = false;
}

bool Collection::AppliedSnapshotLocked(std::shared_ptr<const rocksdb::Snapshot>* snapshot) {
  std::lock_guard<std::mutex> guard(snapshot_mutex_);
  snapshot_used_ = true;
  snapshot_wanted_ = true;
  // Without a commit in flight the store holds exactly what memory shows
  // (the state lock keeps applies out; a write marks itself committing
  // under snapshot_mutex_ before it commits).
  if (!applied_snapshot_ && committing_) return false;
  if (!applied_snapshot_) applied_snapshot_ = store_->Snapshot();
  *snapshot = applied_snapshot_;
  return true;
}

void Collection::WaitForWrite() {
  // A write holds write_mutex_ from before its commit until it is applied.
  std::lock_guard<std::mutex> wait(write_mutex_);
}

void Collection::RetireLocked(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  table_.Retire(ids);
  keeper_.Retire(ids);
}

Status Collection::CatchUp(const storage::CollectionMeta& latest) {
  std::unique_lock<std::mutex> write_lock(write_mutex_);
  std::unordered_set<int64_t> stored;        // every id the store holds now
  std::vector<storage::StoredRecord> fresh;  // records written since meta_.sequence
  if (latest.sequence != meta_.sequence) {
    HEDGEDB_RETURN_IF_ERROR(store_->ScanSince(
        latest, meta_.sequence, [&](int64_t id) { stored.insert(id); },
        [&](const storage::StoredRecord& r) {
          HEDGEDB_RETURN_IF_ERROR(CheckNotNewer(r, latest));
          fresh.push_back(r);
          return Status::OK();
        }));
  }
  std::unique_lock<RwMutex> lock(state_mutex_);
  // A calibration does not advance the sequence: reload them every time,
  // and the match parameters that calibrate may have refitted with them.
  HEDGEDB_RETURN_IF_ERROR(LoadCalibrationsLocked());
  meta_.spec.match_a = latest.spec.match_a;
  meta_.spec.match_b = latest.spec.match_b;
  meta_.refitted = latest.refitted;
  meta_.created_match_a = latest.created_match_a;
  meta_.created_match_b = latest.created_match_b;
  if (latest.sequence == meta_.sequence) return Status::OK();
  // Gone: live items whose record was removed, or removed and written again.
  std::vector<int64_t> gone;
  for (int64_t r : table_.live_rows()) {
    const int64_t id = table_.ids()[size_t(r)];
    if (!stored.count(id)) gone.push_back(id);
  }
  for (const storage::StoredRecord& r : fresh) {
    if (table_.Contains(r.id)) gone.push_back(r.id);
  }
  std::sort(gone.begin(), gone.end());
  if (!gone.empty()) RetireLocked(gone);
  const int64_t first_row = table_.rows();
  for (const storage::StoredRecord& r : fresh) {
    table_.Append(r.id, r.has_label, r.label, reinterpret_cast<const uint8_t*>(r.row.data()),
                  r.sequence);
  }
  meta_.sequence = latest.sequence;
  meta_.max_id = latest.max_id;
  payload_index_.reset();  // rebuilt from the store at the next payload filter
  // A failure marks the index stale: searches stay exhaustive and correct.
  (void)keeper_.Sync(first_row, /*train=*/false);
  // As on Open: every live item is in the index; the rest are dead vectors
  // (and, from a file ahead of the view, items the view lacks).
  keeper_.RecountTombstones();
  return Status::OK();
}

Status Collection::ValidateQueries(const EmbeddingView& v) const {
  return CheckQueryRows(RowShapeOf(meta_.spec), v);
}

void Collection::PackQueryRow(const EmbeddingView& v, int64_t i, float* row) const {
  ::hedgedb::PackQueryRow(RowShapeOf(meta_.spec), v, i, row);
}

Status Collection::EnsurePayloadIndex() {
  {
    std::shared_lock<RwMutex> lock(state_mutex_);
    if (payload_index_) return Status::OK();
  }
  // Writers wait while the payloads are read, so none is missed; searches
  // go on.
  std::unique_lock<std::mutex> write_lock(write_mutex_);
  {
    std::shared_lock<RwMutex> lock(state_mutex_);
    if (payload_index_) return Status::OK();
  }
  auto built = std::make_unique<PayloadFieldIndex>();
  HEDGEDB_RETURN_IF_ERROR(
      store_->ScanPayloads(meta_, nullptr, [&](int64_t id, const std::string& payload) {
        const int64_t r = table_.RowOf(id);  // changes only under write_mutex_
        if (r >= 0) built->Add(r, payload);
        return Status::OK();
      }));
  std::unique_lock<RwMutex> lock(state_mutex_);
  payload_index_ = std::move(built);
  return Status::OK();
}

SearchState Collection::SearchStateLocked() const {
  SearchState s;
  s.spec = &meta_.spec;
  s.max_id = meta_.max_id;
  s.rows = &table_;
  s.index = &keeper_.index();
  s.index_stale = keeper_.stale();
  s.tombstones = keeper_.tombstones();
  s.calibrations = &calibrations_;
  s.payload_index = payload_index_.get();
  return s;
}

Status Collection::Search(const EmbeddingView& queries, const SearchOptions& options,
                          std::vector<SearchResult>* results) {
  SearchPlan plan;
  // A copy: calibrate may refit the match parameters meanwhile (they are
  // read again under the lock below).
  HEDGEDB_RETURN_IF_ERROR(Searcher::Plan(spec(), queries, options, &plan));
  const bool payload_filter = !plan.filter.payload.empty();

  if (!options.exhaustive) HEDGEDB_RETURN_IF_ERROR(TrainIfDue());
  std::shared_lock<RwMutex> lock(state_mutex_, std::defer_lock);
  // with_payload: the store as memory shows it (see Get).
  std::shared_ptr<const rocksdb::Snapshot> snapshot;
  while (true) {
    if (payload_filter) HEDGEDB_RETURN_IF_ERROR(EnsurePayloadIndex());
    lock.lock();
    // A reader's catch-up may have dropped the payload index meanwhile.
    const bool payload_index_ready = !payload_filter || payload_index_;
    if (payload_index_ready && (!options.with_payload || AppliedSnapshotLocked(&snapshot))) break;
    lock.unlock();
    if (payload_index_ready) WaitForWrite();
  }
  // The match parameters as of the lock: calibrate may have refitted them
  // since the plan was made, together with the map that reads them.
  plan.params.match_a = meta_.spec.match_a;
  plan.params.match_b = meta_.spec.match_b;
  HEDGEDB_RETURN_IF_ERROR(Searcher(SearchStateLocked()).Run(&plan, options, results));
  if (!options.with_payload) return Status::OK();
  // Payloads come from the record store: read them without holding the lock
  // that writers need, as of the store that memory shows (see Get).
  const storage::CollectionMeta meta = meta_;
  lock.unlock();
  for (SearchResult& result : *results) {
    for (SearchHit& hit : result.hits) {
      bool found = false;
      HEDGEDB_RETURN_IF_ERROR(
          store_->GetPayload(meta, hit.id, &hit.payload, &found, snapshot.get()));
    }
  }
  return Status::OK();
}

Status Collection::Stats(CollectionStats* st) {
  std::shared_lock<RwMutex> lock(state_mutex_);
  st->spec = meta_.spec;
  keeper_.FillStats(st);  // spec.index_factory, index_*, lost_writes
  st->items = table_.live_count();
  st->max_id = meta_.max_id;
  st->sequence = meta_.sequence;
  st->arena_source = arena_source_;
  st->arena_note = arena_note_;
  st->arena_mapped_bytes = int64_t(table_.arena().mapped_bytes());
  st->calibrations.clear();
  for (const auto& kv : calibrations_) st->calibrations.push_back(kv.second.Info());
  st->calibration_note = calibration_note_;
  return Status::OK();
}

}  // namespace query
}  // namespace hedgedb
