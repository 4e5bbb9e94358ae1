// Searcher: the read side of Collection::Search. It checks and plans a
// search, finds the items that pass its filter, runs stage 1 (candidates
// from the coarse index, or an exact scan of the arena's codes) and stage 2
// (exact rescoring, adaptive samples), and the threshold searches (min-prob,
// conformal coverage, false-match rate), over a const view of one
// collection's rows, index and calibration maps (SearchState). The
// collection hands it that view under its state lock, held shared and
// unchanged while the Searcher runs; the collection keeps writes, locks,
// training, catch-up and the reading of payloads.
//
// Calibration work that decides which items a search returns (conditional
// maps, conformal sets) belongs here, not in Collection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "calibration/calibration_map.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"
#include "index/coarse_index.h"
#include "query/item_filter.h"
#include "query/row_table.h"
#include "query/scorer.h"

namespace hedgedb {
namespace query {

// What a search reads of a collection. Every pointer is set (payload_index:
// where a filter has payload conditions) and what it points to stays
// unchanged while a Searcher over it runs.
struct SearchState {
  const CollectionSpec* spec = nullptr;
  int64_t max_id = -1;             // the largest id ever held (-1: none)
  const RowTable* rows = nullptr;  // the items: rows, ids, labels, live rows, id map
  const index::CoarseIndex* index = nullptr;
  // Searches are exhaustive while the index is untrained or stale.
  bool index_stale = false;
  int64_t tombstones = 0;  // dead vectors still in the index
  // Calibration maps by resolved score type.
  const std::map<ScoreType, calibration::CalibrationMap>* calibrations = nullptr;
  const PayloadFieldIndex* payload_index = nullptr;
};

// A checked search: resolved score parameters, the compiled filter and the
// packed query rows. Needs the collection's spec only (Searcher::Plan).
struct SearchPlan {
  RowShape shape;
  ScoreParams params;
  CompiledFilter filter;
  int64_t queries = 0;      // query rows
  size_t query_floats = 0;  // floats per query row
  std::vector<float> rows;  // queries x query_floats
  bool with_eta = false;    // the kind has an uncertainty and it was asked for
  const calibration::CalibrationMap* map = nullptr;  // of params.score, if stored (Run)
};

class Searcher {
 public:
  explicit Searcher(const SearchState& state);

  // Checks `options` and `queries` against `spec`, compiles the filter and
  // packs the queries; reads no collection state, so that a bad request
  // fails before the collection trains its index or takes its lock.
  static Status Plan(const CollectionSpec& spec, const EmbeddingView& queries,
                     const SearchOptions& options, SearchPlan* plan);

  // Runs a planned search: one result per query, best hit first; payloads
  // are not read (the collection reads them from the record store, outside
  // its lock). Sets plan->map.
  Status Run(SearchPlan* plan, const SearchOptions& options,
             std::vector<SearchResult>* results) const;

 private:
  // The live items that pass a search's filter (searcher.cc).
  class PassingSet;
  // Live rows of stage-1 candidate ids (unknown and removed ids dropped, and
  // those `passing` does not hold, if not null), in candidate order, without
  // duplicates.
  void CandidateRows(const int64_t* ids, int64_t n, std::vector<int64_t>* rows,
                     const PassingSet* passing = nullptr) const;
  // The rows that pass `filter`.
  void FindPassing(const CompiledFilter& filter, PassingSet* passing) const;
  // Codes over a flat code index: stage 1 is an exact top-k' scan of the
  // arena's codes (PreparedQuery::TopRows: a quantized pre-scan), which
  // finds the same candidates as FAISS's IndexPQ scan of the same codes,
  // several times faster (bench/RESULTS.md, "Memory per item and batched
  // throughput").
  bool ScansArena() const;
  // The best kprime rows of `among` for query q by an exact scan.
  Status ArenaCandidates(const SearchPlan& plan, int64_t q, const std::vector<int64_t>& among,
                         int64_t kprime, std::vector<int64_t>* rows) const;
  // Stage 1 of query q for a filtered top-k search: at least `kprime`
  // candidate rows that pass, or every passing row when stage 1 cannot find
  // that many (docs/concepts.md, "Filtered search"). `passing` null: every
  // live row passes (an unfiltered search whose first stage 1 came back
  // with fewer than k live items).
  Status FilteredCandidates(const SearchPlan& plan, const SearchOptions& options, int64_t q,
                            int64_t kprime, const PassingSet* passing,
                            std::vector<int64_t>* rows) const;
  // Fills result->hits from `rows` (already best first), their scores, and
  // for mc the samples and standard error of each score. `contexts` give
  // each hit's rank in the query's ranking and the score ranked after it;
  // FillHits adds the etas a conditional map reads and computes `prob`.
  void FillHits(const SearchPlan& plan, int64_t q, const std::vector<int64_t>& rows,
                const std::vector<float>& scores, std::vector<calibration::PairContext> contexts,
                const std::vector<int>& samples, const std::vector<float>& std_errors,
                SearchResult* result) const;
  // Stage 2 of one query over `rows`: exact scores, then (adaptive_samples)
  // more samples where the k-th boundary is uncertain; fills the top k.
  // With `scores` (rows.size() of them, ScoreRows' numbers for this query),
  // they are not computed again; with `prepared` (the query as PrepareQuery
  // made it for these params), neither is it.
  Status Rescore(const SearchPlan& plan, const SearchOptions& options, int64_t q,
                 const std::vector<int64_t>& rows, SearchResult* result,
                 const float* scores = nullptr,
                 std::unique_ptr<PreparedQuery> prepared = nullptr) const;
  // Rescore for every query of the plan over the same rows (an exhaustive
  // search, every passing item): the rows are scored for a group of queries
  // at a time with ScoreRowsShared, each row read once per group, the threads
  // splitting the rows; then each query ranks its scores. The results are
  // Rescore's, bitwise.
  void RescoreSameRows(const SearchPlan& plan, const SearchOptions& options,
                       const std::vector<int64_t>& rows, std::vector<SearchResult>* results,
                       std::vector<Status>* errors) const;
  // The probability threshold of each query of a threshold search:
  // min_prob, or the map's threshold at the false-match rate or at the
  // conformal coverage (of the query's quartile of eta, coverage_by_eta).
  // Needs plan.map.
  static Status QueryThresholds(const SearchPlan& plan, const SearchOptions& options,
                                std::vector<double>* min_prob);
  // SearchOptions::min_prob for query q.
  Status ThresholdSearch(const SearchPlan& plan, const SearchOptions& options, int64_t q,
                         bool exhaustive, const PassingSet* passing, SearchResult* result) const;

  // The state, by the names Collection gives it.
  const CollectionSpec& spec_;
  const int64_t max_id_;
  const RowArena& arena_;
  const size_t row_bytes_;
  const std::vector<int64_t>& row_ids_;
  const std::vector<int64_t>& row_labels_;
  const std::vector<uint8_t>& row_flags_;
  const IdMap& row_of_id_;
  const std::vector<int64_t>& live_rows_;
  const index::CoarseIndex* const index_;
  const bool index_stale_;
  const int64_t tombstones_;
  const std::map<ScoreType, calibration::CalibrationMap>& calibrations_;
  const PayloadFieldIndex* const payload_index_;
};

}  // namespace query
}  // namespace hedgedb
