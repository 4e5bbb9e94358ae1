// The L2 row kernel of each SIMD level (common/simd_level.h), for L2SqrRows'
// dispatch. The x86 versions exist only in builds with HEDGEDB_SIMD_X86
// (cmake/hedgedb_simd.cmake). Internal to index/.
#pragma once

#include <cstdint>

#include "common/simd_level.h"

namespace hedgedb {
namespace index {

using L2SqrRowsFn = void (*)(const float* q, const float* rows, int64_t n, int d, float* out);
// nq queries (q: nq x d floats) at once, out: nq x n.
using L2SqrColumnsFn = void (*)(const float* q, int nq, const float* columns, int64_t stride,
                                int64_t n, int d, float* out);
// (a_t - b_t c_t)^2 summed over t < d for n contiguous rows of d uint8 codes
// (list_scan.h, L2SqrSq8Rows, folds the SQ8 decoding into a and b).
using L2SqrSq8RowsFn = void (*)(const float* a, const float* b, const uint8_t* codes, int64_t n,
                                int d, float* out);
// (q_t - x_t)^2 summed over t < d for n contiguous rows of d IEEE half
// floats, x_t the half widened to float (exact).
using L2SqrFp16RowsFn = void (*)(const float* q, const uint16_t* codes, int64_t n, int d,
                                 float* out);

namespace portable {
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
void L2SqrColumns(const float* q, int nq, const float* columns, int64_t stride, int64_t n, int d,
                  float* out);
void L2SqrSq8Rows(const float* a, const float* b, const uint8_t* codes, int64_t n, int d,
                  float* out);
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out);
}  // namespace portable
namespace avx2 {
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
void L2SqrColumns(const float* q, int nq, const float* columns, int64_t stride, int64_t n, int d,
                  float* out);
void L2SqrSq8Rows(const float* a, const float* b, const uint8_t* codes, int64_t n, int d,
                  float* out);
// Uses F16C beyond the level (its own target attribute): reached only where
// the CPU has it (list_scan.cc, ActiveL2SqrFp16Rows).
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out);
}  // namespace avx2
namespace avx512 {
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out);
void L2SqrColumns(const float* q, int nq, const float* columns, int64_t stride, int64_t n, int d,
                  float* out);
void L2SqrSq8Rows(const float* a, const float* b, const uint8_t* codes, int64_t n, int d,
                  float* out);
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out);
}  // namespace avx512

}  // namespace index
}  // namespace hedgedb
