#include "index/nearest_centroid.h"

#include <faiss/IndexIVF.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// RowMinimum comes in versions for AVX-512, AVX2 and the baseline, which an
// ifunc resolver picks when the program is loaded. Not under ThreadSanitizer:
// it instruments the resolver too, which the dynamic loader runs before the
// TSan runtime is initialised, so every program linking this file crashed
// at start (scripts/sanitize.sh thread); the baseline version serves there.
#if defined(__SANITIZE_THREAD__)
#define HEDGEDB_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HEDGEDB_TSAN_BUILD 1
#endif
#endif
#ifdef HEDGEDB_TSAN_BUILD
#define HEDGEDB_ROW_MINIMUM_VERSIONS
#else
#define HEDGEDB_ROW_MINIMUM_VERSIONS __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

// Over one row's products with centroids [j0, j0 + m): turns ip[j] into
// |c_j|^2 - 2 x.c_j (the squared distance less |x|^2) and, if its minimum is
// below *best, stores it there and its first position in *best_j.
HEDGEDB_ROW_MINIMUM_VERSIONS void RowMinimum(float* ip, const float* norms, int64_t m, int64_t j0,
                                             float* best, int64_t* best_j) {
  float low = std::numeric_limits<float>::infinity();
#pragma omp simd reduction(min : low)
  for (int64_t j = 0; j < m; ++j) {
    const float v = norms[j] - 2.0f * ip[j];
    ip[j] = v;
    low = v < low ? v : low;
  }
  if (!(low < *best)) return;  // ties keep the earlier centroid
  // The first position holding the minimum: a vector test per 16 values.
  for (int64_t c = 0; c < m; c += 16) {
    const int64_t end = std::min(m, c + 16);
    int hit = 0;
#pragma omp simd reduction(| : hit)
    for (int64_t j = c; j < end; ++j) hit |= ip[j] == low;
    if (!hit) continue;
    for (int64_t j = c; j < end; ++j) {
      if (ip[j] == low) {
        *best = low;
        *best_j = j0 + j;
        return;
      }
    }
  }
}

}  // namespace

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
        RowMinimum(ip.data() + size_t(r) * cols, norms.data() + j0, cols, j0, &best[r],
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
