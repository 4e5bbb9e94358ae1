// VectorIndex: the coarse index of point, gaussian and mog collections, built
// from a FAISS factory string (index/factory_rules.h) over coarse vectors:
// z for points, [mu, sqrt(tr S)] for gaussian and mog (mixtures: their first
// two moments), queried with [mu_q, 0].
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/row_layout.h"
#include "index/coarse_index.h"

namespace hedgedb {
namespace index {

// n rows of `shape` (stored item rows of `spec`: RowShapeOf(spec); query
// rows: its FloatRowShape) -> n coarse vectors (CoarseDimension(spec)
// floats each): z, or [mu, sqrt(tr S)] (a mixture's first two moments).
void CoarseVectorsOf(const CollectionSpec& spec, const RowShape& shape, const void* rows, int64_t n,
                     std::vector<float>* out);

class VectorIndex final : public CoarseIndex {
 public:
  VectorIndex(const CollectionSpec& spec, const std::string& factory, const FactoryShape& shape)
      : CoarseIndex(spec, factory, shape) {}

  int64_t train_rows_wanted() const override;
  Status Train(const void* rows, int64_t n) override;
  bool tunable() const override;
  bool fits_default_search() const override;
  Status TuneKnobs(const void* rows, const int64_t* ids, int64_t n, int64_t candidates,
                   double target) override;
  Status MeasureRecall(const void* rows, const int64_t* ids, int64_t n, int64_t candidates,
                       int64_t query_first, const std::vector<CoarseSearchKnobs>& knobs,
                       std::vector<double>* recalls) const override;

 protected:
  Status Build() override;
  Status AddRows(const void* rows, int64_t n, const int64_t* ids) override;
  void CoarseQueries(const float* queries, int64_t nq, std::vector<float>* out) const override;
  Status Exercise() override;

 private:
  // CoarseVectorsOf for this index's spec.
  void CoarseVectors(const RowShape& shape, const void* rows, int64_t n,
                     std::vector<float>* out) const {
    CoarseVectorsOf(spec_, shape, rows, n, out);
  }
  // Where the index stores half floats (SQfp16): InvalidArgument for the
  // first of n coarse vectors x whose encoded value (under an IVF its
  // residual against the list `lists` assigns it) a half cannot hold.
  // Ingest refuses such items (CheckCoarseRange); this keeps any that came
  // another way (records written before that check) from becoming
  // infinities: the add fails and the collection searches exactly instead.
  Status CheckEncodable(const float* x, int64_t n, const int64_t* ids, const int64_t* lists) const;
  // What TuneKnobs and MeasureRecall measure against: up to 100 evenly
  // spread rows as queries (their item rows, and as coarse vectors) and the
  // ids of the exact coarse top-k of each over all n rows.
  struct ExactTop {
    int64_t nq = 0, k = 0;
    std::vector<float> sample;   // nq query rows: the items' float rows
    std::vector<float> queries;  // their coarse vectors
    std::vector<std::unordered_set<int64_t>> truth;
    int64_t total = 0;  // sum of the truth sets' sizes
    // The fraction of the truth among nq x k labels.
    double Recall(const std::vector<int64_t>& labels) const;
  };
  // Throws what FAISS throws.
  // The queries are spread over rows [query_first, n).
  void ExactCoarseTop(const void* rows, const int64_t* ids, int64_t n, int64_t candidates,
                      int64_t query_first, ExactTop* out) const;
};

}  // namespace index
}  // namespace hedgedb
