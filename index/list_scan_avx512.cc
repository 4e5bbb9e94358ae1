// L2SqrRows and L2SqrColumns for AVX-512 (list_scan_isa.h), reached only
// through their dispatch after the CPU check (common/simd_level.h), compiled
// with the level's flags (cmake/hedgedb_simd.cmake).
//
// L2SqrSq8Rows and L2SqrFp16Rows are written out with intrinsics too (below).
// L2SqrColumns is the ISA-generic source of list_scan_impl.h. L2SqrRows is
// written out with intrinsics: GCC 12 vectorises the generic version's
// `omp simd` reductions through accumulators on the stack (it was 48 ns a
// 65-float row); here four rows run at once in registers, sixteen lanes a
// step, the tail of each row under a mask, one horizontal sum per row.
#include <immintrin.h>

#include <cstdint>

#include "index/list_scan_isa.h"

namespace hedgedb {
namespace index {
namespace avx512 {
#define HEDGEDB_LIST_SCAN_OWN_ROWS
#define HEDGEDB_LIST_SCAN_OWN_COLUMNS
#define HEDGEDB_LIST_SCAN_OWN_SQ8
#define HEDGEDB_LIST_SCAN_OWN_FP16
#include "index/list_scan_impl.h"
#undef HEDGEDB_LIST_SCAN_OWN_FP16
#undef HEDGEDB_LIST_SCAN_OWN_SQ8
#undef HEDGEDB_LIST_SCAN_OWN_COLUMNS
#undef HEDGEDB_LIST_SCAN_OWN_ROWS

// GCC 12 flags the deliberately undefined vectors inside avx512fintrin.h's
// horizontal sum (clang has no such warning).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out) {
  const int full = d & ~15;
  const __mmask16 tail = __mmask16((1u << (d & 15)) - 1u);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float* r = rows + i * d;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    for (int t = 0; t < full; t += 16) {
      const __m512 x = _mm512_loadu_ps(q + t);
      const __m512 e0 = _mm512_sub_ps(x, _mm512_loadu_ps(r + t));
      const __m512 e1 = _mm512_sub_ps(x, _mm512_loadu_ps(r + d + t));
      const __m512 e2 = _mm512_sub_ps(x, _mm512_loadu_ps(r + 2 * d + t));
      const __m512 e3 = _mm512_sub_ps(x, _mm512_loadu_ps(r + 3 * d + t));
      a0 = _mm512_fmadd_ps(e0, e0, a0);
      a1 = _mm512_fmadd_ps(e1, e1, a1);
      a2 = _mm512_fmadd_ps(e2, e2, a2);
      a3 = _mm512_fmadd_ps(e3, e3, a3);
    }
    if (tail != 0) {
      const __m512 x = _mm512_maskz_loadu_ps(tail, q + full);
      const __m512 e0 = _mm512_sub_ps(x, _mm512_maskz_loadu_ps(tail, r + full));
      const __m512 e1 = _mm512_sub_ps(x, _mm512_maskz_loadu_ps(tail, r + d + full));
      const __m512 e2 = _mm512_sub_ps(x, _mm512_maskz_loadu_ps(tail, r + 2 * d + full));
      const __m512 e3 = _mm512_sub_ps(x, _mm512_maskz_loadu_ps(tail, r + 3 * d + full));
      a0 = _mm512_fmadd_ps(e0, e0, a0);
      a1 = _mm512_fmadd_ps(e1, e1, a1);
      a2 = _mm512_fmadd_ps(e2, e2, a2);
      a3 = _mm512_fmadd_ps(e3, e3, a3);
    }
    out[i] = _mm512_reduce_add_ps(a0);
    out[i + 1] = _mm512_reduce_add_ps(a1);
    out[i + 2] = _mm512_reduce_add_ps(a2);
    out[i + 3] = _mm512_reduce_add_ps(a3);
  }
  for (; i < n; ++i) {
    const float* r = rows + i * d;
    __m512 a = _mm512_setzero_ps();
    for (int t = 0; t < full; t += 16) {
      const __m512 e = _mm512_sub_ps(_mm512_loadu_ps(q + t), _mm512_loadu_ps(r + t));
      a = _mm512_fmadd_ps(e, e, a);
    }
    if (tail != 0) {
      const __m512 e = _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, q + full),
                                     _mm512_maskz_loadu_ps(tail, r + full));
      a = _mm512_fmadd_ps(e, e, a);
    }
    out[i] = _mm512_reduce_add_ps(a);
  }
}

// Blocks of 64 vectors (four registers) keep their sums over all d
// dimensions in registers and store them once: summing into `out` one
// dimension at a time (the portable loop) stores every sum d times. Up to
// four queries share each block's column loads (16 accumulators), so a batch
// reads the centroids from L2 a quarter as often: one query alone was bound
// by those reads. The rows of `columns` are padded to `stride`, a multiple of
// 16 (CentroidColumns), so the last block of 16 reads defined values and
// stores under a mask. Each query's sums are the same operations in the same
// order whatever queries share its block.
namespace {

template <int kQ>
void L2SqrColumnsBlock(const float* q, const float* columns, int64_t stride, int64_t n, int d,
                       float* out) {
  int64_t j0 = 0;
  for (; j0 + 64 <= n; j0 += 64) {
    __m512 acc[kQ][4];
    for (int k = 0; k < kQ; ++k) {
      for (int v = 0; v < 4; ++v) acc[k][v] = _mm512_setzero_ps();
    }
    const float* c = columns + j0;
    for (int t = 0; t < d; ++t, c += stride) {
      const __m512 c0 = _mm512_loadu_ps(c), c1 = _mm512_loadu_ps(c + 16);
      const __m512 c2 = _mm512_loadu_ps(c + 32), c3 = _mm512_loadu_ps(c + 48);
      for (int k = 0; k < kQ; ++k) {
        const __m512 x = _mm512_set1_ps(q[int64_t(k) * d + t]);
        const __m512 e0 = _mm512_sub_ps(x, c0), e1 = _mm512_sub_ps(x, c1);
        const __m512 e2 = _mm512_sub_ps(x, c2), e3 = _mm512_sub_ps(x, c3);
        acc[k][0] = _mm512_fmadd_ps(e0, e0, acc[k][0]);
        acc[k][1] = _mm512_fmadd_ps(e1, e1, acc[k][1]);
        acc[k][2] = _mm512_fmadd_ps(e2, e2, acc[k][2]);
        acc[k][3] = _mm512_fmadd_ps(e3, e3, acc[k][3]);
      }
    }
    for (int k = 0; k < kQ; ++k) {
      for (int v = 0; v < 4; ++v) _mm512_storeu_ps(out + int64_t(k) * n + j0 + 16 * v, acc[k][v]);
    }
  }
  for (; j0 < n; j0 += 16) {
    const int64_t left = n - j0;
    const __mmask16 keep = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
    __m512 acc[kQ];
    for (int k = 0; k < kQ; ++k) acc[k] = _mm512_setzero_ps();
    const float* c = columns + j0;
    for (int t = 0; t < d; ++t, c += stride) {
      const __m512 ct = _mm512_maskz_loadu_ps(keep, c);
      for (int k = 0; k < kQ; ++k) {
        const __m512 e = _mm512_sub_ps(_mm512_set1_ps(q[int64_t(k) * d + t]), ct);
        acc[k] = _mm512_fmadd_ps(e, e, acc[k]);
      }
    }
    for (int k = 0; k < kQ; ++k) _mm512_mask_storeu_ps(out + int64_t(k) * n + j0, keep, acc[k]);
  }
}

}  // namespace

void L2SqrColumns(const float* q, int nq, const float* columns, int64_t stride, int64_t n, int d,
                  float* out) {
  int k = 0;
  for (; k + 4 <= nq; k += 4) {
    L2SqrColumnsBlock<4>(q + int64_t(k) * d, columns, stride, n, d, out + int64_t(k) * n);
  }
  const float* qk = q + int64_t(k) * d;
  float* ok = out + int64_t(k) * n;
  switch (nq - k) {
    case 3:
      L2SqrColumnsBlock<3>(qk, columns, stride, n, d, ok);
      break;
    case 2:
      L2SqrColumnsBlock<2>(qk, columns, stride, n, d, ok);
      break;
    case 1:
      L2SqrColumnsBlock<1>(qk, columns, stride, n, d, ok);
      break;
    default:
      break;
  }
}

// SQ8 rows, four at a time: 16 codes widened to floats per instruction
// pair (vpmovzxbd, vcvtdq2ps), then (a - b c)^2 summed by FMA; the tail under
// a byte mask (AVX-512BW), so no load passes a row's last code. The compiler's
// version of the generic loop ran at a fifth of this.
void L2SqrSq8Rows(const float* a, const float* b, const uint8_t* codes, int64_t n, int d,
                  float* out) {
  const int full = d & ~15;
  const int rest = d & 15;
  const __mmask16 tail = __mmask16((1u << rest) - 1u);
  auto widen = [](const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  };
  // A 512-bit masked byte load (AVX-512BW; the 128-bit form needs VL):
  // masked-off bytes are never touched.
  const __mmask64 tail_bytes = __mmask64((1ull << rest) - 1ull);
  auto widen_tail = [tail_bytes](const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm512_castsi512_si128(_mm512_maskz_loadu_epi8(tail_bytes, p))));
  };
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint8_t* r = codes + i * d;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (int t = 0; t < full; t += 16) {
      const __m512 at = _mm512_loadu_ps(a + t), bt = _mm512_loadu_ps(b + t);
      const __m512 e0 = _mm512_fnmadd_ps(bt, widen(r + t), at);
      const __m512 e1 = _mm512_fnmadd_ps(bt, widen(r + d + t), at);
      const __m512 e2 = _mm512_fnmadd_ps(bt, widen(r + 2 * d + t), at);
      const __m512 e3 = _mm512_fnmadd_ps(bt, widen(r + 3 * d + t), at);
      s0 = _mm512_fmadd_ps(e0, e0, s0);
      s1 = _mm512_fmadd_ps(e1, e1, s1);
      s2 = _mm512_fmadd_ps(e2, e2, s2);
      s3 = _mm512_fmadd_ps(e3, e3, s3);
    }
    if (rest != 0) {
      const __m512 at = _mm512_maskz_loadu_ps(tail, a + full);
      const __m512 bt = _mm512_maskz_loadu_ps(tail, b + full);
      const __m512 e0 = _mm512_fnmadd_ps(bt, widen_tail(r + full), at);
      const __m512 e1 = _mm512_fnmadd_ps(bt, widen_tail(r + d + full), at);
      const __m512 e2 = _mm512_fnmadd_ps(bt, widen_tail(r + 2 * d + full), at);
      const __m512 e3 = _mm512_fnmadd_ps(bt, widen_tail(r + 3 * d + full), at);
      s0 = _mm512_fmadd_ps(e0, e0, s0);
      s1 = _mm512_fmadd_ps(e1, e1, s1);
      s2 = _mm512_fmadd_ps(e2, e2, s2);
      s3 = _mm512_fmadd_ps(e3, e3, s3);
    }
    out[i] = _mm512_reduce_add_ps(s0);
    out[i + 1] = _mm512_reduce_add_ps(s1);
    out[i + 2] = _mm512_reduce_add_ps(s2);
    out[i + 3] = _mm512_reduce_add_ps(s3);
  }
  for (; i < n; ++i) {
    const uint8_t* r = codes + i * d;
    __m512 s = _mm512_setzero_ps();
    for (int t = 0; t < full; t += 16) {
      const __m512 e =
          _mm512_fnmadd_ps(_mm512_loadu_ps(b + t), widen(r + t), _mm512_loadu_ps(a + t));
      s = _mm512_fmadd_ps(e, e, s);
    }
    if (rest != 0) {
      const __m512 e = _mm512_fnmadd_ps(_mm512_maskz_loadu_ps(tail, b + full), widen_tail(r + full),
                                        _mm512_maskz_loadu_ps(tail, a + full));
      s = _mm512_fmadd_ps(e, e, s);
    }
    out[i] = _mm512_reduce_add_ps(s);
  }
}

// Rows of halves, four at a time: sixteen halves widened per vcvtph2ps
// (AVX-512F), then (q - x)^2 summed by FMA; the tail under a 16-bit-element
// mask (AVX-512BW), so no load passes a row's last code.
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out) {
  const int full = d & ~15;
  const int rest = d & 15;
  const __mmask16 tail = __mmask16((1u << rest) - 1u);
  auto widen = [](const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  };
  // A 512-bit masked load of 16-bit elements (the 256-bit form needs VL).
  const __mmask32 tail_halves = __mmask32((1u << rest) - 1u);
  auto widen_tail = [tail_halves](const uint16_t* p) {
    return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_maskz_loadu_epi16(tail_halves, p)));
  };
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint16_t* r = codes + i * d;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (int t = 0; t < full; t += 16) {
      const __m512 x = _mm512_loadu_ps(q + t);
      const __m512 e0 = _mm512_sub_ps(x, widen(r + t));
      const __m512 e1 = _mm512_sub_ps(x, widen(r + d + t));
      const __m512 e2 = _mm512_sub_ps(x, widen(r + 2 * d + t));
      const __m512 e3 = _mm512_sub_ps(x, widen(r + 3 * d + t));
      s0 = _mm512_fmadd_ps(e0, e0, s0);
      s1 = _mm512_fmadd_ps(e1, e1, s1);
      s2 = _mm512_fmadd_ps(e2, e2, s2);
      s3 = _mm512_fmadd_ps(e3, e3, s3);
    }
    if (rest != 0) {
      const __m512 x = _mm512_maskz_loadu_ps(tail, q + full);
      const __m512 e0 = _mm512_sub_ps(x, widen_tail(r + full));
      const __m512 e1 = _mm512_sub_ps(x, widen_tail(r + d + full));
      const __m512 e2 = _mm512_sub_ps(x, widen_tail(r + 2 * d + full));
      const __m512 e3 = _mm512_sub_ps(x, widen_tail(r + 3 * d + full));
      s0 = _mm512_fmadd_ps(e0, e0, s0);
      s1 = _mm512_fmadd_ps(e1, e1, s1);
      s2 = _mm512_fmadd_ps(e2, e2, s2);
      s3 = _mm512_fmadd_ps(e3, e3, s3);
    }
    out[i] = _mm512_reduce_add_ps(s0);
    out[i + 1] = _mm512_reduce_add_ps(s1);
    out[i + 2] = _mm512_reduce_add_ps(s2);
    out[i + 3] = _mm512_reduce_add_ps(s3);
  }
  for (; i < n; ++i) {
    const uint16_t* r = codes + i * d;
    __m512 s = _mm512_setzero_ps();
    for (int t = 0; t < full; t += 16) {
      const __m512 e = _mm512_sub_ps(_mm512_loadu_ps(q + t), widen(r + t));
      s = _mm512_fmadd_ps(e, e, s);
    }
    if (rest != 0) {
      const __m512 e = _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, q + full), widen_tail(r + full));
      s = _mm512_fmadd_ps(e, e, s);
    }
    out[i] = _mm512_reduce_add_ps(s);
  }
}

#pragma GCC diagnostic pop

}  // namespace avx512
}  // namespace index
}  // namespace hedgedb
