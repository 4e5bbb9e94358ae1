// The DIMCO scan's AVX2 kernels (code_scan.h). Compiled with the kernel
// level's flags (cmake/hedgedb_simd.cmake) and reached only through the
// dispatch in code_scan.cc, after the CPU check (common/simd_level.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "query/kernels_isa.h"

namespace hedgedb {
namespace query {
namespace avx2 {
namespace {

struct Gather {
  static constexpr size_t kLanes = 8;
  using F = __m256;
  using I = __m256i;
  static F Load(const float* p) { return _mm256_load_ps(p); }
  static void Store(float* p, F v) { _mm256_store_ps(p, v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  // 32 bits at word_base + offsets[l] for each lane l.
  static I Words(const uint8_t* word_base, const int64_t* offsets) {
    const int* p = reinterpret_cast<const int*>(word_base);
    const I lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
    const I hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets + 4));
    return _mm256_set_m128i(_mm256_i64gather_epi32(p, hi, 1), _mm256_i64gather_epi32(p, lo, 1));
  }
  // table[row_start + ((words >> shift) & 0xFF)] per lane.
  static F Lookup(const float* table, I words, int shift, int row_start) {
    const I symbol = _mm256_and_si256(_mm256_srl_epi32(words, _mm_cvtsi32_si128(shift)),
                                      _mm256_set1_epi32(0xFF));
    return _mm256_i32gather_ps(table, _mm256_add_epi32(symbol, _mm256_set1_epi32(row_start)), 4);
  }
};
}  // namespace

#include "query/code_scan_gather_impl.h"

}  // namespace avx2
}  // namespace query
}  // namespace hedgedb
