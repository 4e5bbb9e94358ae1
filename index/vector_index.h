// VectorIndex: the coarse index of point, gaussian and mog collections, built
// from a FAISS factory string (index/factory_rules.h) over coarse vectors:
// z for points, [mu, sqrt(tr S)] for gaussian and mog (mixtures: their first
// two moments), queried with [mu_q, 0].
#pragma once

#include <string>
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
};

}  // namespace index
}  // namespace hedgedb
