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
  // The default stage-1 settings (0: not an IVF / HNSW index), fitted to the
  // data when the index is trained: the smallest nprobe or efSearch, doubling
  // from 8 (or nlist / 64) and 64, at which stage 1 finds at least 95% of the
  // exact coarse top-100 for 100 of the collection's own items as queries.
  int index_nprobe = 0;
  int index_ef_search = 0;
  // The fraction measured at those settings; NaN if never measured (codes,
  // Flat, or an untrained index).
  double index_recall_estimate = std::numeric_limits<double>::quiet_NaN();
  // Calibrations stored for the collection's scores (DB::Calibrate), and a
  // note when one is damaged (it is then not used).
  std::vector<CalibrationInfo> calibrations;
  std::string calibration_note;
};

}  // namespace hedgedb
