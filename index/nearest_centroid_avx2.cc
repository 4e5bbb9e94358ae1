// NearestCentroids' row minimum for AVX2 + FMA (nearest_centroid_isa.h): the
// source of nearest_centroid_impl.h compiled with the level's flags
// (cmake/hedgedb_simd.cmake), reached only through ActiveRowMinimum after the
// CPU check (common/simd_level.h).
#include <algorithm>
#include <limits>

#include "index/nearest_centroid_isa.h"

namespace hedgedb {
namespace index {
namespace avx2 {
#include "index/nearest_centroid_impl.h"
}  // namespace avx2
}  // namespace index
}  // namespace hedgedb
