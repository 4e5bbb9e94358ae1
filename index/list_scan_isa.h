// The L2 row kernel of each SIMD level (common/simd_level.h), for L2SqrRows'
// dispatch. The x86 versions exist only in builds with HEDGEDB_SIMD_X86
// (cmake/hedgedb_simd.cmake). Internal to index/.
#pragma once

#include <cstdint>

#include "common/simd_level.h"

namespace hedgedb {
namespace index {

using L2SqrRowsFn = void (*)(const float* q, const float* rows, int64_t n, int d, float* out);
using L2SqrColumnsFn = void (*)(const float* q, const float* columns, int64_t stride, int64_t n,
                                int d, float* out);

namespace portable {
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
void L2SqrColumns(const float* q, const float* columns, int64_t stride, int64_t n, int d,
                  float* out);
}  // namespace portable
namespace avx2 {
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
void L2SqrColumns(const float* q, const float* columns, int64_t stride, int64_t n, int d,
                  float* out);
}  // namespace avx2
namespace avx512 {
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
void L2SqrColumns(const float* q, const float* columns, int64_t stride, int64_t n, int d,
                  float* out);
}  // namespace avx512

}  // namespace index
}  // namespace hedgedb
