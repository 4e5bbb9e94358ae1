// The code top-k pre-scan (code_topk.h) for AVX-512 BW and VBMI. Compiled
// with the kAvx512 level's flags plus -mavx512vbmi (query/CMakeLists.txt) and
// reached only from CodeTopK after CodeTopKPrescanAvailable checked the level
// and VBMI (common/simd_level.h).
#include <immintrin.h>

#include "query/kernels_isa.h"

namespace hedgedb {
namespace query {
namespace avx512 {
namespace {
constexpr int kMaxDim = kCodeTopKMaxDim;
// Items ahead of the block scored whose rows are prefetched: 8 KB of 64-byte
// rows, about a memory latency of work.
constexpr size_t kAhead = 128;

// qtable: 64 dimensions x 16 bytes, dimension-major, zero past d and k.
// Lane i of an item's 64 code bytes belongs to group i / 8; the group's two
// table vectors hold its 8 dimensions x 16 entries, and index
// (i % 8) * 16 + code picks the entry. Writing only the group's lanes, each
// permute reads indices the earlier ones left untouched.
// Masked intrinsics where GCC 12 warns about the undefined source vectors of
// the plain ones.
// kContiguous: rows is null and row r is first_row + r (no row ids to read).
template <bool kContiguous>
size_t PrescanRows(const uint8_t* qtable, int d, const uint8_t* base, size_t row_stride_bytes,
                   const int64_t* rows, int64_t first_row, size_t n, uint16_t floor,
                   uint32_t* positions, uint16_t* qs) {
  auto code_of = [&](size_t r) {
    const int64_t row = kContiguous ? first_row + static_cast<int64_t>(r) : rows[r];
    return base + static_cast<size_t>(row) * row_stride_bytes;
  };
  __m512i tab[2 * kMaxDim / 8];
  for (int v = 0; v < 2 * kMaxDim / 8; ++v) tab[v] = _mm512_loadu_si512(qtable + 64 * v);
  alignas(64) uint8_t lane_base_bytes[64];
  for (int i = 0; i < 64; ++i) lane_base_bytes[i] = static_cast<uint8_t>((i % 8) * 16);
  const __m512i lane_base = _mm512_load_si512(lane_base_bytes);
  const __mmask64 load_mask = d == 64 ? ~0ull : (1ull << d) - 1;
  const __m512i zero = _mm512_setzero_si512();
  const __m512i floor_q = _mm512_set1_epi64(floor);
  size_t found = 0;
  auto emit = [&](size_t position, uint64_t q) {
    positions[found] = static_cast<uint32_t>(position);
    qs[found++] = static_cast<uint16_t>(q);
  };
  // One item (the n mod 8 last ones): lanes are its 64 dimensions, group p's
  // permute writes only lanes 8p..8p+7.
  auto lookup = [&](size_t r) {
    const uint8_t* code = code_of(r);
    __m512i x = _mm512_add_epi8(_mm512_maskz_loadu_epi8(load_mask, code), lane_base);
    // Every group, so that lanes past d also turn into (zero) table entries.
    for (int p = 0; p < kMaxDim / 8; ++p) {
      x = _mm512_mask2_permutex2var_epi8(tab[2 * p], x, 0xFFull << (8 * p), tab[2 * p + 1]);
    }
    return _mm512_sad_epu8(x, zero);
  };
  // Eight items at a time: transpose their rows as 8 x 8 qwords, so vector p
  // holds dimensions 8p..8p+7 of all eight items (item m in qword m) and one
  // permute serves 64 lookups; the byte sums of qword m then add up item m.
  size_t r = 0;
  for (; r + 8 <= n; r += 8) {
    // The rows kAhead items on are asked for: on Zen 5 the hardware's
    // prefetch alone left this loop at a quarter of the memory floor
    // (bench/RESULTS.md, "DIMCO top-10 on Zen 5").
    if (r + kAhead + 8 <= n) {
      for (int m = 0; m < 8; ++m)
        _mm_prefetch(reinterpret_cast<const char*>(code_of(r + kAhead + m)), _MM_HINT_T0);
    }
    __m512i v[8];
    for (int m = 0; m < 8; ++m) {
      v[m] = _mm512_maskz_loadu_epi8(load_mask, code_of(r + m));
    }
    __m512i a[8], b[8];
    for (int m = 0; m < 8; m += 2) {  // 128-bit lane l: qwords 2l (a[m]), 2l+1 (a[m+1])
      a[m] = _mm512_maskz_unpacklo_epi64(0xFF, v[m], v[m + 1]);
      a[m + 1] = _mm512_maskz_unpackhi_epi64(0xFF, v[m], v[m + 1]);
    }
    for (int h = 0; h < 8; h += 4) {  // items h..h+3
      for (int odd = 0; odd < 2; ++odd) {
        b[h + odd] =
            _mm512_maskz_shuffle_i64x2(0xFF, a[h + odd], a[h + 2 + odd], 0x88);  // q 0/1, 4/5
        b[h + 2 + odd] =
            _mm512_maskz_shuffle_i64x2(0xFF, a[h + odd], a[h + 2 + odd], 0xDD);  // q 2/3, 6/7
      }
    }
    // b[j] (items 0..3) and b[4 + j] (items 4..7) hold groups j and j + 4.
    __m512i acc = zero;
    for (int j = 0; j < 4; ++j) {
      const __m512i groups_lo = _mm512_maskz_shuffle_i64x2(0xFF, b[j], b[4 + j], 0x88);
      const __m512i groups_hi = _mm512_maskz_shuffle_i64x2(0xFF, b[j], b[4 + j], 0xDD);
      const int p = j;
      acc = _mm512_add_epi64(
          acc,
          _mm512_sad_epu8(_mm512_permutex2var_epi8(
                              tab[2 * p], _mm512_add_epi8(groups_lo, lane_base), tab[2 * p + 1]),
                          zero));
      acc = _mm512_add_epi64(
          acc, _mm512_sad_epu8(
                   _mm512_permutex2var_epi8(tab[2 * (p + 4)], _mm512_add_epi8(groups_hi, lane_base),
                                            tab[2 * (p + 4) + 1]),
                   zero));
    }
    // Once the caller's floor has risen, most blocks have no Q at or above
    // it: one compare, no store.
    const __mmask8 hits = _mm512_cmpge_epu64_mask(acc, floor_q);
    if (hits != 0) {
      alignas(64) uint64_t sums[8];
      _mm512_store_si512(sums, acc);
      for (int m = 0; m < 8; ++m) {
        if ((hits >> m) & 1) emit(r + m, sums[m]);
      }
    }
  }
  for (; r < n; ++r) {
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, lookup(r));
    uint64_t total = 0;
    for (uint64_t v : lanes) total += v;
    if (total >= floor) emit(r, total);
  }
  return found;
}
}  // namespace

size_t PrescanVbmi(const uint8_t* qtable, int d, const uint8_t* base, size_t row_stride_bytes,
                   const int64_t* rows, int64_t first_row, size_t n, uint16_t floor,
                   uint32_t* positions, uint16_t* qs) {
  return rows != nullptr ? PrescanRows<false>(qtable, d, base, row_stride_bytes, rows, 0, n, floor,
                                              positions, qs)
                         : PrescanRows<true>(qtable, d, base, row_stride_bytes, nullptr, first_row,
                                             n, floor, positions, qs);
}

}  // namespace avx512
}  // namespace query
}  // namespace hedgedb
