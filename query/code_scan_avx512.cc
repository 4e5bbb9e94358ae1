// The DIMCO scan's AVX-512 kernels (code_scan.h). Compiled with the kernel
// level's flags (cmake/hedgedb_simd.cmake) and reached only through the
// dispatch in code_scan.cc, after the CPU check (common/simd_level.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "query/kernels_isa.h"

namespace hedgedb {
namespace query {
namespace avx512 {
namespace {

// Masked intrinsics with zero sources where the plain ones exist: GCC 12 warns
// about the undefined source vectors inside those.
struct Gather {
  static constexpr size_t kLanes = 16;
  using F = __m512;
  using I = __m512i;
  static F Load(const float* p) { return _mm512_load_ps(p); }
  static void Store(float* p, F v) { _mm512_store_ps(p, v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static I Words(const uint8_t* word_base, const int64_t* offsets) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i lo =
        _mm512_mask_i64gather_epi32(zero, 0xFF, _mm512_load_si512(offsets), word_base, 1);
    const __m256i hi =
        _mm512_mask_i64gather_epi32(zero, 0xFF, _mm512_load_si512(offsets + 8), word_base, 1);
    return _mm512_maskz_inserti64x4(
        0xFF, _mm512_maskz_inserti64x4(0xFF, _mm512_setzero_si512(), lo, 0), hi, 1);
  }
  static F Lookup(const float* table, I words, int shift, int row_start) {
    const I symbol = _mm512_and_si512(
        _mm512_maskz_srl_epi32(0xFFFF, words, _mm_cvtsi32_si128(shift)), _mm512_set1_epi32(0xFF));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xFFFF,
                                    _mm512_add_epi32(symbol, _mm512_set1_epi32(row_start)), table,
                                    4);
  }
};
}  // namespace

#include "query/code_scan_gather_impl.h"

// Lanes are 16 dimensions of one item (the variant that wins on some Intel
// Xeons): codes load as 16 bytes, widen to table offsets, one vgatherdps per
// 16 lookups; per item a vector of partial sums, reduced at the end, plus the
// d mod 16 last dimensions scalar. The order of the sum differs from
// ScalarCodeScore (rounding-level differences).
void ScanGatherDims(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                    const int64_t* rows, size_t n, float* out) {
  constexpr size_t kBlock = 128;
  constexpr int kChunk = 32;
  const int d16 = d / 16 * 16;
  const __m512 zero = _mm512_setzero_ps();
  const __m512i lane_offsets =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(k));
  alignas(64) float partial[kBlock * 16];
  const uint8_t* codes[kBlock];
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t count = std::min(kBlock, n - start);
    for (size_t r = 0; r < count; ++r) {
      codes[r] = base + static_cast<size_t>(rows[start + r]) * row_stride_bytes;
      _mm512_store_ps(partial + r * 16, zero);
    }
    for (int c0 = 0; c0 < d16; c0 += kChunk) {
      const int c1 = std::min(d16, c0 + kChunk);
      for (size_t r = 0; r < count; ++r) {
        __m512 acc = _mm512_load_ps(partial + r * 16);
        for (int i0 = c0; i0 < c1; i0 += 16) {
          const __m128i symbols = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes[r] + i0));
          const __m512i index =
              _mm512_add_epi32(_mm512_maskz_cvtepu8_epi32(0xFFFF, symbols), lane_offsets);
          acc =
              _mm512_add_ps(acc, _mm512_mask_i32gather_ps(zero, 0xFFFF, index,
                                                          table + static_cast<size_t>(i0) * k, 4));
        }
        _mm512_store_ps(partial + r * 16, acc);
      }
    }
    for (size_t r = 0; r < count; ++r) {
      float sum = 0.0f;
      for (int l = 0; l < 16; ++l) sum += partial[r * 16 + l];
      for (int i = d16; i < d; ++i) sum += table[static_cast<size_t>(i) * k + codes[r][i]];
      out[start + r] = sum;
    }
  }
}
}  // namespace avx512
}  // namespace query
}  // namespace hedgedb
