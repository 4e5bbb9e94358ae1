#include "query/searcher.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/row_layout.h"
#include "common/spec_limits.h"
#include "query/row_checks.h"

namespace hedgedb {
namespace query {
namespace {

// Threshold search: stage-1 candidates of the first round (doubling after).
constexpr int64_t kThresholdFirstCandidates = 256;
// Adaptive samples: a score's 95% interval is +- this many standard errors.
constexpr double kAdaptiveZ = 1.96;
// Filtered search: when at most this many items pass (or at most the
// stage-1 candidate count), score them all exactly instead of running stage
// 1: about as fast, and exact (bench/RESULTS.md, "Filtered search").
constexpr int64_t kExactFilterRows = 2048;
// Filtered and threshold search: the largest HNSW efSearch stage 1 widens
// to, the largest a caller may ask for.
constexpr int kMaxFilteredEfSearch = kMaxEfSearch;
// Graph indexes (HNSW without lists): FAISS 1.7's walk with a selector
// costs several unfiltered walks, so where at least this fraction passes,
// stage 1 asks for 2k'/f unfiltered candidates instead, and where fewer
// than kExactFilterRowsGraph pass it scores them all (measured:
// bench/RESULTS.md, "Filtered search").
constexpr double kGraphPostFilterFraction = 0.25;
constexpr int64_t kExactFilterRowsGraph = 16384;

// The stage-1 candidate count a top-k search asks for: the explicit one, else
// k x the explicit oversampling, else k x the index's fitted oversampling
// (kDefaultOversampling where none is fitted).
int64_t DefaultCandidates(const SearchOptions& options, const index::CoarseIndex& index) {
  if (options.candidates > 0) return options.candidates;
  int oversampling = options.oversampling;
  if (oversampling <= 0) oversampling = index.default_oversampling();
  if (oversampling <= 0) oversampling = kDefaultOversampling;
  return int64_t(options.k) * oversampling;
}

}  // namespace

Searcher::Searcher(const SearchState& s)
    : spec_(*s.spec),
      max_id_(s.max_id),
      arena_(s.rows->arena()),
      row_bytes_(s.rows->row_bytes()),
      row_ids_(s.rows->ids()),
      row_labels_(s.rows->labels()),
      row_flags_(s.rows->flags()),
      row_of_id_(s.rows->row_of_id()),
      live_rows_(s.rows->live_rows()),
      index_(s.index),
      index_stale_(s.index_stale),
      tombstones_(s.tombstones),
      calibrations_(*s.calibrations),
      payload_index_(s.payload_index) {}

Status Searcher::Plan(const CollectionSpec& s, const EmbeddingView& queries,
                      const SearchOptions& options, SearchPlan* plan) {
  if (options.coverage != 0) {
    if (!(options.coverage > 0 && options.coverage < 1)) {
      return Status::InvalidArgument("coverage must be in (0, 1), got " +
                                     std::to_string(options.coverage));
    }
    if (options.min_prob != 0) {
      return Status::InvalidArgument("coverage and min-prob exclude each other");
    }
  }
  if (options.coverage_by_eta && options.coverage == 0) {
    return Status::InvalidArgument("coverage by eta needs a coverage");
  }
  if (options.max_false_match_rate != 0) {
    if (!(options.max_false_match_rate > 0 && options.max_false_match_rate < 1)) {
      return Status::InvalidArgument("max false-match rate must be in (0, 1), got " +
                                     std::to_string(options.max_false_match_rate));
    }
    if (options.min_prob != 0 || options.coverage != 0) {
      return Status::InvalidArgument(
          "max false-match rate excludes min-prob and coverage (each sets the threshold)");
    }
  }
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return Status::InvalidArgument("confidence must be in (0, 1), got " +
                                   std::to_string(options.confidence));
  }
  const bool threshold =
      options.min_prob != 0 || options.coverage != 0 || options.max_false_match_rate != 0;
  if (!threshold && options.k < 1) return Status::InvalidArgument("k must be >= 1");
  if (options.min_prob != 0 && !(options.min_prob > 0 && options.min_prob <= 1)) {
    return Status::InvalidArgument("min-prob must be in (0, 1], got " +
                                   std::to_string(options.min_prob));
  }
  if (threshold && options.max_results < 1) {
    return Status::InvalidArgument("max-results must be >= 1");
  }
  if (options.candidates < 0) return Status::InvalidArgument("candidates must be >= 0");
  if (options.oversampling < 0) {
    return Status::InvalidArgument("oversampling must be >= 1 (or 0: the collection's default)");
  }
  if (options.nprobe < 0 || options.ef_search < 0) {
    return Status::InvalidArgument("nprobe and ef-search must be >= 0");
  }
  if (options.ef_search > kMaxEfSearch) {
    return Status::InvalidArgument("ef-search must be at most " + std::to_string(kMaxEfSearch) +
                                   ", got " + std::to_string(options.ef_search));
  }
  HEDGEDB_RETURN_IF_ERROR(CheckQueryRows(RowShapeOf(s), queries));
  plan->shape = RowShapeOf(s);
  HEDGEDB_RETURN_IF_ERROR(ScoreParamsFor(s, options.score, options.samples, options.has_seed,
                                         options.seed, &plan->params));
  plan->queries = queries.n;
  plan->query_floats = QueryRowSize(s);
  plan->rows.resize(size_t(queries.n) * plan->query_floats);
  for (int64_t q = 0; q < queries.n; ++q) {
    PackQueryRow(plan->shape, queries, q, plan->rows.data() + q * plan->query_floats);
  }
  // Codes have a query uncertainty (the entropy of the query's table) but no
  // item one: hits of codes say NaN.
  plan->with_eta = options.with_uncertainty && s.kind != Kind::kPoint;
  return CompileFilter(options.filter, &plan->filter);
}

// The live items that pass a filter, as rows (rescoring) and as ids (what
// FAISS's selector asks about). Ids usually count up from 0, so they are
// looked up in a byte per id; sparse or negative ids go through row_of_id_.
class Searcher::PassingSet : public index::IdFilter {
 public:
  std::vector<int64_t> rows;    // ascending
  std::vector<uint8_t> by_row;  // 1: the row passes (size: all rows)
  std::vector<uint8_t> by_id;   // 1: the id passes (dense ids only)
  bool dense = false;
  const IdMap* row_of_id = nullptr;

  bool PassesRow(int64_t r) const { return by_row[size_t(r)] != 0; }
  bool Allows(int64_t id) const override {
    if (dense) return id >= 0 && id < int64_t(by_id.size()) && by_id[size_t(id)];
    const int64_t r = row_of_id->Find(id);
    return r >= 0 && by_row[size_t(r)];
  }
};

void Searcher::FindPassing(const CompiledFilter& filter, PassingSet* passing) const {
  const size_t nrows = row_ids_.size();
  passing->by_row.assign(nrows, 0);
  // Payload conditions: count, per row, the conditions met so far.
  std::vector<uint32_t> met;
  if (!filter.payload.empty()) {
    met.assign(nrows, 0);
    for (size_t c = 0; c < filter.payload.size(); ++c) {
      const std::vector<int64_t>* rows =
          payload_index_->Rows(filter.payload[c].first, filter.payload[c].second);
      if (!rows) return;  // nothing has this value: nothing passes
      for (int64_t r : *rows) {
        if (met[size_t(r)] == c) met[size_t(r)] = uint32_t(c + 1);
      }
    }
  }
  const size_t conditions = filter.payload.size();
  for (int64_t r : live_rows_) {
    if (!met.empty() && met[size_t(r)] != conditions) continue;
    if (!filter.PassesLabel((row_flags_[r] & kRowHasLabel) != 0, row_labels_[r])) continue;
    passing->by_row[size_t(r)] = 1;
    passing->rows.push_back(r);
  }
  passing->row_of_id = &row_of_id_;
  // No "max_id + 1": the largest id may be INT64_MAX.
  passing->dense = max_id_ >= 0 && max_id_ < 8 * int64_t(nrows) + 4096;
  if (passing->dense) {
    passing->by_id.assign(size_t(max_id_) + 1, 0);
    for (int64_t r : passing->rows) {
      if (row_ids_[r] < 0 || row_ids_[r] > max_id_) {
        passing->dense = false;
        break;
      }
      passing->by_id[size_t(row_ids_[r])] = 1;
    }
  }
}

void Searcher::CandidateRows(const int64_t* ids, int64_t n, std::vector<int64_t>* rows,
                             const PassingSet* passing) const {
  rows->clear();
  rows->reserve(size_t(n));
  // The id map's slots are asked for this many candidates ahead (one
  // prefetch site, before and in the loop: Simd.HotLoopsKeepTheirPrefetches
  // checks that it is in the binary).
  constexpr int64_t kAhead = 16;
  bool minus_one_seen = false;
  for (int64_t j = -kAhead; j < n; ++j) {
    if (j + kAhead < n) row_of_id_.Prefetch(ids[j + kAhead]);
    if (j < 0) continue;
    // Not "ids[j] < 0": items may have negative ids. Stage 1 pads a short
    // answer with -1, which finds no row unless an item has id -1: that item
    // is taken once, however many padding slots name it.
    if (ids[j] == -1) {
      if (minus_one_seen) continue;
      minus_one_seen = true;
    }
    const int64_t r = row_of_id_.Find(ids[j]);
    if (r < 0 || (passing && !passing->PassesRow(r))) continue;
    rows->push_back(r);
  }
  // Otherwise an id can come twice only from a graph's tombstone and the
  // id's new vector (IVF and flat indexes remove physically, and an upsert
  // retires the old vector first): keep its first. Checked on a sorted copy,
  // which is cheaper than a hash set per search, and rarely finds any.
  if (tombstones_ == 0) return;
  std::vector<int64_t> sorted(*rows);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) return;
  std::unordered_set<int64_t> seen;
  rows->erase(
      std::remove_if(rows->begin(), rows->end(), [&](int64_t r) { return !seen.insert(r).second; }),
      rows->end());
}

bool Searcher::ScansArena() const {
  return spec_.kind == Kind::kCodes && index_->shape().ivf_lists == 0;
}

Status Searcher::ArenaCandidates(const SearchPlan& plan, int64_t q,
                                 const std::vector<int64_t>& among, int64_t kprime,
                                 std::vector<int64_t>* rows) const {
  std::unique_ptr<PreparedQuery> prepared;
  HEDGEDB_RETURN_IF_ERROR(
      PrepareQuery(plan.shape, plan.params, plan.rows.data() + q * plan.query_floats, &prepared));
  // `among` is ascending (live rows, or the passing ones): ending at its
  // size - 1, it is every row 0..size-1, and the scan need not read the ids.
  const bool every_row = !among.empty() && among.back() == int64_t(among.size()) - 1;
  if (!prepared->TopRows(arena_.data(), row_bytes_, every_row ? nullptr : among.data(),
                         among.size(), size_t(kprime), rows)) {
    *rows = among;  // no faster scan for this score: rescore them all
  }
  return Status::OK();
}

Status Searcher::FilteredCandidates(const SearchPlan& plan, const SearchOptions& options, int64_t q,
                                    int64_t kprime, const PassingSet* passing,
                                    std::vector<int64_t>* rows) const {
  const float* query = plan.rows.data() + q * plan.query_floats;
  const std::vector<int64_t>& among = passing ? passing->rows : live_rows_;
  // Among f of the items, the best kprime that pass lie about 1/f times
  // further down the unfiltered ranking: stage 1 starts that much wider.
  const double fraction = double(among.size()) / double(std::max<size_t>(live_rows_.size(), 1));
  const int64_t lists = index_->shape().ivf_lists;
  index::CoarseSearchKnobs knobs = index_->KnobsFor({options.nprobe, options.ef_search});
  if (lists > 0) {
    knobs.nprobe =
        int(std::min<double>(double(lists), std::ceil(std::max(knobs.nprobe, 1) / fraction)));
  }
  if (knobs.ef_search > 0) {
    knobs.ef_search = int(std::min<double>(
        kMaxFilteredEfSearch, std::ceil(std::max<int64_t>(knobs.ef_search, kprime) / fraction)));
  }
  if (ScansArena()) return ArenaCandidates(plan, q, among, kprime, rows);
  std::vector<int64_t> coarse;
  const bool graph = index_->shape().graph_only();
  if (index_->supports_filter() && !(graph && fraction >= kGraphPostFilterFraction)) {
    while (true) {
      HEDGEDB_RETURN_IF_ERROR(
          passing ? index_->SearchFiltered(query, 1, kprime, knobs, *passing, &coarse)
                  : index_->Search(query, 1, kprime, knobs, &coarse));
      CandidateRows(coarse.data(), kprime, rows, passing);
      if (int64_t(rows->size()) >= kprime) return Status::OK();
      // Too few passing items in the probed lists (or the visited graph):
      // widen, and score every passing item once stage 1 has no more to give.
      const bool more_lists = lists > 0 && knobs.nprobe < lists;
      const bool more_graph = graph && knobs.ef_search < kMaxFilteredEfSearch;
      if (!more_lists && !more_graph) break;
      if (more_lists) knobs.nprobe = int(std::min<int64_t>(int64_t(knobs.nprobe) * 2, lists));
      if (more_graph) knobs.ef_search = std::min(knobs.ef_search * 2, kMaxFilteredEfSearch);
    }
  } else {
    // The index cannot filter inside its scan (flat PQ), or its filtered
    // walk costs more (a graph, most items passing): ask for enough
    // unfiltered candidates that kprime of them should pass, doubling.
    const int64_t slots = std::max<int64_t>(index_->ntotal(), 1);
    int64_t wanted =
        std::min<int64_t>(slots, int64_t(std::ceil(2.0 * double(kprime) / fraction)) + tombstones_);
    while (true) {
      HEDGEDB_RETURN_IF_ERROR(index_->Search(query, 1, wanted, knobs, &coarse));
      CandidateRows(coarse.data(), wanted, rows, passing);
      if (int64_t(rows->size()) >= kprime) return Status::OK();
      if (wanted >= slots) break;
      wanted = std::min(wanted * 2, slots);
    }
  }
  *rows = among;
  return Status::OK();
}

void Searcher::FillHits(const SearchPlan& plan, int64_t q, const std::vector<int64_t>& rows,
                        const std::vector<float>& scores,
                        std::vector<calibration::PairContext> contexts,
                        const std::vector<int>& samples, const std::vector<float>& std_errors,
                        SearchResult* res) const {
  const size_t k = rows.size();
  // A conditional map reads the etas even when the caller did not ask for
  // them (with_uncertainty off).
  const bool query_eta = plan.with_eta || (plan.map && plan.map->ReadsQueryEta());
  const bool item_eta = plan.with_eta || (plan.map && plan.map->ReadsItemEta());
  float qeta = std::numeric_limits<float>::quiet_NaN();
  if (query_eta) {
    qeta = QueryUncertainty(plan.shape, plan.params, plan.rows.data() + q * plan.query_floats);
    if (plan.with_eta) res->query_uncertainty = qeta;
  }
  std::vector<float> eta(k, std::numeric_limits<float>::quiet_NaN());
  if (item_eta) {  // one batched call: hits share SIMD lanes
    UncertaintyRows(plan.shape, plan.params, arena_.data(), row_bytes_, rows.data(), k, eta.data());
  }
  res->hits.resize(k);
  for (size_t j = 0; j < k; ++j) {
    const int64_t r = rows[j];
    SearchHit& hit = res->hits[j];
    hit.id = row_ids_[r];
    hit.score = scores[j];
    hit.has_label = (row_flags_[r] & kRowHasLabel) != 0;
    hit.label = row_labels_[r];
    if (plan.with_eta) hit.uncertainty = eta[j];
    if (plan.map) {
      calibration::PairContext& context = contexts[j];
      context.query_eta = qeta;
      context.item_eta = eta[j];
      hit.prob = float(plan.map->Apply(scores[j], &context));
    }
    if (!samples.empty()) hit.samples = samples[j];
    if (!std_errors.empty()) hit.std_error = std_errors[j];
  }
}

namespace {

// Orders (row, score) best first; ties by id so results are deterministic.
void SortBestFirst(const std::vector<int64_t>& row_ids, std::vector<std::pair<int64_t, float>>* v,
                   size_t keep) {
  auto better = [&](const std::pair<int64_t, float>& a, const std::pair<int64_t, float>& b) {
    if (a.second != b.second) return a.second > b.second;
    return row_ids[a.first] < row_ids[b.first];
  };
  keep = std::min(keep, v->size());
  std::partial_sort(v->begin(), v->begin() + keep, v->end(), better);
  v->resize(keep);
}

// SortBestFirst, with equal scores ordered by the prepared query's exact
// keys where it has them (PreparedQuery::TieBreakKeys), so that a float tie
// does not fall back to id order. Only candidates that score at least the
// keep-th score can enter the top `keep` once ties are broken: they alone
// get keys.
void RankBestFirst(const PreparedQuery& prepared, const uint8_t* arena, size_t row_bytes,
                   const std::vector<int64_t>& row_ids, std::vector<std::pair<int64_t, float>>* v,
                   size_t keep) {
  keep = std::min(keep, v->size());
  if (keep == 0 || !prepared.TieBreakKeys(arena, row_bytes, nullptr, 0, nullptr)) {
    SortBestFirst(row_ids, v, keep);
    return;
  }
  auto better = [&](const std::pair<int64_t, float>& a, const std::pair<int64_t, float>& b) {
    return a.second > b.second;
  };
  std::partial_sort(v->begin(), v->begin() + keep, v->end(), better);
  const float cutoff = (*v)[keep - 1].second;
  const auto end =
      std::partition(v->begin() + keep, v->end(),
                     [cutoff](const std::pair<int64_t, float>& p) { return p.second >= cutoff; });
  std::vector<std::pair<int64_t, float>> group(v->begin(), end);
  std::vector<int64_t> rows(group.size());
  for (size_t j = 0; j < group.size(); ++j) rows[j] = group[j].first;
  std::vector<double> keys(group.size());
  prepared.TieBreakKeys(arena, row_bytes, rows.data(), rows.size(), keys.data());
  std::vector<size_t> order(group.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](size_t a, size_t b) {
    if (group[a].second != group[b].second) return group[a].second > group[b].second;
    if (keys[a] != keys[b]) return keys[a] > keys[b];
    return row_ids[group[a].first] < row_ids[group[b].first];
  });
  v->resize(keep);
  for (size_t j = 0; j < keep; ++j) (*v)[j] = group[order[j]];
}

}  // namespace

Status Searcher::ThresholdSearch(const SearchPlan& plan, const SearchOptions& options, int64_t q,
                                 bool exhaustive, const PassingSet* passing,
                                 SearchResult* res) const {
  // A filter that stage 1 cannot apply, or that few items pass: score them all.
  if (passing &&
      (!index_->supports_filter() || int64_t(passing->rows.size()) <= kExactFilterRows)) {
    exhaustive = true;
  }
  std::unique_ptr<PreparedQuery> prepared;
  HEDGEDB_RETURN_IF_ERROR(
      PrepareQuery(plan.shape, plan.params, plan.rows.data() + q * plan.query_floats, &prepared));
  const calibration::CalibrationMap& map = *plan.map;
  std::unordered_map<int64_t, float> score_of_row;  // rows scored so far
  auto score_rows = [&](const std::vector<int64_t>& rows) {
    std::vector<int64_t> fresh;
    for (int64_t r : rows) {
      if (!score_of_row.count(r)) fresh.push_back(r);
    }
    std::vector<float> scores(fresh.size());
    prepared->ScoreRows(arena_.data(), row_bytes_, fresh.data(), fresh.size(), scores.data());
    for (size_t j = 0; j < fresh.size(); ++j) score_of_row[fresh[j]] = scores[j];
  };
  // Probabilities of the rows scored so far. A conditional map reads each
  // row's rank among them and the score ranked after it (the exact ranking
  // once stage 1 has found the qualifying items), and the etas.
  const bool reads_query_eta = map.ReadsQueryEta(), reads_item_eta = map.ReadsItemEta();
  const float query_eta =
      reads_query_eta
          ? QueryUncertainty(plan.shape, plan.params, plan.rows.data() + q * plan.query_floats)
          : std::numeric_limits<float>::quiet_NaN();
  std::unordered_map<int64_t, float> eta_of_row;
  std::vector<std::pair<int64_t, float>> ranking;  // every scored row, best first
  std::unordered_map<int64_t, double> prob_of_row;
  auto update_probs = [&]() {
    ranking.assign(score_of_row.begin(), score_of_row.end());
    prob_of_row.clear();
    if (!map.conditional()) {  // the score alone: no ranking needed
      for (const auto& rs : ranking) prob_of_row[rs.first] = map.Apply(rs.second);
      return;
    }
    RankBestFirst(*prepared, arena_.data(), row_bytes_, row_ids_, &ranking, ranking.size());
    if (reads_item_eta) {
      std::vector<int64_t> fresh;
      for (const auto& rs : ranking) {
        if (!eta_of_row.count(rs.first)) fresh.push_back(rs.first);
      }
      std::vector<float> eta(fresh.size());
      UncertaintyRows(plan.shape, plan.params, arena_.data(), row_bytes_, fresh.data(),
                      fresh.size(), eta.data());
      for (size_t j = 0; j < fresh.size(); ++j) eta_of_row[fresh[j]] = eta[j];
    }
    for (size_t j = 0; j < ranking.size(); ++j) {
      calibration::PairContext context;
      context.rank = int32_t(std::min<size_t>(j + 1, INT32_MAX));
      if (j + 1 < ranking.size()) context.next_score = ranking[j + 1].second;
      context.query_eta = query_eta;
      if (reads_item_eta) context.item_eta = eta_of_row[ranking[j].first];
      prob_of_row[ranking[j].first] = map.Apply(ranking[j].second, &context);
    }
  };
  auto qualifies = [&](int64_t r) { return prob_of_row.at(r) >= options.min_prob; };

  const int64_t slots = std::max<int64_t>(index_->ntotal(), 1);
  const int64_t lists = index_->shape().ivf_lists;
  int64_t kprime =
      std::max<int64_t>(options.candidates > 0 ? options.candidates : kThresholdFirstCandidates, 1);
  kprime = std::min(kprime + tombstones_, slots);
  index::CoarseSearchKnobs knobs = index_->KnobsFor({options.nprobe, options.ef_search});
  // The default nprobe is fitted to a top-10 (query/knob_fit.h) and can be
  // a list or two on clustered data. A threshold search wants every item
  // above the probability, often many more than 10, and its widening stops
  // once the worse half of the candidates holds none of them, which a
  // stage 1 of few lists shows too early: it starts no narrower than the
  // static nprobe (ThresholdSearch.MatchesAnExhaustiveScan, IVF32: from the
  // fitted nprobe 4 it found 569 of the 588 items at p >= 0.9).
  if (lists > 0 && options.nprobe <= 0) {
    knobs.nprobe = std::max(knobs.nprobe, index_->StaticKnobs().nprobe);
  }
  size_t found_before = 0;
  int round = 0;
  std::vector<int64_t> coarse, rows;
  while (!exhaustive) {
    const float* query = plan.rows.data() + q * plan.query_floats;
    HEDGEDB_RETURN_IF_ERROR(passing
                                ? index_->SearchFiltered(query, 1, kprime, knobs, *passing, &coarse)
                                : index_->Search(query, 1, kprime, knobs, &coarse));
    // Stage 1 pads its tail with -1; an item's id may be negative, so count
    // the padding from the end, not up to the first negative id. The
    // candidates are all kprime slots: an item of id -1 that is the last
    // one found would be cut with the padding (CandidateRows takes it once).
    int64_t returned = kprime;
    while (returned > 0 && coarse[size_t(returned - 1)] == -1) --returned;
    CandidateRows(coarse.data(), kprime, &rows, passing);
    score_rows(rows);
    update_probs();
    // Qualifying items among the worse half of the candidates say that more
    // may lie beyond them.
    size_t found = 0, in_tail = 0;
    for (size_t j = 0; j < rows.size(); ++j) {
      if (!qualifies(rows[j])) continue;
      ++found;
      if (j >= rows.size() / 2) ++in_tail;
    }
    // Fewer candidates than asked: the probed lists are exhausted, and only
    // more lists can show more items.
    // One more doubling of the lists must then find nothing new.
    const bool starved = returned < kprime;
    if (in_tail == 0 && (!starved || (round > 0 && found == found_before))) break;
    found_before = found;
    ++round;
    const bool all_lists = lists == 0 || knobs.nprobe >= lists;
    if (kprime >= slots && all_lists) {
      exhaustive = true;  // the index has nothing more to give: score the rest
      break;
    }
    kprime = std::min(kprime * 2, slots);
    if (lists > 0) knobs.nprobe = int(std::min<int64_t>(std::max(knobs.nprobe, 1) * 2, lists));
    if (knobs.ef_search > 0)
      knobs.ef_search = int(std::min<int64_t>(knobs.ef_search * 2LL, kMaxFilteredEfSearch));
  }
  if (exhaustive) score_rows(passing ? passing->rows : live_rows_);
  update_probs();

  if (!map.conditional()) {
    // Only the qualifying rows need ranking (and tie-break keys).
    std::vector<std::pair<int64_t, float>> hits;
    for (const auto& rs : score_of_row) {
      if (qualifies(rs.first)) hits.push_back(rs);
    }
    res->truncated = int64_t(hits.size()) > options.max_results;
    RankBestFirst(*prepared, arena_.data(), row_bytes_, row_ids_, &hits,
                  size_t(options.max_results));
    ranking = std::move(hits);
  }
  // The qualifying rows, best first, each with its place in the ranking
  // (for an unconditional map, which does not read it: among the hits).
  std::vector<int64_t> hit_rows;
  std::vector<float> hit_scores;
  std::vector<calibration::PairContext> contexts;
  for (size_t j = 0; j < ranking.size(); ++j) {
    if (!qualifies(ranking[j].first)) continue;
    if (int64_t(hit_rows.size()) == options.max_results) {
      res->truncated = true;
      break;
    }
    hit_rows.push_back(ranking[j].first);
    hit_scores.push_back(ranking[j].second);
    calibration::PairContext context;
    context.rank = int32_t(std::min<size_t>(j + 1, INT32_MAX));
    if (j + 1 < ranking.size()) context.next_score = ranking[j + 1].second;
    contexts.push_back(context);
  }
  res->scored = int64_t(score_of_row.size());
  std::vector<int> samples;
  std::vector<float> std_errors;
  if (plan.params.score == ScoreType::kMc && options.with_uncertainty) {
    samples.assign(hit_rows.size(), plan.params.samples);
    std_errors.resize(hit_rows.size());
    prepared->StdErrorRows(arena_.data(), row_bytes_, hit_rows.data(), hit_rows.size(),
                           std_errors.data());
  }
  FillHits(plan, q, hit_rows, hit_scores, std::move(contexts), samples, std_errors, res);
  return Status::OK();
}

void Searcher::RescoreSameRows(const SearchPlan& plan, const SearchOptions& options,
                               const std::vector<int64_t>& rows, std::vector<SearchResult>* results,
                               std::vector<Status>* errors) const {
  const int64_t nq = plan.queries;
  const size_t n = rows.size();
  // The scores of a group: at most kSharedScoreFloats floats (64 MB), so a
  // batch over a large collection shares its reads among fewer queries
  // rather than holding nq x n scores.
  // The prepared queries count too: an mc query holds its samples and the
  // item bank (2 K D floats) and each thread's kernel a padded copy of its
  // samples (K D more per thread), which with many samples outweighs the
  // scores of a small row set.
  constexpr size_t kSharedScoreFloats = size_t(1) << 24;
  const int threads = omp_get_max_threads();
  const size_t per_query =
      n + size_t(plan.params.samples + 8) * size_t(plan.shape.dim) * size_t(2 + threads);
  const int64_t group =
      std::max<int64_t>(1, std::min<int64_t>(nq, int64_t(kSharedScoreFloats / per_query)));
  for (int64_t g0 = 0; g0 < nq; g0 += group) {
    const int64_t g1 = std::min(nq, g0 + group), gn = g1 - g0;
    std::vector<std::unique_ptr<PreparedQuery>> prepared(static_cast<size_t>(gn));
    std::vector<const PreparedQuery*> queries(static_cast<size_t>(gn));
    bool ok = true;
    for (int64_t q = g0; q < g1; ++q) {
      Status s = PrepareQuery(plan.shape, plan.params, plan.rows.data() + q * plan.query_floats,
                              &prepared[size_t(q - g0)]);
      if (!s.ok()) {
        (*errors)[size_t(q)] = s;
        ok = false;
      }
      queries[size_t(q - g0)] = prepared[size_t(q - g0)].get();
    }
    if (!ok) {
      // A query the group could not prepare keeps its error; the others
      // are scored alone, as without sharing.
      for (int64_t q = g0; q < g1; ++q) {
        if ((*errors)[size_t(q)].ok()) {
          (*errors)[size_t(q)] = Rescore(plan, options, q, rows, &(*results)[size_t(q)]);
        }
      }
      continue;
    }
    std::vector<float> scores;
    try {
      scores.resize(size_t(gn) * n);
    } catch (const std::bad_alloc&) {
      for (int64_t q = g0; q < g1; ++q) {
        (*errors)[size_t(q)] = Status::IOError("out of memory scoring a batch of queries");
      }
      continue;
    }
    // Contiguous slices of the rows, one per thread, each scored for the
    // whole group; slices start on multiples of 64 rows (whole SIMD blocks).
    // An exception (an allocation in the kernel) must not leave the parallel
    // region: it becomes the group's error.
    const int64_t slices = n >= 8192 ? threads : 1;
    std::atomic<bool> failed{false};
#pragma omp parallel for schedule(static) num_threads(int(slices)) if (slices > 1)
    for (int64_t t = 0; t < slices; ++t) {
      const size_t r0 = size_t(int64_t(n / 64) * t / slices) * 64;
      const size_t r1 = t + 1 == slices ? n : size_t(int64_t(n / 64) * (t + 1) / slices) * 64;
      try {
        ScoreRowsShared(queries.data(), queries.size(), arena_.data(), row_bytes_, rows.data() + r0,
                        r1 - r0, scores.data() + r0, n);
      } catch (...) {
        failed = true;
      }
    }
    if (failed) {
      for (int64_t q = g0; q < g1; ++q) {
        (*errors)[size_t(q)] = Status::IOError("out of memory scoring a batch of queries");
      }
      continue;
    }
#pragma omp parallel for schedule(dynamic) if (gn > 1)
    for (int64_t q = g0; q < g1; ++q) {
      (*errors)[size_t(q)] =
          Rescore(plan, options, q, rows, &(*results)[size_t(q)],
                  scores.data() + size_t(q - g0) * n, std::move(prepared[size_t(q - g0)]));
    }
  }
}

Status Searcher::Rescore(const SearchPlan& plan, const SearchOptions& options, int64_t q,
                         const std::vector<int64_t>& rows, SearchResult* res,
                         const float* shared_scores,
                         std::unique_ptr<PreparedQuery> prepared) const {
  const float* query_row = plan.rows.data() + q * plan.query_floats;
  if (prepared == nullptr) {
    HEDGEDB_RETURN_IF_ERROR(PrepareQuery(plan.shape, plan.params, query_row, &prepared));
  }
  std::vector<float> scores;
  if (shared_scores != nullptr) {
    scores.assign(shared_scores, shared_scores + rows.size());
  } else {
    scores.resize(rows.size());
    prepared->ScoreRows(arena_.data(), row_bytes_, rows.data(), rows.size(), scores.data());
  }
  res->scored = int64_t(rows.size());
  std::vector<std::pair<int64_t, float>> scored(rows.size());
  for (size_t j = 0; j < rows.size(); ++j) scored[j] = {rows[j], scores[j]};
  const bool mc = plan.params.score == ScoreType::kMc;
  const size_t k = size_t(options.k);
  // Per row: the samples its score used and its standard error (-1: not yet).
  std::unordered_map<int64_t, std::pair<int, float>> refined;
  if (mc && options.adaptive_samples && scored.size() > k) {
    const int cap = std::min(options.max_samples, kMaxSamples);
    int samples = plan.params.samples;
    std::unordered_map<int, std::unique_ptr<PreparedQuery>> by_samples;
    by_samples[samples] = std::move(prepared);
    // Look at the best 4k: an item further down would need an error several
    // times larger than any score's to reach the boundary.
    const size_t window = std::min(scored.size(), 4 * k);
    while (true) {
      SortBestFirst(row_ids_, &scored, scored.size());
      // Standard errors of the window at the samples each score used.
      for (size_t j = 0; j < window; ++j) {
        auto it = refined.find(scored[j].first);
        if (it != refined.end() && it->second.second >= 0) continue;
        const int used = it == refined.end() ? plan.params.samples : it->second.first;
        float se = 0;
        by_samples.at(used)->StdErrorRows(arena_.data(), row_bytes_, &scored[j].first, 1, &se);
        refined[scored[j].first] = {used, se};
      }
      const double boundary = 0.5 * (double(scored[k - 1].second) + double(scored[k].second));
      std::vector<int64_t> straddling;
      for (size_t j = 0; j < window; ++j) {
        const float se = refined[scored[j].first].second;
        if (std::fabs(double(scored[j].second) - boundary) < kAdaptiveZ * double(se)) {
          straddling.push_back(scored[j].first);
        }
      }
      if (straddling.empty() || samples >= cap) break;
      samples = std::min(samples * 2, cap);
      ScoreParams more = plan.params;
      more.samples = samples;
      if (!ValidateScoreParams(plan.shape, more).ok()) break;  // e.g. not a multiple of C
      HEDGEDB_RETURN_IF_ERROR(PrepareQuery(plan.shape, more, query_row, &by_samples[samples]));
      std::vector<float> fresh(straddling.size());
      by_samples[samples]->ScoreRows(arena_.data(), row_bytes_, straddling.data(),
                                     straddling.size(), fresh.data());
      std::unordered_map<int64_t, float> fresh_of_row;
      for (size_t j = 0; j < straddling.size(); ++j) {
        fresh_of_row[straddling[j]] = fresh[j];
        refined[straddling[j]] = {samples, -1.0f};  // its error is measured next round
      }
      for (auto& rs : scored) {
        auto it = fresh_of_row.find(rs.first);
        if (it != fresh_of_row.end()) rs.second = it->second;
      }
      res->scored += int64_t(straddling.size());
    }
    // Every score of the window, the final top k included, has its error
    // at the samples it used (measured at the top of the last round), so
    // `refined` is not empty and `prepared` is not needed below.
  }
  // One more than k: the hit ranked k is told the score ranked after it
  // (its gap), as calibration measured it over the exact ranking.
  if (prepared != nullptr) {
    RankBestFirst(*prepared, arena_.data(), row_bytes_, row_ids_, &scored, k + 1);
  } else {
    SortBestFirst(row_ids_, &scored, k + 1);  // mc (moved into by_samples): no ties to break
  }
  std::vector<calibration::PairContext> contexts(std::min(scored.size(), k));
  for (size_t j = 0; j < contexts.size(); ++j) {
    contexts[j].rank = int32_t(j + 1);
    if (j + 1 < scored.size()) contexts[j].next_score = scored[j + 1].second;
  }
  scored.resize(contexts.size());
  std::vector<int64_t> hit_rows(scored.size());
  std::vector<float> hit_scores(scored.size());
  std::vector<int> samples;
  std::vector<float> std_errors;
  for (size_t j = 0; j < scored.size(); ++j) {
    hit_rows[j] = scored[j].first;
    hit_scores[j] = scored[j].second;
  }
  if (mc && (options.with_uncertainty || !refined.empty())) {
    samples.assign(scored.size(), plan.params.samples);
    std_errors.resize(scored.size());
    if (refined.empty()) {
      prepared->StdErrorRows(arena_.data(), row_bytes_, hit_rows.data(), hit_rows.size(),
                             std_errors.data());
    } else {
      for (size_t j = 0; j < scored.size(); ++j) {
        samples[j] = refined[hit_rows[j]].first;
        std_errors[j] = refined[hit_rows[j]].second;
      }
    }
  }
  FillHits(plan, q, hit_rows, hit_scores, std::move(contexts), samples, std_errors, res);
  return Status::OK();
}

Status Searcher::QueryThresholds(const SearchPlan& plan, const SearchOptions& options,
                                 std::vector<double>* min_prob) {
  // A conformal set and a risk-controlled set are threshold searches at the
  // map's threshold.
  double fixed = options.min_prob;
  if (options.max_false_match_rate > 0) {
    double tau = 0;
    HEDGEDB_RETURN_IF_ERROR(
        plan.map->FalseMatchThreshold(options.max_false_match_rate, options.confidence, &tau));
    // Threshold 0: every item clears it, up to max_results.
    fixed = std::max(tau, std::numeric_limits<double>::min());
  }
  min_prob->assign(size_t(plan.queries), fixed);
  if (options.coverage > 0) {
    for (int64_t q = 0; q < plan.queries; ++q) {
      double tau = 0;
      if (options.coverage_by_eta) {
        const double eta =
            QueryUncertainty(plan.shape, plan.params, plan.rows.data() + q * plan.query_floats);
        HEDGEDB_RETURN_IF_ERROR(plan.map->ConformalThresholdByEta(options.coverage, eta, &tau));
      } else {
        HEDGEDB_RETURN_IF_ERROR(plan.map->ConformalThreshold(options.coverage, &tau));
      }
      // A threshold of 0 or -1 (too few conformal queries found a match to
      // cut anything): every item, up to max_results.
      (*min_prob)[size_t(q)] = std::max(tau, std::numeric_limits<double>::min());
    }
  }
  return Status::OK();
}

Status Searcher::Run(SearchPlan* plan, const SearchOptions& options,
                     std::vector<SearchResult>* results) const {
  const int64_t nq = plan->queries;
  const bool threshold =
      options.min_prob > 0 || options.coverage > 0 || options.max_false_match_rate > 0;
  auto map = calibrations_.find(plan->params.score);
  if (map != calibrations_.end()) plan->map = &map->second;
  if (threshold && !plan->map) {
    const char* what = options.coverage > 0               ? "coverage"
                       : options.max_false_match_rate > 0 ? "max false-match rate"
                                                          : "min-prob";
    return Status::InvalidArgument(std::string(what) + " needs a calibration of score " +
                                   ScoreName(plan->params.score) + " (run calibrate first)");
  }
  // Per query: the probability threshold of a threshold search.
  std::vector<double> min_prob;
  if (threshold) HEDGEDB_RETURN_IF_ERROR(QueryThresholds(*plan, options, &min_prob));
  const int64_t live = int64_t(live_rows_.size());
  const bool exhaustive = options.exhaustive || !index_->is_trained() || index_stale_;
  results->assign(size_t(nq), SearchResult());
  std::unique_ptr<PassingSet> passing;
  if (!plan->filter.empty()) {
    passing = std::make_unique<PassingSet>();
    FindPassing(plan->filter, passing.get());
    for (SearchResult& r : *results) r.passing = int64_t(passing->rows.size());
    if (passing->rows.empty()) return Status::OK();
  }
  if (live == 0) return Status::OK();  // nothing to find: empty results

  std::vector<Status> errors(static_cast<size_t>(nq));
  if (threshold) {
    // Per query: stage 1 widens as far as that query needs.
    for (int64_t q = 0; q < nq; ++q) {
      SearchOptions at = options;
      at.min_prob = min_prob[size_t(q)];
      errors[q] = ThresholdSearch(*plan, at, q, exhaustive, passing.get(), &(*results)[q]);
    }
  } else if (passing) {
    const int64_t kprime = DefaultCandidates(options, *index_);
    // Few passing items: scoring them all is exact and about as cheap.
    const bool all_passing =
        exhaustive || int64_t(passing->rows.size()) <= std::max(kprime, index_->shape().graph_only()
                                                                            ? kExactFilterRowsGraph
                                                                            : kExactFilterRows);
    if (all_passing && nq > 1) {
      RescoreSameRows(*plan, options, passing->rows, results, &errors);
    } else {
#pragma omp parallel for schedule(dynamic) if (nq > 1)
      for (int64_t q = 0; q < nq; ++q) {
        std::vector<int64_t> rows;
        if (all_passing) {
          rows = passing->rows;
        } else {
          errors[q] = FilteredCandidates(*plan, options, q, kprime, passing.get(), &rows);
          if (!errors[q].ok()) continue;
        }
        errors[q] = Rescore(*plan, options, q, rows, &(*results)[q]);
      }
    }
  } else if (exhaustive && nq > 1) {
    RescoreSameRows(*plan, options, live_rows_, results, &errors);
  } else {
    const int64_t slots = std::max<int64_t>(index_->ntotal(), 1);
    const int64_t wanted = DefaultCandidates(options, *index_);
    // Tombstones can take candidate slots: ask for that many more.
    const int64_t kprime = std::min<int64_t>(std::min(wanted, slots) + tombstones_, slots);
    // Every query gets min(k, live) hits.
    const int64_t k_hits = std::min<int64_t>(options.k, live);
    std::vector<int64_t> coarse;
    const bool arena_scan = !exhaustive && ScansArena();
    if (!exhaustive && !arena_scan) {
      index::CoarseSearchKnobs knobs;
      knobs.nprobe = options.nprobe;
      knobs.ef_search = options.ef_search;
      // Stage 2 scores every candidate and ranks by score, ties by id (or
      // the score's exact keys): their stage-1 order does not matter.
      knobs.any_order = true;
      HEDGEDB_RETURN_IF_ERROR(index_->Search(plan->rows.data(), nq, kprime, knobs, &coarse));
    }
#pragma omp parallel for schedule(dynamic) if (nq > 1)
    for (int64_t q = 0; q < nq; ++q) {
      std::vector<int64_t> rows;
      if (exhaustive) {
        rows = live_rows_;
      } else if (arena_scan) {
        errors[q] = ArenaCandidates(*plan, q, live_rows_, kprime, &rows);
        if (!errors[q].ok()) continue;
      } else {
        CandidateRows(coarse.data() + q * kprime, kprime, &rows);
        if (int64_t(rows.size()) < k_hits) {
          // Stage 1 found fewer live items than k (a graph walk that ended
          // early, probed lists that hold fewer): widen it as a filtered
          // search does, with every live item passing.
          errors[q] = FilteredCandidates(*plan, options, q, wanted, nullptr, &rows);
          if (!errors[q].ok()) continue;
        }
      }
      errors[q] = Rescore(*plan, options, q, rows, &(*results)[q]);
    }
  }
  for (const Status& e : errors) HEDGEDB_RETURN_IF_ERROR(e);
  return Status::OK();
}

}  // namespace query
}  // namespace hedgedb
