#include "query/index_keeper.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <utility>

#include "query/knob_fit.h"

namespace hedgedb {
namespace query {
namespace {

// Upkeep: the stage-1 recall (of the exact coarse top-100) that a re-tune
// meanwhile restores, or the one the fit left if that is lower. (The fit
// itself targets the final recall: query/knob_fit.h.)
constexpr double kTargetStageOneRecall = 0.95;
// Below this many items an untrained-at-birth index (HNSW, Flat) is not
// fitted yet.
constexpr int64_t kMinRowsToTune = 1000;
// An index without lists (Flat, SQ, PQ, HNSW: no upkeep retrains it) is
// fitted again at a save once the collection holds this many times the
// items of its fit: a fit at 1,000 items chose among candidate counts that
// cover much of the collection, and the coarse order's misses grow with
// the items at nearly the same coarse distance.
constexpr int64_t kRefitGrowth = 4;

// Upkeep: while a retrain runs, nprobe may be raised to at most twice the one
// fitted at training, where that restores the tuning target, so that recall
// holds at once; the retrain then brings the latency back (twice the nprobe
// cost 1.6 times the p99 latency in bench/churn_run.py, past the 1.5 times a
// freshly built index's that the churn runbook allows).
constexpr double kRetuneBudget = 2.0;
// How far under the recall estimate fitted at training a check must measure
// before the index is repaired (sampling noise of 100 queries is ~0.01).
constexpr double kRecallMargin = 0.02;
// A check's queries come from at least this many of the newest live items.
constexpr int64_t kMinQueryRows = 1000;

// 120000 -> "120,000", for notes people read.
std::string Grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// The imbalance part of a check's reason: "list imbalance 2.113 > 1.845
// (index_retrain_imbalance 1.5 x 1.230 after training)".
std::string ImbalanceReason(const UpkeepCheck& c, double factor) {
  return "list imbalance " + Fixed(c.imbalance, 3) + " > " + Fixed(c.imbalance_limit, 3) +
         " (index_retrain_imbalance " + Fixed(factor, 2) + " x " + Fixed(c.imbalance_baseline, 3) +
         " after training)";
}

// Why a check acted: "recall estimate 0.71 < 0.90 after 120,000 changes",
// or for lists grown unbalanced while the recall holds "list imbalance
// 2.113 > 1.845 (index_retrain_imbalance 1.5 x 1.230 after training) after
// 120,000 changes (100,000 live items); recall estimate 0.981 at nprobe 16".
std::string Reason(const UpkeepCheck& c) {
  const double factor = c.imbalance_limit / c.imbalance_baseline;
  if (!c.low_recall && c.unbalanced) {
    return ImbalanceReason(c, factor) + " after " + Grouped(c.changes) + " changes (" +
           Grouped(c.live) + " live items); recall estimate " + Fixed(c.recall, 3) + " at nprobe " +
           std::to_string(c.knob);
  }
  // index_retrain_recall 1 retrains at every check (RepairBelow's infinite
  // threshold), which "< inf" would not say.
  const std::string bar = std::isinf(c.threshold)
                              ? " (index_retrain_recall 1: every check retrains)"
                              : " < " + Fixed(c.threshold, 3);
  std::string reason = "recall estimate " + Fixed(c.recall, 3) + bar + " at nprobe " +
                       std::to_string(c.knob) + " after " + Grouped(c.changes) + " changes (" +
                       Grouped(c.live) + " live items)";
  if (c.unbalanced) reason += "; " + ImbalanceReason(c, factor);
  return reason;
}

}  // namespace

IndexKeeper::IndexKeeper(const storage::CollectionMeta* meta, const RowTable* table,
                         std::string index_path, uint64_t binding, int64_t save_interval)
    : meta_(meta),
      table_(table),
      index_path_(std::move(index_path)),
      binding_(binding),
      save_interval_(save_interval) {}

Status IndexKeeper::Rebuild() {
  HEDGEDB_RETURN_IF_ERROR(index::CoarseIndex::Create(meta_->spec, &index_));
  indexed_rows_ = 0;
  tombstones_ = 0;
  index_stale_ = false;
  upkeep_.changes_since_check = 0;
  return Sync(0, /*train=*/true);
}

Status IndexKeeper::Tune(const CollectionSpec& spec, index::CoarseIndex* index,
                         const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids,
                         bool* fitted) {
  // Fit the default nprobe / efSearch and candidate count to this data, for
  // the final recall of a default search: random, unclustered embeddings
  // need far more lists probed than clustered ones, and many close items
  // (10M of them) more candidates than the coarse order's top-100.
  SearchFit fit;
  HEDGEDB_RETURN_IF_ERROR(FitDefaultSearch(spec, *index, rows, ids, &fit));
  if (fitted != nullptr) *fitted = fit.fitted;
  if (!fit.fitted) return Status::OK();
  index->AdoptFit(fit.knobs, fit.oversampling, fit.recall, fit.coarse_recall);
  index->set_fit_seconds(fit.seconds);
  return Status::OK();
}

Status IndexKeeper::Tune(const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids) {
  bool fitted = false;
  HEDGEDB_RETURN_IF_ERROR(Tune(meta_->spec, index_.get(), rows, ids, &fitted));
  if (fitted) {
    upkeep_.fitted_items = int64_t(ids.size());
    upkeep_unsaved_ = true;
  }
  return Status::OK();
}

void IndexKeeper::MarkStale(const std::string& reason) {
  index_stale_ = true;
  index_note_ = "stale: " + reason +
                "; searches score every item exactly until the next open rebuilds the index";
}

Status IndexKeeper::Sync(int64_t first_row, bool train, const uint8_t* batch_rows,
                         const int64_t* batch_ids) {
  if (index_stale_) return Status::OK();
  std::vector<uint8_t> rows;
  std::vector<int64_t> ids;
  Status s;
  bool trained_now = false;
  const int64_t end_row = table_->rows();
  if (batch_rows && index_->is_trained() && first_row == indexed_rows_) {
    // The batch just appended: add it as the caller packed it.
    if (end_row > first_row) s = index_->Add(batch_rows, end_row - first_row, batch_ids);
    if (!s.ok()) {
      MarkStale(s.ToString());
      return s;
    }
    indexed_rows_ = end_row;
    unsaved_vectors_ += end_row - first_row;
    upkeep_.changes_since_check += end_row - first_row;
    return Status::OK();
  }
  if (!index_->is_trained()) {
    if (!train || table_->live_count() < index_->train_rows_wanted()) return Status::OK();
    table_->GatherLive(&rows, &ids, 0);
    s = index_->Train(rows.data(), int64_t(ids.size()));
    trained_now = true;
  } else {
    table_->GatherLive(&rows, &ids, first_row);
  }
  if (s.ok()) s = index_->Add(rows.data(), int64_t(ids.size()), ids.data());
  if (s.ok() && trained_now) s = Tune(rows, ids);
  if (!s.ok()) {
    MarkStale(s.ToString());
    return s;
  }
  indexed_rows_ = table_->rows();
  unsaved_vectors_ += int64_t(ids.size());
  if (trained_now) {
    IndexFitted();
  } else {
    upkeep_.changes_since_check += int64_t(ids.size());
  }
  return Status::OK();
}

void IndexKeeper::IndexFitted() {
  upkeep_.changes_since_check = 0;
  upkeep_.fitted_knob = index_->default_knobs().nprobe;
  upkeep_.fitted_recall = index_->coarse_recall();
  upkeep_.fitted_imbalance = index_->ListImbalance();
}

double IndexKeeper::RepairBelow(const UpkeepPolicy& policy) const {
  // Data that no nprobe serves well (the tuning stopped below its target,
  // e.g. a PQ encoding limits stage 1) is not retrained over and over: only
  // a fall from what the fit reached counts.
  if (policy.retrain_recall >= 1) return std::numeric_limits<double>::infinity();  // always
  if (std::isnan(upkeep_.fitted_recall)) return policy.retrain_recall;
  return std::min(policy.retrain_recall, upkeep_.fitted_recall - kRecallMargin);
}

bool IndexKeeper::TrainDue() const {
  return !index_stale_ && !index_->is_trained() &&
         table_->live_count() >= index_->train_rows_wanted();
}

void IndexKeeper::Retire(const std::vector<int64_t>& ids) {
  if (ids.empty() || index_stale_ || !index_->is_trained()) return;
  bool physical = false;
  Status s = index_->Remove(ids.data(), int64_t(ids.size()), &physical);
  if (!s.ok()) {
    MarkStale(s.ToString());  // searches stay exact; the next open rebuilds
    return;
  }
  if (!physical) tombstones_ += int64_t(ids.size());
  unsaved_vectors_ += int64_t(ids.size());
  upkeep_.changes_since_check += int64_t(ids.size());
}

void IndexKeeper::RecountTombstones() {
  if (index_stale_ || !index_->is_trained()) return;
  tombstones_ = std::max<int64_t>(0, index_->ntotal() - table_->live_count());
}

Status IndexKeeper::Open() {
  const storage::CollectionMeta& meta = *meta_;
  uint64_t file_sequence = 0;
  std::string upkeep_record;
  Status s = index::CoarseIndex::Load(meta.spec, index_path_, binding_, &index_, &file_sequence,
                                      &upkeep_record);
  // A reader meets files that the writer saved after the reader's view of
  // the store: not lost writes, just ahead.
  const bool ahead_of_view = s.ok() && read_only_ && file_sequence > meta.sequence;
  if (s.ok() && file_sequence > meta.sequence && !ahead_of_view) {
    // The file was saved after batches up to file_sequence were committed, so
    // the store once had them: its write-ahead log lost acknowledged writes.
    lost_writes_ =
        "collection '" + meta.spec.name + "': lost writes: the index file covered " + "sequence " +
        std::to_string(file_sequence) + ", the store has " + std::to_string(meta.sequence) +
        " (batches " + std::to_string(meta.sequence + 1) + ".." + std::to_string(file_sequence) +
        " are gone from the store's write-ahead log); the index was rebuilt from " + "the records";
    s = Status::Corruption("index file covers sequence " + std::to_string(file_sequence) +
                           ", past the records' " + std::to_string(meta.sequence));
  } else if (ahead_of_view) {
    // Its vectors of items upserted after the view are not the view's: build
    // the index from the view instead (in memory; a reader saves nothing).
    s = Status::NotFound("index file is ahead of this reader's view");
  }
  if (s.ok() && !index_->is_trained()) {
    if (file_sequence == meta.sequence && table_->live_count() < index_->train_rows_wanted()) {
      // What a rebuild would build, still too few items to train: used as
      // it is. Rebuilding (FAISS's index_factory parses the factory string
      // with regular expressions) and rewriting it would make every read of
      // a small collection cost a write (stats over 1,000 collections).
      indexed_rows_ = 0;
      tombstones_ = 0;
      index_sequence_ = file_sequence;
      unsaved_vectors_ = 0;
      open_mode_ = "loaded";
      return Status::OK();
    }
    s = Status::NotFound("index file holds an untrained index");
  }
  if (s.ok()) {
    // Catch up: add the records written after the file was saved, after
    // removing the file's vectors of those ids (an upsert replaced them).
    // Items removed since are filtered at search time (tombstones).
    std::vector<uint8_t> rows;
    std::vector<int64_t> ids;
    table_->GatherNewer(file_sequence, &rows, &ids);
    bool physical = false;
    if (!ids.empty()) s = index_->Remove(ids.data(), int64_t(ids.size()), &physical);
    if (s.ok()) s = index_->Add(rows.data(), int64_t(ids.size()), ids.data());
    if (s.ok()) {
      indexed_rows_ = table_->rows();
      index_sequence_ = file_sequence;
      unsaved_vectors_ = int64_t(ids.size());
      tombstones_ = std::max<int64_t>(0, index_->ntotal() - table_->live_count());
      // The upkeep saved with the file goes on (a file without a record: the
      // file's nprobe is the budget's base, counting starts now); the writes
      // caught up count too.
      IndexFitted();
      LoadUpkeep(upkeep_record, file_sequence);
      upkeep_.changes_since_check += int64_t(ids.size());
      // Removals since the file count too. An index that removes physically
      // held exactly the live items when it was saved, so its vectors of
      // items no longer live are those removals (an index with tombstones
      // saved its own, which cannot be told apart: it is not checked).
      if (index_->physical_removal()) upkeep_.changes_since_check += tombstones_;
      open_mode_ = (file_sequence == meta.sequence) ? "loaded" : "caught-up";
      if (file_sequence == meta.sequence) return Status::OK();
      SaveOnOpen();
      return Status::OK();
    }
  }
  // Missing, unreadable, untrained, from another collection or from the
  // future: rebuild from the records, and say why.
  open_mode_ = "rebuilt";
  if (!s.IsNotFound() || s.message().find("untrained") != std::string::npos) {
    index_note_ = "rebuilt from the records: " + s.ToString();
  }
  Status rebuilt = Rebuild();
  if (!rebuilt.ok()) {
    // The records are intact; keep the collection usable (exhaustively).
    open_mode_ = "degraded";
    HEDGEDB_RETURN_IF_ERROR(index::CoarseIndex::Create(meta.spec, &index_));
    MarkStale("the index cannot be rebuilt: " + rebuilt.ToString());
    return Status::OK();
  }
  SaveOnOpen();
  return Status::OK();
}

void IndexKeeper::SaveOnOpen() {
  if (read_only_) return;  // a reader keeps what it built in memory
  // The records are intact and the index is in memory: a file that cannot be
  // written (a full or read-only disk) costs only the next open's rebuild.
  const Status s = Save();
  if (!s.ok()) index_note_ = "index file not saved: " + s.ToString();
}

Status IndexKeeper::Save() {
  if (read_only_) {
    return Status::NotSupported("collection '" + meta_->spec.name +
                                "' is open read-only: its index file is not written");
  }
  if (index_stale_) return Status::OK();  // never stamp an index that missed writes
  if (tombstones_ > 0 && tombstones_ * 2 > index_->ntotal()) {
    Status s = Rebuild();
    if (!s.ok()) return Status::OK();  // stale now; the next open rebuilds
  }
  const int64_t live = table_->live_count();
  const bool unfitted = std::isnan(index_->recall_estimate());
  const bool outgrown = index_->shape().ivf_lists == 0 && upkeep_.fitted_items > 0 &&
                        live >= kRefitGrowth * upkeep_.fitted_items;
  if (index_->fits_default_search() && index_->is_trained() && (unfitted || outgrown) &&
      live >= kMinRowsToTune) {
    // Indexes that need no training (HNSW, Flat) are fitted at their first
    // save with enough items; so is one loaded from a file without a fit,
    // and one without lists that has outgrown its fit (kRefitGrowth).
    std::vector<uint8_t> rows;
    std::vector<int64_t> ids;
    table_->GatherLive(&rows, &ids, 0);
    Status s = Tune(rows, ids);
    if (!s.ok()) {
      MarkStale(s.ToString());
      return Status::OK();
    }
  }
  HEDGEDB_RETURN_IF_ERROR(index_->Save(index_path_, meta_->sequence, binding_, UpkeepRecord()));
  index_sequence_ = meta_->sequence;
  unsaved_vectors_ = 0;
  upkeep_unsaved_ = false;
  return Status::OK();
}

Status IndexKeeper::SaveIfDue() {
  if (save_interval_ > 0 && unsaved_vectors_ >= save_interval_) return Save();
  return Status::OK();
}

void IndexKeeper::FillStats(CollectionStats* st) const {
  st->spec.index_factory = index_->factory();
  st->index_sequence = index_sequence_;
  st->index_vectors = index_->ntotal();
  st->index_trained = index_->is_trained();
  st->index_stale = index_stale_;
  st->index_recall_estimate = index_->recall_estimate();
  st->index_coarse_recall = index_->coarse_recall();
  st->index_candidates = int64_t(index_->default_oversampling()) * SearchOptions().k;
  st->index_fit_seconds = index_->fit_seconds();
  st->index_nprobe = index_->default_knobs().nprobe;
  st->index_ef_search = index_->default_knobs().ef_search;
  st->index_note = index_note_;
  st->lost_writes = lost_writes_;
  st->index_description = index_->factory();
  st->index_changes_since_check = upkeep_.changes_since_check;
  st->index_checked_sequence = upkeep_.checked_sequence;
  st->index_checked_time = upkeep_.checked_time;
  st->index_retrained_sequence = upkeep_.retrained_sequence;
  st->index_retrained_time = upkeep_.retrained_time;
  st->index_retrains = upkeep_.retrains;
  st->index_retraining = retraining_;
  st->index_upkeep_note = upkeep_.note;
  st->index_retrain_reason = upkeep_.retrain_reason;
  st->index_imbalance =
      index_->is_trained() ? index_->ListImbalance() : std::numeric_limits<double>::quiet_NaN();
  st->index_imbalance_baseline = upkeep_.fitted_imbalance;
}

bool IndexKeeper::CheckDue(const UpkeepPolicy& policy) const {
  if (read_only_ || index_stale_ || !(policy.recheck_fraction > 0) || !index_->is_trained() ||
      !index_->tunable() || index_->shape().ivf_lists <= 0 || tombstones_ > 0) {
    return false;
  }
  const double live = double(std::max<int64_t>(1, table_->live_count()));
  return double(upkeep_.changes_since_check) >= policy.recheck_fraction * live;
}

Status IndexKeeper::Measure(const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids,
                            const UpkeepPolicy& policy, UpkeepCheck* check) const {
  *check = UpkeepCheck();
  check->changes = upkeep_.changes_since_check;
  check->live = int64_t(ids.size());
  check->sequence = meta_->sequence;
  check->knob = index_->default_knobs().nprobe;
  const int lists = index_->shape().ivf_lists;
  // The rungs: the current nprobe, then doublings up to the budget.
  const int fitted = upkeep_.fitted_knob > 0 ? upkeep_.fitted_knob : check->knob;
  const int budget = std::min(lists, int(std::floor(kRetuneBudget * fitted)));
  std::vector<index::CoarseSearchKnobs> ladder;
  for (int knob = check->knob;;) {
    index::CoarseSearchKnobs k;
    k.nprobe = knob;
    ladder.push_back(k);
    if (knob >= budget) break;
    knob = std::min(budget, 2 * knob);
  }
  // The queries: the newest live items (the rows are in write order), the
  // best guess at what searches ask for next and what lists trained on
  // older items fit worst; as many as the fraction that triggers a check.
  const int64_t n = int64_t(ids.size());
  const double fraction = policy.recheck_fraction > 0 ? policy.recheck_fraction : 0.1;
  const int64_t newest = std::max<int64_t>(kMinQueryRows, int64_t(std::ceil(fraction * double(n))));
  // Stage 1's recall of the exact coarse top-100, as the fit measured it at
  // training (upkeep_.fitted_recall): a drift measure, cheap next to the fit's
  // exhaustive scoring, that a retrain (which fits again) repairs.
  const SearchOptions defaults;
  std::vector<double> recalls;
  HEDGEDB_RETURN_IF_ERROR(
      index_->MeasureRecall(rows.data(), ids.data(), n, int64_t(defaults.k) * kDefaultOversampling,
                            std::max<int64_t>(0, n - newest), ladder, &recalls));
  check->recall = recalls.front();
  check->threshold = RepairBelow(policy);
  check->best_knob = ladder.back().nprobe;
  check->best_recall = recalls.back();
  // The lists' balance: at the same nprobe, a query scans about imbalance x
  // n / nlist vectors per probe, so lists grown unevenly since the training
  // cost search time even where the recall holds.
  check->imbalance = index_->ListImbalance();
  check->imbalance_baseline = upkeep_.fitted_imbalance;
  if (policy.retrain_imbalance > 0 && std::isfinite(check->imbalance_baseline) &&
      check->imbalance_baseline > 0) {
    check->imbalance_limit = policy.retrain_imbalance * check->imbalance_baseline;
    check->unbalanced = check->imbalance > check->imbalance_limit;
  }
  check->low_recall = check->recall < check->threshold;
  check->retrain = check->low_recall || check->unbalanced;
  // Recall that holds needs no wider probe while the new index trains.
  if (!check->low_recall) return Status::OK();
  // Above the tuning target (or what the fit left, if lower) the old index
  // serves well enough while the new one trains; below it, a wider probe
  // holds recall meanwhile.
  const double restore = std::isnan(upkeep_.fitted_recall)
                             ? kTargetStageOneRecall
                             : std::min(kTargetStageOneRecall, upkeep_.fitted_recall);
  if (check->recall >= restore) return Status::OK();
  for (size_t i = 1; i < ladder.size(); ++i) {
    if (recalls[i] >= restore) {
      check->retuned_knob = ladder[i].nprobe;
      check->retuned_recall = recalls[i];
      break;
    }
  }
  return Status::OK();
}

void IndexKeeper::NoteCheckFailed(const UpkeepCheck& check, const std::string& why) {
  upkeep_.changes_since_check = std::max<int64_t>(0, upkeep_.changes_since_check - check.changes);
  upkeep_.checked_sequence = check.sequence;
  upkeep_.checked_time = int64_t(std::time(nullptr));
  upkeep_.note = "check at sequence " + std::to_string(check.sequence) + " failed: " + why;
  upkeep_unsaved_ = true;
}

void IndexKeeper::ApplyRetune(const UpkeepCheck& check) {
  index::CoarseSearchKnobs knobs;
  knobs.nprobe = check.retuned_knob;
  index_->AdoptKnobs(knobs, check.retuned_recall);
  upkeep_.note = "re-tuned at sequence " + std::to_string(check.sequence) + ": " + Reason(check) +
                 "; nprobe " + std::to_string(check.retuned_knob) + " finds " +
                 Fixed(check.retuned_recall, 3) + " while the index is retrained";
  upkeep_unsaved_ = true;
}

void IndexKeeper::RecordCheck(const UpkeepCheck& check, const std::string& failed) {
  upkeep_unsaved_ = true;
  // Writes applied since the measurement count towards the next check.
  upkeep_.changes_since_check = std::max<int64_t>(0, upkeep_.changes_since_check - check.changes);
  upkeep_.checked_sequence = check.sequence;
  upkeep_.checked_time = int64_t(std::time(nullptr));
  upkeep_.checked_recall = check.recall;
  upkeep_.checked_imbalance = check.imbalance;
  if (!check.retrain) {
    index_->set_coarse_recall(check.recall);
    upkeep_.note = "checked at sequence " + std::to_string(check.sequence) + ": recall estimate " +
                   Fixed(check.recall, 3) + " at nprobe " + std::to_string(check.knob) + " after " +
                   Grouped(check.changes) + " changes";
    if (!std::isnan(check.imbalance)) {
      upkeep_.note += "; list imbalance " + Fixed(check.imbalance, 3) + " (" +
                      Fixed(check.imbalance_baseline, 3) + " after training)";
    }
    return;
  }
  upkeep_.note = "checked at sequence " + std::to_string(check.sequence) + ": " + Reason(check) +
                 "; not retrained: " + (failed.empty() ? std::string("abandoned") : failed);
  if (check.retuned_knob > 0) {
    upkeep_.note += "; nprobe " + std::to_string(check.retuned_knob) + " finds " +
                    Fixed(check.retuned_recall, 3);
  } else {
    index_->set_coarse_recall(check.recall);
  }
}

Status IndexKeeper::BuildIndex(const CollectionSpec& spec, const std::vector<uint8_t>& rows,
                               const std::vector<int64_t>& ids,
                               std::unique_ptr<index::CoarseIndex>* out) {
  std::unique_ptr<index::CoarseIndex> fresh;
  HEDGEDB_RETURN_IF_ERROR(index::CoarseIndex::Create(spec, &fresh));
  if (int64_t(ids.size()) < fresh->train_rows_wanted()) {
    return Status::InvalidArgument("too few live items to train the index");
  }
  // FAISS's k-means samples what it needs (256 rows per list) of these.
  HEDGEDB_RETURN_IF_ERROR(fresh->Train(rows.data(), int64_t(ids.size())));
  HEDGEDB_RETURN_IF_ERROR(fresh->Add(rows.data(), int64_t(ids.size()), ids.data()));
  HEDGEDB_RETURN_IF_ERROR(Tune(spec, fresh.get(), rows, ids));
  *out = std::move(fresh);
  return Status::OK();
}

Status IndexKeeper::SaveIndex(const index::CoarseIndex& fresh, const UpkeepCheck& check) const {
  if (read_only_) return Status::NotSupported("a reader writes no index file");
  return fresh.Save(
      index_path_, meta_->sequence, binding_,
      index::EncodeIndexUpkeep(AfterRetrain(fresh, check, int64_t(std::time(nullptr)))));
}

index::IndexUpkeep IndexKeeper::AfterRetrain(const index::CoarseIndex& fresh,
                                             const UpkeepCheck& check, int64_t now) const {
  index::IndexUpkeep u = upkeep_;
  u.changes_since_check = 0;
  u.fitted_knob = fresh.default_knobs().nprobe;
  u.fitted_recall = fresh.coarse_recall();
  u.coarse_recall = fresh.coarse_recall();
  u.oversampling = fresh.default_oversampling();
  ++u.retrains;
  u.checked_sequence = u.retrained_sequence = meta_->sequence;
  u.checked_time = u.retrained_time = now;
  u.checked_recall = check.recall;
  u.checked_imbalance = check.imbalance;
  // The imbalance over the items the new lists were trained on (a retrain
  // in the background) or hold (inline, the same).
  const double adopted_imbalance = fresh.ListImbalance();
  u.fitted_imbalance =
      std::isnan(check.trained_imbalance) ? adopted_imbalance : check.trained_imbalance;
  u.retrain_reason = Reason(check);
  if (check.best_knob > check.knob) {
    u.retrain_reason +=
        ", " + Fixed(check.best_recall, 3) + " at nprobe " + std::to_string(check.best_knob);
  }
  u.note = "retrained at sequence " + std::to_string(meta_->sequence) + ": " + u.retrain_reason +
           "; the new index finds " + Fixed(fresh.coarse_recall(), 3) + " at nprobe " +
           std::to_string(fresh.default_knobs().nprobe);
  if (!std::isnan(u.fitted_imbalance)) {
    u.note += ", list imbalance " + Fixed(u.fitted_imbalance, 3) + " on its training items";
    if (std::fabs(adopted_imbalance - u.fitted_imbalance) >= 0.0005) {
      u.note += " (" + Fixed(adopted_imbalance, 3) + " with the writes made meanwhile)";
    }
  }
  return u;
}

std::string IndexKeeper::UpkeepRecord() const {
  index::IndexUpkeep u = upkeep_;
  u.coarse_recall = index_->coarse_recall();
  u.oversampling = index_->default_oversampling();
  return index::EncodeIndexUpkeep(u);
}

void IndexKeeper::LoadUpkeep(const std::string& record, uint64_t file_sequence) {
  if (record.empty()) return;  // a file of before version 3
  index::IndexUpkeep u;
  const Status s = index::DecodeIndexUpkeep(record, index_path_, &u);
  if (!s.ok()) {
    upkeep_.note = "upkeep record not read (counting starts again): " + s.ToString();
    // Without the fitted candidates the header's estimate says nothing:
    // forget it, so that the next save fits again (Save).
    index_->RestoreFit(0, std::numeric_limits<double>::quiet_NaN(), index_->coarse_recall());
    return;
  }
  // The fit belongs to the index, whatever the counting below keeps.
  index_->RestoreFit(u.oversampling, index_->recall_estimate(), u.coarse_recall);
  if (u.checked_sequence > file_sequence || u.retrained_sequence > file_sequence) {
    // Saved with the index at file_sequence, it cannot tell of later checks.
    upkeep_.note =
        "upkeep record not used (counting starts again): it is past the index file's "
        "sequence " +
        std::to_string(file_sequence);
    return;
  }
  // A record from before the index was fitted (0) keeps the file's knob.
  if (u.fitted_knob <= 0) {
    u.fitted_knob = upkeep_.fitted_knob;
    u.fitted_recall = upkeep_.fitted_recall;
  }
  // A record from before the imbalance (version 1) takes the loaded index's
  // as the baseline: what it has become since its training is not known, so
  // only a further growth counts.
  if (std::isnan(u.fitted_imbalance)) u.fitted_imbalance = upkeep_.fitted_imbalance;
  upkeep_ = std::move(u);
}

void IndexKeeper::AdoptIndex(std::unique_ptr<index::CoarseIndex>* fresh, bool saved,
                             const UpkeepCheck& check) {
  index_.swap(*fresh);
  indexed_rows_ = table_->rows();
  tombstones_ = 0;
  if (saved) {
    index_sequence_ = meta_->sequence;
    unsaved_vectors_ = 0;
  } else {
    unsaved_vectors_ = std::max<int64_t>(1, index_->ntotal());
  }
  upkeep_ = AfterRetrain(*index_, check, int64_t(std::time(nullptr)));
  if (!saved) upkeep_.note += " (its file is saved at the next flush)";
}

}  // namespace query
}  // namespace hedgedb
