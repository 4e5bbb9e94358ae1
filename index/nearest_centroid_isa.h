// The nearest-centroid row minimum of each SIMD level (common/simd_level.h),
// for NearestCentroids' dispatch. The x86 versions exist only in builds with
// HEDGEDB_SIMD_X86 (cmake/hedgedb_simd.cmake). Internal to index/.
#pragma once

#include <cstdint>

#include "common/simd_level.h"

namespace hedgedb {
namespace index {

// Over one row's products with centroids [j0, j0 + m): turns ip[j] into
// |c_j|^2 - 2 x.c_j and, if its minimum is below *best, stores it there and
// its first position in *best_j (nearest_centroid_impl.h).
using RowMinimumFn = void (*)(float* ip, const float* norms, int64_t m, int64_t j0, float* best,
                              int64_t* best_j);

namespace portable {
void RowMinimum(float* ip, const float* norms, int64_t m, int64_t j0, float* best, int64_t* best_j);
}  // namespace portable
namespace avx2 {
void RowMinimum(float* ip, const float* norms, int64_t m, int64_t j0, float* best, int64_t* best_j);
}  // namespace avx2
namespace avx512 {
void RowMinimum(float* ip, const float* norms, int64_t m, int64_t j0, float* best, int64_t* best_j);
}  // namespace avx512

// The version for the active level, as NearestCentroids picks it per call.
RowMinimumFn ActiveRowMinimum();

}  // namespace index
}  // namespace hedgedb
