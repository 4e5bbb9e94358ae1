// The scorers' kernels (kernels.h) for AVX2 + FMA, 8 lanes: the Simd operations
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
namespace avx2 {
namespace {

struct Simd {
  static constexpr int kLanes = 8;
  using V = __m256;
  static V Zero() { return _mm256_setzero_ps(); }
  static V Set1(float x) { return _mm256_set1_ps(x); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V a) { _mm256_storeu_ps(p, a); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm256_div_ps(a, b); }
  static V Min(V a, V b) { return _mm256_min_ps(a, b); }
  static V Max(V a, V b) { return _mm256_max_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Sqrt(V a) { return _mm256_sqrt_ps(a); }
  // Relative error <= 1.5 * 2^-12.
  static V RcpApprox(V a) { return _mm256_rcp_ps(a); }
  static V RsqrtApprox(V a) { return _mm256_rsqrt_ps(a); }
  static V Round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V Pow2(V n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  // The first count (< kLanes) floats at p, 0 in the other lanes; the
  // masked load reads nothing past them.
  static V LoadFirst(const float* p, int count) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lane));
  }
  static float ReduceAdd(V a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // x = m 2^e with m in [1, 2), for finite x > 0: the exponent and mantissa
  // bits, after scaling subnormals by 2^24 into the normal range.
  static void Frexp(V x, V* m, V* e) {
    const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
    x = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(16777216.0f)), tiny);
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i biased = _mm256_srli_epi32(bits, 23);
    *e = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(biased, _mm256_set1_epi32(127))),
                       _mm256_and_ps(tiny, _mm256_set1_ps(24.0f)));
    *m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                             _mm256_set1_epi32(0x3f800000)));
  }
  static void TransposeRows(const float* const* rows, int offset, int count, float* out) {
    for (int d0 = 0; d0 < count; d0 += kLanes) {
      const int width = std::min(kLanes, count - d0);
      __m256 r[kLanes];
      if (width == kLanes) {
        for (int l = 0; l < kLanes; ++l) r[l] = _mm256_loadu_ps(rows[l] + offset + d0);
      } else {
        // Masked loads do not touch memory past the row.
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(width), lane);
        for (int l = 0; l < kLanes; ++l) r[l] = _mm256_maskload_ps(rows[l] + offset + d0, mask);
      }
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
      __m256 col[kLanes];
      col[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
      col[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
      col[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
      col[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
      col[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
      col[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
      col[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
      col[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
      for (int t = 0; t < width; ++t) _mm256_storeu_ps(out + (d0 + t) * kLanes, col[t]);
    }
  }
};
#include "query/kernels_impl.h"
}  // namespace

const KernelTable kKernelTable = kKernels;

}  // namespace avx2
}  // namespace query
}  // namespace hedgedb
