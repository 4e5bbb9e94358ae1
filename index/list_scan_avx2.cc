// L2SqrRows for AVX2 (list_scan_isa.h): the source of list_scan_impl.h
// compiled with the level's flags (cmake/hedgedb_simd.cmake), reached only
// through L2SqrRows' dispatch after the CPU check (common/simd_level.h).
//
// L2SqrFp16Rows is written out with F16C's vcvtph2ps, which the level's check
// does not cover: its own target attribute enables F16C for it alone, and its
// dispatch (list_scan.cc) checks the CPU for F16C on top of the level.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "index/list_scan_isa.h"

namespace hedgedb {
namespace index {
namespace avx2 {
#define HEDGEDB_LIST_SCAN_OWN_FP16
#include "index/list_scan_impl.h"
#undef HEDGEDB_LIST_SCAN_OWN_FP16

namespace {

// Eight halves at p widened to floats.
__attribute__((target("f16c"), always_inline)) inline __m256 Widen8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The last `rest` (< 8) halves of a row at p, zeros after them: no load
// passes the row's last code.
__attribute__((target("f16c"), always_inline)) inline __m256 WidenTail(const uint16_t* p,
                                                                       int rest) {
  uint16_t h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(h, p, size_t(rest) * sizeof(uint16_t));
  return Widen8(h);
}

__attribute__((always_inline)) inline float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

}  // namespace

// Rows of halves, four at a time: eight halves widened per vcvtph2ps, then
// (q - x)^2 summed by FMA; the tail of each row (d % 8 halves) from a zeroed
// copy, the query's tail under a mask (the masked lanes are 0 - 0).
__attribute__((target("f16c"))) void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n,
                                                   int d, float* out) {
  const int full = d & ~7;
  const int rest = d & 7;
  alignas(32) int32_t keep[8];
  for (int t = 0; t < 8; ++t) keep[t] = t < rest ? -1 : 0;
  const __m256i tail = _mm256_load_si256(reinterpret_cast<const __m256i*>(keep));
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint16_t* r = codes + i * d;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (int t = 0; t < full; t += 8) {
      const __m256 x = _mm256_loadu_ps(q + t);
      const __m256 e0 = _mm256_sub_ps(x, Widen8(r + t));
      const __m256 e1 = _mm256_sub_ps(x, Widen8(r + d + t));
      const __m256 e2 = _mm256_sub_ps(x, Widen8(r + 2 * d + t));
      const __m256 e3 = _mm256_sub_ps(x, Widen8(r + 3 * d + t));
      s0 = _mm256_fmadd_ps(e0, e0, s0);
      s1 = _mm256_fmadd_ps(e1, e1, s1);
      s2 = _mm256_fmadd_ps(e2, e2, s2);
      s3 = _mm256_fmadd_ps(e3, e3, s3);
    }
    if (rest != 0) {
      const __m256 x = _mm256_maskload_ps(q + full, tail);
      const __m256 e0 = _mm256_sub_ps(x, WidenTail(r + full, rest));
      const __m256 e1 = _mm256_sub_ps(x, WidenTail(r + d + full, rest));
      const __m256 e2 = _mm256_sub_ps(x, WidenTail(r + 2 * d + full, rest));
      const __m256 e3 = _mm256_sub_ps(x, WidenTail(r + 3 * d + full, rest));
      s0 = _mm256_fmadd_ps(e0, e0, s0);
      s1 = _mm256_fmadd_ps(e1, e1, s1);
      s2 = _mm256_fmadd_ps(e2, e2, s2);
      s3 = _mm256_fmadd_ps(e3, e3, s3);
    }
    out[i] = HorizontalSum(s0);
    out[i + 1] = HorizontalSum(s1);
    out[i + 2] = HorizontalSum(s2);
    out[i + 3] = HorizontalSum(s3);
  }
  for (; i < n; ++i) {
    const uint16_t* r = codes + i * d;
    __m256 s = _mm256_setzero_ps();
    for (int t = 0; t < full; t += 8) {
      const __m256 e = _mm256_sub_ps(_mm256_loadu_ps(q + t), Widen8(r + t));
      s = _mm256_fmadd_ps(e, e, s);
    }
    if (rest != 0) {
      const __m256 e = _mm256_sub_ps(_mm256_maskload_ps(q + full, tail), WidenTail(r + full, rest));
      s = _mm256_fmadd_ps(e, e, s);
    }
    out[i] = HorizontalSum(s);
  }
}

}  // namespace avx2
}  // namespace index
}  // namespace hedgedb
