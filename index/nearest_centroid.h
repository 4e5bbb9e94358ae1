// The exact nearest centroid (L2) of many vectors, for IVF lists: the
// assignment of added vectors and of k-means' training points.
//
// FAISS 1.7's k = 1 search over a flat L2 index computes the inner products
// with BLAS, then picks each row's minimum in a scalar loop that takes as
// long as the product itself (bench/RESULTS.md, Ingest). Here the product is
// the same BLAS call and the minimum is taken in vector registers. Internal
// to index/.
#pragma once

#include <faiss/IndexFlat.h>

#include <cstdint>

namespace hedgedb {
namespace index {

// labels[i] = the first j in [0, k) minimizing ||x_i - c_j||^2 (up to
// float rounding of the expanded form |x|^2 + |c|^2 - 2 x.c, as FAISS);
// distances[i] (if not null) = that squared distance, clamped at 0.
void NearestCentroids(const float* x, int64_t n, const float* centroids, int64_t k, int d,
                      int64_t* labels, float* distances);

// A flat L2 index whose k = 1 search (k-means' assignment step) runs
// NearestCentroids; any other search is IndexFlatL2's. For
// IndexIVF::clustering_index during training.
class NearestCentroidIndex : public faiss::IndexFlatL2 {
 public:
  explicit NearestCentroidIndex(int d) : faiss::IndexFlatL2(d) {}
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override;
};

// The quantizer of an IVF whose lists NearestCentroids can assign: a trained
// flat L2 index holding the nlist centroids. nullptr otherwise.
const faiss::IndexFlat* FlatL2Quantizer(const faiss::Index* index);

}  // namespace index
}  // namespace hedgedb
