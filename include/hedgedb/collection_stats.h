// What a collection reports about itself: its stored calibrations and stats.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hedgedb/collection_spec.h"
#include "hedgedb/kinds.h"

namespace hedgedb {

// A calibration stored for one score of a collection (DB::Calibrate).
struct CalibrationInfo {
  ScoreType score = ScoreType::kMc;  // resolved
  std::string method;                // "platt", "beta", "isotonic" or "conditional"
  int64_t pairs = 0;                 // labelled pairs it was fitted on
  double fit_base_rate = 0;          // their positive rate
  double base_rate = 0;              // the rate it is calibrated for
  int samples = 0;                   // Monte Carlo samples of the pair scores (0: not MC)
  uint64_t sequence = 0;             // collection sequence when fitted
  std::string reason;                // why this method won
  // A conditional map reads the result's context (rank, gap to the next
  // score, eta: docs/calibration.md); conditioned_on lists its features.
  // Maps stored before version 2 are unconditional.
  bool conditional = false;
  std::string conditioned_on;
  // Labelled queries held out of the fit whose scores give conformal match
  // sets (SearchOptions::coverage); 0: none. Their non-matching pairs bound
  // the false-match rate of SearchOptions::max_false_match_rate.
  int64_t conformal_queries = 0;
  int64_t held_out_non_matches = 0;
};

struct CollectionStats {
  CollectionSpec spec;
  int64_t items = 0;            // live items
  int64_t max_id = -1;          // largest id ever held (-1: none)
  uint64_t sequence = 0;        // sequence number of the last write
  uint64_t index_sequence = 0;  // sequence number the coarse index covers
  int64_t index_vectors = 0;    // vectors in the coarse index (incl. tombstones)
  // The index is trained once enough items arrived, at the first search or
  // flush after that (ingest never waits for it); until then searches are
  // exhaustive.
  bool index_trained = false;
  // The index failed to take a write (index_note says why): searches score
  // every item exactly, the index is never saved as covering the write, and
  // the next open rebuilds it.
  bool index_stale = false;
  // What happened to the index on open or since: "" (loaded and current), or
  // e.g. "rebuilt from the records: index file ... fails its checksum".
  std::string index_note;
  // Non-empty if the collection lost acknowledged writes: on open its index
  // file covered a sequence number past the store's (the store's write-ahead
  // log was damaged or deleted). Names both numbers; the index was rebuilt
  // from the records that remain.
  std::string lost_writes;
  std::string index_description;  // factory string in use
  // Where the rows that stage 2 scores came from when the collection opened:
  // "snapshot" (its arena snapshot file, memory-mapped, so the operating
  // system pages those rows in and out) or "records" (decoded from the
  // record store; the snapshot is then written for the next open).
  std::string arena_source;
  // Why an arena snapshot that exists was not used (stale, damaged), or why
  // it could not be saved; "" when neither happened.
  std::string arena_note;
  // Bytes of rows mapped from the snapshot file (the rest of the rows are in
  // the process's memory).
  int64_t arena_mapped_bytes = 0;
  // The default search settings (0: not an IVF / HNSW index), fitted to the
  // data when the index is trained (query/knob_fit.h): nprobe or efSearch
  // (doubling from 1 and 100) and the stage-1 candidate count
  // at k = 10 (doubling from 100 to 1,600) of the cheapest pair at which a
  // default search finds at least 99% of the exact top-10 by the default
  // score, with 50 of the collection's own items as queries (each left out
  // of its own truth and candidates). A search that
  // leaves candidates and oversampling at 0 asks for k x index_candidates / 10.
  int index_nprobe = 0;
  int index_ef_search = 0;
  int64_t index_candidates = 0;  // 0: none fitted (searches use k x 10)
  // The final recall@10 measured at those settings (the fraction of the
  // exact top-10 they return); NaN if never fitted (codes, Flat, an
  // untrained index, or a file from before the fit, which is fitted at the
  // next save).
  double index_recall_estimate = std::numeric_limits<double>::quiet_NaN();
  // Stage 1's recall at the default knobs: the fraction of the exact coarse
  // top-100 it returns, measured by the fit and by each upkeep check below,
  // which compare it with the fit's to see the index drift.
  double index_coarse_recall = std::numeric_limits<double>::quiet_NaN();
  // Seconds the last fit took in this process (0: none since open).
  double index_fit_seconds = 0;
  // Upkeep of a trained IVF index while items come and go (docs/concepts.md,
  // "Coarse indexes"; Options::index_recheck_fraction): once the vectors
  // added or removed since the last check reach that fraction of the live
  // items, the collection measures index_recall_estimate again on its own
  // live items, and below Options::index_retrain_recall retrains the index
  // in the background (raising nprobe meanwhile where that helps). All but
  // index_retraining are saved in the index file with the index they
  // describe and read back on open (a writer's or a reader's), so they span
  // reopens; 0 / "": nothing yet, or the index file predates them (format
  // version 2) or was rebuilt.
  int64_t index_changes_since_check = 0;  // vectors added or removed since
  uint64_t index_checked_sequence = 0;    // sequence at the last check
  int64_t index_checked_time = 0;         // its time, Unix seconds
  uint64_t index_retrained_sequence = 0;  // sequence the last retrain covered
  int64_t index_retrained_time = 0;       // when it was swapped in, Unix seconds
  int64_t index_retrains = 0;             // retrains swapped in
  bool index_retraining = false;          // one is running now
  // The last check's outcome, e.g. "retrained at sequence 812: recall
  // estimate 0.712 < 0.90 at nprobe 16 after 120,000 changes (100,000 live
  // items); the new index finds 0.990 at nprobe 16".
  std::string index_upkeep_note;
  // Why the last retrain happened (the part of the note after "retrained
  // at sequence N: ").
  std::string index_retrain_reason;
  // The IVF lists' imbalance now (nlist * sum(size^2) / (sum size)^2,
  // FAISS's imbalance_factor: the vectors a query scans per probe, over
  // n / nlist; 1 for even lists), and right after the last training, the
  // baseline that Options::index_retrain_imbalance multiplies. NaN: not an
  // IVF index, or not trained; the baseline of an index file whose record
  // predates it is the loaded index's.
  double index_imbalance = std::numeric_limits<double>::quiet_NaN();
  double index_imbalance_baseline = std::numeric_limits<double>::quiet_NaN();
  // Calibrations stored for the collection's scores (DB::Calibrate), and a
  // note when one is damaged (it is then not used).
  std::vector<CalibrationInfo> calibrations;
  std::string calibration_note;
};

}  // namespace hedgedb
