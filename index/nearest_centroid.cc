#include "index/nearest_centroid.h"

#include <faiss/IndexIVF.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "index/nearest_centroid_isa.h"

extern "C" {
// BLAS (the one FAISS links), Fortran interface.
int sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
           const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
           const float* beta, float* c, const int* ldc);
}

namespace hedgedb {
namespace index {
namespace {

// Products computed per BLAS call: 256 rows x 1024 centroids, 1 MB.
constexpr int64_t kRowBlock = 256;
constexpr int64_t kCentroidBlock = 1024;

}  // namespace

// The baseline version; nearest_centroid_avx2.cc and nearest_centroid_avx512.cc
// compile the same source with their level's flags.
namespace portable {
#include "index/nearest_centroid_impl.h"

}  // namespace portable

RowMinimumFn ActiveRowMinimum() {
  return ForActiveKernelIsa(&portable::RowMinimum, HEDGEDB_SIMD_X86_ONLY(&avx2::RowMinimum),
                            HEDGEDB_SIMD_X86_ONLY(&avx512::RowMinimum));
}

void NearestCentroids(const float* x, int64_t n, const float* centroids, int64_t k, int d,
                      int64_t* labels, float* distances) {
  std::vector<float> norms(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const float* c = centroids + j * d;
    float s = 0;
    for (int t = 0; t < d; ++t) s += c[t] * c[t];
    norms[j] = s;
  }
  std::vector<float> ip(size_t(kRowBlock * std::min(k, kCentroidBlock)));
  std::vector<float> best(static_cast<size_t>(kRowBlock));
  const float one = 1.0f, zero = 0.0f;
  const RowMinimumFn row_minimum = ActiveRowMinimum();
  for (int64_t i0 = 0; i0 < n; i0 += kRowBlock) {
    const int rows = int(std::min(kRowBlock, n - i0));
    std::fill(best.begin(), best.begin() + rows, std::numeric_limits<float>::infinity());
    // Non-finite distances (not from validated rows) still get a list.
    std::fill(labels + i0, labels + i0 + rows, 0);
    for (int64_t j0 = 0; j0 < k; j0 += kCentroidBlock) {
      const int cols = int(std::min(kCentroidBlock, k - j0));
      // ip (cols x rows, column-major) = C_block^T X_block: row r's products
      // are ip[r * cols, (r + 1) * cols).
      sgemm_("T", "N", &cols, &rows, &d, &one, centroids + j0 * d, &d, x + i0 * d, &d, &zero,
             ip.data(), &cols);
      for (int r = 0; r < rows; ++r) {
        row_minimum(ip.data() + size_t(r) * cols, norms.data() + j0, cols, j0, &best[r],
                    &labels[i0 + r]);
      }
    }
    if (!distances) continue;
    for (int r = 0; r < rows; ++r) {
      const float* v = x + (i0 + r) * d;
      float s = 0;
      for (int t = 0; t < d; ++t) s += v[t] * v[t];
      distances[i0 + r] = std::max(0.0f, s + best[r]);
    }
  }
}

void NearestCentroidIndex::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                                  const faiss::SearchParameters* params) const {
  if (k != 1 || params || ntotal == 0) {
    faiss::IndexFlatL2::search(n, x, k, distances, labels, params);
    return;
  }
  NearestCentroids(x, n, get_xb(), ntotal, int(d), labels, distances);
}

const faiss::IndexFlat* FlatL2Quantizer(const faiss::Index* index) {
  auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index);
  if (!ivf || !ivf->is_trained) return nullptr;
  auto* flat = dynamic_cast<const faiss::IndexFlat*>(ivf->quantizer);
  if (!flat || dynamic_cast<const faiss::IndexFlat1D*>(flat) ||
      flat->metric_type != faiss::METRIC_L2 || flat->ntotal != faiss::Index::idx_t(ivf->nlist) ||
      flat->d != ivf->d) {
    return nullptr;
  }
  return flat;
}

}  // namespace index
}  // namespace hedgedb
