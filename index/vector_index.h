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

class VectorIndex final : public CoarseIndex {
 public:
  VectorIndex(const CollectionSpec& spec, const std::string& factory, const FactoryShape& shape)
      : CoarseIndex(spec, factory, shape) {}

  int64_t train_rows_wanted() const override;
  Status Train(const void* rows, int64_t n) override;
  bool tunable() const override;
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
  // n rows of `shape` (stored item rows: RowShapeOf(spec_); query rows:
  // its FloatRowShape) -> n coarse vectors (coarse_dim_ floats each).
  void CoarseVectors(const RowShape& shape, const void* rows, int64_t n,
                     std::vector<float>* out) const;
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
