// CoarseIndex: the FAISS stage-1 index of one collection (docs/concepts.md,
// "Two-stage search" and "Coarse indexes").
//
// Item rows come in the arena layout of common/row_layout.h; the index turns
// them into coarse vectors that make FAISS rank by a meaningful quantity. Two
// implementations:
//   VectorIndex (index/vector_index.h): point, gaussian, mog; any factory
//     string of index/factory_rules.h; L2 on z or on [mu, sqrt(tr S)] (queries
//     [mu_q, 0]), so FAISS's distance is the expected squared distance up to
//     the query's constant; mog uses the mixture's first two moments.
//   CodesIndex (index/codes_index.h): DIMCO codes; IndexPQ with M = d
//     sub-quantizers of dimension k (padded to a power of two), inner product,
//     identity codebooks: a query "vector" equal to the flattened log-prob
//     table scores sum_i L[i, c_i], the exact DIMCO score.
// FAISS labels are the user's item ids: an IVF stores them in its lists, other
// indexes sit under an IndexIDMap. Removal is physical where FAISS removes
// correctly (IVF, flat code arrays) and a tombstone otherwise (HNSW): the
// collection filters candidates that are no longer live.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/rw_mutex.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"
#include "index/factory_rules.h"

namespace faiss {
struct Index;
}

namespace hedgedb {
namespace index {

class CentroidCache;  // index/list_scan.h

// The first of n coarse vectors (coarse_dim values each) with a value beyond
// `limit` in magnitude, as InvalidArgument naming the item (its id ids[i],
// or without ids its place in the batch), the coarse dimension and the
// value, and why index `factory` cannot hold it; OK if there is none.
// `residual`: the values checked are residuals against IVF centroids (the
// index's add), not the items' own (ingest, against a bound for them).
Status CheckCoarseValues(const CollectionSpec& spec, const std::string& factory,
                         const float* values, int64_t n, float limit, const int64_t* ids,
                         bool residual);

struct CoarseSearchKnobs {
  int nprobe = 0;     // IVF: lists probed (0: the index's default)
  int ef_search = 0;  // HNSW: search breadth (0: the index's default)
  // The caller takes the k found as a set (stage 2 ranks them by score):
  // hedgedb's list scan then leaves them unsorted, which was a twentieth of
  // a short batched search. FAISS's own searches sort them anyway. The
  // padding (-1, +inf) still comes last.
  bool any_order = false;
};

// The ids a filtered stage 1 may return. FAISS asks once per vector it
// scans, so Allows must be cheap and thread-safe.
class IdFilter {
 public:
  virtual ~IdFilter() = default;
  virtual bool Allows(int64_t id) const = 0;
};

// How unevenly vectors fill the lists: nlist * sum(size_i^2) / (sum size_i)^2,
// FAISS's InvertedLists::imbalance_factor. A query whose probes land on the
// lists in proportion to their sizes scans this many times n / nlist
// vectors per probe: 1 for even lists, more as some lists grow. NaN for no
// lists or no vectors.
double ImbalanceFactor(const std::vector<int64_t>& sizes);

class CoarseIndex {
 public:
  // Builds an empty index for the spec (spec.index_factory, or the kind's
  // default when empty). Factory strings outside index/factory_rules.h are
  // InvalidArgument, before FAISS sees them.
  static Status Create(const CollectionSpec& spec, std::unique_ptr<CoarseIndex>* out);
  // Create, then exercise a throwaway index of that factory on a tiny random
  // sample (train where cheap, add, search, remove): for collection creation.
  static Status Validate(const CollectionSpec& spec);
  // Loads an index file written by Save with the same `binding` (an identity
  // of the collection and its database). `sequence` receives the collection
  // sequence number the file covers, `upkeep` (if not null) the upkeep record
  // saved with it ("" from a file of before version 3 or saved without one).
  // A missing file is NotFound; a file that fails its checks or belongs
  // elsewhere is Corruption.
  static Status Load(const CollectionSpec& spec, const std::string& path, uint64_t binding,
                     std::unique_ptr<CoarseIndex>* out, uint64_t* sequence,
                     std::string* upkeep = nullptr);
  // The canonical factory string for a spec (fills in the default).
  static std::string FactoryFor(const CollectionSpec& spec);
  // Refuses n item rows (stored layout, as the index would add them) whose
  // coarse vector holds a value beyond CoarseValueLimit of the spec's index
  // (index/factory_rules.h): an SQfp16 index would store an infinity. For
  // ingest, before anything is written. `ids` are the batch's ids, or null
  // (ids assigned later: items are named by their place in the batch).
  // InvalidArgument naming the item, the coarse dimension and the value.
  static Status CheckCoarseRange(const CollectionSpec& spec, const void* rows, int64_t n,
                                 const int64_t* ids);

  virtual ~CoarseIndex();

  bool is_trained() const;
  // Number of rows Train wants before the index can be used (0: none needed).
  virtual int64_t train_rows_wanted() const = 0;
  // Trains on n contiguous item rows.
  virtual Status Train(const void* rows, int64_t n) = 0;
  // Adds n contiguous item rows with their ids. Requires is_trained().
  Status Add(const void* rows, int64_t n, const int64_t* ids);
  // Removes ids physically where FAISS does it correctly (IVF, flat codes);
  // otherwise (HNSW) does nothing and the caller keeps tombstones. *physical
  // tells which.
  Status Remove(const int64_t* ids, int64_t n, bool* physical);
  // For each of nq query rows (QueryRowSize floats), up to k candidate ids,
  // best first, -1 padded: labels has nq * k entries.
  Status Search(const float* queries, int64_t nq, int64_t k, const CoarseSearchKnobs& knobs,
                std::vector<int64_t>* labels) const;
  // Search restricted to the ids `filter` allows, applied inside FAISS's scan
  // (its IDSelector), so that the k candidates are the best allowed ones the
  // probed lists or the visited graph hold. Where supports_filter() is false
  // (flat PQ) this is NotSupported and the caller filters afterwards.
  Status SearchFiltered(const float* queries, int64_t nq, int64_t k, const CoarseSearchKnobs& knobs,
                        const IdFilter& filter, std::vector<int64_t>* labels) const;
  // Whether SearchFiltered works: IVF, and Flat, SQ and HNSW under the id map
  // (FAISS 1.7's IndexPQ ignores selectors).
  bool supports_filter() const;

  int64_t ntotal() const;
  // Whether Remove takes vectors out (IVF lists, flat codes) rather than
  // leaving tombstones (HNSW).
  bool physical_removal() const { return physical_removal_; }
  // Every id the index holds (removed ones included where removal leaves a
  // tombstone), in no particular order: for verify.
  Status Ids(std::vector<int64_t>* ids) const;
  // An IVF index's list sizes (vectors per list, in list order);
  // NotSupported for other indexes.
  Status ListSizes(std::vector<int64_t>* sizes) const;
  // ImbalanceFactor of ListSizes; NaN where that fails or the lists are
  // empty. Thread-safe with searches (it reads the sizes only).
  double ListImbalance() const;
  const std::string& factory() const { return factory_; }
  // What the factory string builds (IVF lists, HNSW M, PQ).
  const FactoryShape& shape() const { return shape_; }

  // Writes the index, `sequence`, `binding` and the upkeep record `upkeep`
  // (index/index_file.h: IndexUpkeep's encoding, or "") to path atomically
  // (tmp, fsync, rename, directory fsync): the record always describes the
  // index in the same file.
  Status Save(const std::string& path, uint64_t sequence, uint64_t binding,
              std::string_view upkeep = {}) const;

  // Whether TuneKnobs applies (IVF and HNSW over vectors).
  virtual bool tunable() const { return false; }
  // Whether the collection fits its default search to this index
  // (query/knob_fit.h): the tunable ones (knob and candidates), and flat
  // indexes over vectors (Flat, SQ, PQ without lists or graph: the
  // candidates alone, as stage 1 scans every vector), whose coarse order
  // differs from the score's as an IVF's does. Not codes: their stage 1
  // scores the exact DIMCO score.
  virtual bool fits_default_search() const { return false; }
  // A coarse fit, kept for measuring stage 1 alone (the collection fits its
  // defaults to the final recall instead: query/knob_fit.h).
  // Picks the default stage-1 knob (IVF nprobe, HNSW efSearch) for the data:
  // the smallest on a doubling ladder from the static default at which the
  // index's top-`candidates` holds at least `target` of the exact coarse
  // top-`candidates`, with up to 100 of the n rows as queries; or where one
  // more doubling gains less than 0.005 (the encoding limits stage 1). The
  // knob is saved with the index; the measured fraction is coarse_recall().
  // A no-op where tunable() is false. n rows of ids `ids`, as added.
  virtual Status TuneKnobs(const void* rows, const int64_t* ids, int64_t n, int64_t candidates,
                           double target);
  // The stage-1 recall at each of `knobs` (each resolved by KnobsFor): the
  // fraction of the exact coarse top-`candidates` (over all n rows) of up to
  // 100 rows evenly spread over [query_first, n), used as queries, that a
  // search with those knobs returns; measured as TuneKnobs measures it. For
  // checking a trained index as its items change (IndexKeeper::Measure);
  // thread-safe with searches. NotSupported where tunable() is false.
  virtual Status MeasureRecall(const void* rows, const int64_t* ids, int64_t n, int64_t candidates,
                               int64_t query_first, const std::vector<CoarseSearchKnobs>& knobs,
                               std::vector<double>* recalls) const;
  // Makes `knobs` (nprobe or efSearch, 0: unchanged) the default search knobs
  // and `coarse_recall` their stage-1 recall, as an upkeep re-tune found
  // them. No search may run meanwhile (the collection holds its state lock
  // exclusively).
  void AdoptKnobs(const CoarseSearchKnobs& knobs, double coarse_recall);
  // What the collection's fit of its default search found
  // (query/knob_fit.h): the knobs, the oversampling a search that leaves
  // its candidates to the default uses (candidates = k x oversampling; 0:
  // none fitted), the final recall@k estimate there, and the stage-1 coarse
  // recall at those knobs (the upkeep's drift measure). Saved with the
  // index. Same locking as AdoptKnobs.
  void AdoptFit(const CoarseSearchKnobs& knobs, int oversampling, double recall,
                double coarse_recall);
  // The fit's oversampling and recalls as a saved file holds them, without
  // touching the knobs (the FAISS blob holds those): for IndexKeeper::Open.
  void RestoreFit(int oversampling, double recall, double coarse_recall);
  // The final recall@k of a default search that the fit estimated (the
  // fraction of the exact top-k by the collection's default score that the
  // fitted knobs and candidates find); NaN if never fitted (codes, an
  // untrained index, an index that needs no training (HNSW, Flat) not yet
  // saved with 1,000 items (IndexKeeper::Save), or a file saved before the
  // fit measured it).
  double recall_estimate() const { return recall_estimate_; }
  // The fitted oversampling (0: none fitted: searches use 10).
  int default_oversampling() const { return default_oversampling_; }
  // The stage-1 recall at the default knobs: the fraction of the exact
  // coarse top-(k x 10) that stage 1 returns, as MeasureRecall measures it;
  // measured by the fit, TuneKnobs and each upkeep check. NaN if never.
  double coarse_recall() const { return coarse_recall_; }
  void set_coarse_recall(double recall) { coarse_recall_ = recall; }
  // Wall time of the last fit in this process (0: none; not saved).
  double fit_seconds() const { return fit_seconds_; }
  void set_fit_seconds(double seconds) { fit_seconds_ = seconds; }
  // The knobs a new index starts with (IVF nprobe max(8, nlist / 64), HNSW
  // efSearch 64). The fit's ladder (query/knob_fit.h) starts HNSW there (at
  // no fewer than its first candidate count, 100); IVF's starts at one list
  // and climbs at least to this nprobe before a doubling that gains nothing
  // may end it.
  CoarseSearchKnobs StaticKnobs() const;
  // The knobs a search with 0 (the default) uses.
  const CoarseSearchKnobs& default_knobs() const { return default_knobs_; }
  // The knobs a search asking for `asked` uses (0: the default).
  CoarseSearchKnobs KnobsFor(const CoarseSearchKnobs& asked) const;

  // Tests only: the next `n` calls to Add (in any index) fail, standing in
  // for FAISS errors such as memory exhaustion that a test cannot provoke.
  static void FailNextAddsForTest(int n);

 protected:
  CoarseIndex(const CollectionSpec& spec, const std::string& factory, const FactoryShape& shape);
  // Builds the empty FAISS index into index_.
  virtual Status Build() = 0;
  // Adds rows to the trained FAISS index.
  virtual Status AddRows(const void* rows, int64_t n, const int64_t* ids) = 0;
  // Searches with hedgedb's own list scan (index/list_scan.h) where it
  // applies (an IVF of float vectors over a flat L2 quantizer, a flat L2
  // index) and returns true; false where FAISS searches.
  bool ListScan(const float* x, int64_t nq, int64_t k, const CoarseSearchKnobs& knobs,
                const IdFilter* filter, float* distances, int64_t* labels) const;
  // Query rows -> the vectors FAISS searches with (coarse_dim_ floats each).
  virtual void CoarseQueries(const float* queries, int64_t nq, std::vector<float>* out) const = 0;
  // Validate's run on a random sample; OK where there is nothing to try.
  virtual Status Exercise() { return Status::OK(); }
  // Static defaults (FAISS starts IVF at nprobe 1), then the knobs' cache.
  void SetDefaultKnobs();
  void ReadDefaultKnobs();
  // After the quantizer's vectors change in place (Train): the list scan's
  // transposed copy of them is made again on the next search.
  void CentroidsChanged();

  const CollectionSpec spec_;
  const std::string factory_;
  const FactoryShape shape_;
  const int coarse_dim_;
  bool physical_removal_ = false;
  // An IndexIVF (holding the user ids itself) or an IndexIDMap around the rest.
  std::unique_ptr<faiss::Index> index_;
  double recall_estimate_ = std::numeric_limits<double>::quiet_NaN();
  double coarse_recall_ = std::numeric_limits<double>::quiet_NaN();
  int default_oversampling_ = 0;
  double fit_seconds_ = 0;

 private:
  // The IVF quantizer's centroids as the list scan reads them.
  std::unique_ptr<CentroidCache> centroid_cache_;
  // Knob changes mutate the FAISS index: searches that need other knob
  // values than the current ones take this exclusively.
  mutable RwMutex knob_mutex_;
  mutable CoarseSearchKnobs current_knobs_;
  CoarseSearchKnobs default_knobs_;
};

}  // namespace index
}  // namespace hedgedb
