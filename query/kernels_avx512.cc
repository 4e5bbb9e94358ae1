// The scorers' kernels (kernels.h) for AVX-512F, 16 lanes: the Simd operations
// below and the ISA-generic bodies of kernels_impl.h. Compiled with the
// kernel level's flags (cmake/hedgedb_simd.cmake) and reached only through the
// dispatch in kernels.cc, after the CPU check (common/simd_level.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "query/kernels_isa.h"

namespace hedgedb {
namespace query {
namespace avx512 {
namespace {

// GCC 12 flags the deliberately undefined vectors inside avx512fintrin.h
// (clang has no such warning).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
struct Simd {
  static constexpr int kLanes = 16;
  using V = __m512;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Set1(float x) { return _mm512_set1_ps(x); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, V a) { _mm512_storeu_ps(p, a); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm512_div_ps(a, b); }
  static V Min(V a, V b) { return _mm512_min_ps(a, b); }
  static V Max(V a, V b) { return _mm512_max_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V Sqrt(V a) { return _mm512_sqrt_ps(a); }
  // Relative error < 2^-14.
  static V RcpApprox(V a) { return _mm512_rcp14_ps(a); }
  static V RsqrtApprox(V a) { return _mm512_rsqrt14_ps(a); }
  static V Round(V a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static V Pow2(V n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  // The first count (< kLanes) floats at p, 0 in the other lanes; the
  // masked load reads nothing past them.
  static V LoadFirst(const float* p, int count) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u), p);
  }
  static float ReduceAdd(V a) { return _mm512_reduce_add_ps(a); }
  // x = m 2^e with m in [1, 2), for finite x > 0; GETEXP and GETMANT
  // normalise subnormals themselves.
  static void Frexp(V x, V* m, V* e) {
    *e = _mm512_getexp_ps(x);
    *m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  }
  static void TransposeRows(const float* const* rows, int offset, int count, float* out) {
    for (int d0 = 0; d0 < count; d0 += kLanes) {
      const int width = std::min(kLanes, count - d0);
      // Masked loads do not touch memory past the row.
      const __mmask16 mask = static_cast<__mmask16>((1u << width) - 1u);
      __m512 r[kLanes];
      for (int l = 0; l < kLanes; ++l) r[l] = _mm512_maskz_loadu_ps(mask, rows[l] + offset + d0);
      // r[l] holds row l; after the three stages col[c] holds column c.
      __m512 t[kLanes];
      for (int m = 0; m < kLanes / 2; ++m) {
        t[2 * m] = _mm512_unpacklo_ps(r[2 * m], r[2 * m + 1]);
        t[2 * m + 1] = _mm512_unpackhi_ps(r[2 * m], r[2 * m + 1]);
      }
      __m512 u[kLanes];
      for (int g = 0; g < 4; ++g) {
        const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
      }
      __m512 col[kLanes];
      for (int m = 0; m < 4; ++m) {
        const __m512 v = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
        const __m512 w = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
        const __m512 x = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
        const __m512 y = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
        col[m] = _mm512_shuffle_f32x4(v, x, 0x88);
        col[8 + m] = _mm512_shuffle_f32x4(v, x, 0xDD);
        col[4 + m] = _mm512_shuffle_f32x4(w, y, 0x88);
        col[12 + m] = _mm512_shuffle_f32x4(w, y, 0xDD);
      }
      for (int c = 0; c < width; ++c) _mm512_storeu_ps(out + (d0 + c) * kLanes, col[c]);
    }
  }
};
#include "query/kernels_impl.h"
#pragma GCC diagnostic pop
}  // namespace

const KernelTable kKernelTable = kKernels;

}  // namespace avx512
}  // namespace query
}  // namespace hedgedb
