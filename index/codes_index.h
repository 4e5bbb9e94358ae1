// CodesIndex: the coarse index of DIMCO codes collections. A FAISS IndexPQ
// (or IVF<n>,PQ) with d sub-quantizers of dimension k (padded to a power of
// two), inner product and identity codebooks: centroid j of every
// sub-quantizer is the unit vector e_j, so a query "vector" equal to the
// flattened log-probability table scores sum_i L[i, c_i], the exact DIMCO
// score. Codes are written into FAISS directly (a code's PQ code is its
// symbols), and IVF lists come from k-means over symbol histograms computed in
// code space; by_residual = false keeps the PQ codes equal to the symbols.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "index/coarse_index.h"

namespace hedgedb {
namespace index {

class CodesIndex final : public CoarseIndex {
 public:
  CodesIndex(const CollectionSpec& spec, const std::string& factory, const FactoryShape& shape);

  int64_t train_rows_wanted() const override;
  Status Train(const void* rows, int64_t n) override;

 protected:
  Status Build() override;
  Status AddRows(const void* rows, int64_t n, const int64_t* ids) override;
  void CoarseQueries(const float* queries, int64_t nq, std::vector<float>* out) const override;

 private:
  // Best list (largest inner product with its centroid) of each code.
  void AssignCodeLists(const float* centroids, const uint8_t* codes, int64_t n,
                       int64_t* lists) const;

  const int padded_k_;  // k rounded up to a power of two
};

}  // namespace index
}  // namespace hedgedb
