#include "query/code_topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "query/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HEDGEDB_CODE_TOPK_VBMI 1
#include <immintrin.h>
#else
#define HEDGEDB_CODE_TOPK_VBMI 0
#endif

namespace hedgedb {
namespace query {
namespace {

constexpr int kMaxDim = 64;
constexpr int kMaxSymbols = 16;

#if HEDGEDB_CODE_TOPK_VBMI
// qtable: 64 dimensions x 16 bytes, dimension-major, zero past d and k.
// Lane i of an item's 64 code bytes belongs to group i / 8; the group's two
// table vectors hold its 8 dimensions x 16 entries, and index
// (i % 8) * 16 + code picks the entry. Writing only the group's lanes, each
// permute reads indices the earlier ones left untouched.
// A pragma rather than a function attribute so that the lambda inside gets the
// target too. Masked intrinsics where GCC 12 warns about the undefined source
// vectors of the plain ones.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi")
void PrescanVbmi(const uint8_t* qtable, int d, const uint8_t* base, size_t row_stride_bytes,
                 const int64_t* rows, size_t n, uint16_t* out) {
  __m512i tab[2 * kMaxDim / 8];
  for (int v = 0; v < 2 * kMaxDim / 8; ++v) tab[v] = _mm512_loadu_si512(qtable + 64 * v);
  alignas(64) uint8_t lane_base_bytes[64];
  for (int i = 0; i < 64; ++i) lane_base_bytes[i] = static_cast<uint8_t>((i % 8) * 16);
  const __m512i lane_base = _mm512_load_si512(lane_base_bytes);
  const __mmask64 load_mask = d == 64 ? ~0ull : (1ull << d) - 1;
  const __m512i zero = _mm512_setzero_si512();
  // One item (the n mod 8 last ones): lanes are its 64 dimensions, group p's
  // permute writes only lanes 8p..8p+7.
  auto lookup = [&](size_t r) {
    const uint8_t* code = base + static_cast<size_t>(rows[r]) * row_stride_bytes;
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
    __m512i v[8];
    for (int m = 0; m < 8; ++m) {
      v[m] = _mm512_maskz_loadu_epi8(load_mask,
                                     base + static_cast<size_t>(rows[r + m]) * row_stride_bytes);
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
    alignas(64) uint64_t sums[8];
    _mm512_store_si512(sums, acc);
    for (int m = 0; m < 8; ++m) out[r + m] = static_cast<uint16_t>(sums[m]);
  }
  for (; r < n; ++r) {
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, lookup(r));
    uint64_t total = 0;
    for (uint64_t v : lanes) total += v;
    out[r] = static_cast<uint16_t>(total);
  }
}
#pragma GCC pop_options

bool CpuHasVbmi() {
  return DetectKernelIsa() == KernelIsa::kAvx512 && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vbmi");
}
#endif

void SortAndTrim(std::vector<std::pair<float, size_t>>* scored, size_t topk) {
  // Best score first, then position in rows.
  auto better = [](const std::pair<float, size_t>& a, const std::pair<float, size_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  const size_t keep = std::min(topk, scored->size());
  std::partial_sort(scored->begin(), scored->begin() + keep, scored->end(), better);
  scored->resize(keep);
}

void Emit(const std::vector<std::pair<float, size_t>>& scored, const int64_t* rows,
          std::vector<CodeHit>* out) {
  out->clear();
  for (const auto& s : scored) out->push_back(CodeHit{rows[s.second], s.first});
}

}  // namespace

bool CodeTopKPrescanAvailable(int d, int k) {
#if HEDGEDB_CODE_TOPK_VBMI
  return d >= 1 && d <= kMaxDim && k >= 1 && k <= kMaxSymbols && CpuHasVbmi();
#else
  (void)d;
  (void)k;
  return false;
#endif
}

void CodeTopK(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
              const int64_t* rows, size_t n, size_t topk, std::vector<CodeHit>* out,
              CodeTopKStats* stats) {
  CodeTopKStats local;
  if (stats == nullptr) stats = &local;
  *stats = CodeTopKStats();
  std::vector<std::pair<float, size_t>> scored;
  auto exact = [&](const std::vector<size_t>* positions) {
    const size_t m = positions != nullptr ? positions->size() : n;
    std::vector<int64_t> subset;
    if (positions != nullptr) {
      subset.reserve(m);
      for (size_t p : *positions) subset.push_back(rows[p]);
    }
    std::vector<float> scores(m);
    CodeScanRows(table, d, k, base, row_stride_bytes, positions != nullptr ? subset.data() : rows,
                 m, scores.data());
    scored.resize(m);
    for (size_t i = 0; i < m; ++i) scored[i] = {scores[i], positions ? (*positions)[i] : i};
    stats->rescored = m;
    SortAndTrim(&scored, topk);
    Emit(scored, rows, out);
  };

  // Quantization, in double: lo_i = row minimum, one step delta for all rows
  // (the bytes of different dimensions are added), q = floor((t - lo) / delta)
  // <= 254, so lo + q delta <= t < lo + (q + 1) delta.
  bool usable = topk > 0 && topk < n && CodeTopKPrescanAvailable(d, k);
  double base_sum = 0, range = 0, abs_sum = 0;
  std::vector<double> lo(d > 0 ? d : 0);
  for (int i = 0; usable && i < d; ++i) {
    double mn = table[i * k], mx = table[i * k], amax = 0;
    for (int j = 0; j < k; ++j) {
      const double t = table[i * k + j];
      if (!std::isfinite(t)) usable = false;
      mn = std::min(mn, t);
      mx = std::max(mx, t);
      amax = std::max(amax, std::fabs(t));
    }
    lo[i] = mn;
    base_sum += mn;
    range = std::max(range, mx - mn);
    abs_sum += amax;
  }
  if (!usable || range == 0) return exact(nullptr);
#if HEDGEDB_CODE_TOPK_VBMI
  const double delta = range / 254.0;
  alignas(64) uint8_t qtable[kMaxDim * kMaxSymbols] = {};
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < k; ++j) {
      const double q = std::floor((table[i * k + j] - lo[i]) / delta);
      qtable[i * kMaxSymbols + j] = static_cast<uint8_t>(std::min(254.0, std::max(0.0, q)));
    }
  }
  // Every entry is written by the pre-scan: no zero fill.
  std::unique_ptr<uint16_t[]> q(new uint16_t[n]);
  PrescanVbmi(qtable, d, base, row_stride_bytes, rows, n, q.get());
  stats->prescan = true;

  // Q_k: the topk-th largest Q.
  std::vector<uint16_t> best(q.get(), q.get() + topk);
  std::make_heap(best.begin(), best.end(), std::greater<uint16_t>());
  for (size_t r = topk; r < n; ++r) {
    if (q[r] > best.front()) {
      std::pop_heap(best.begin(), best.end(), std::greater<uint16_t>());
      best.back() = q[r];
      std::push_heap(best.begin(), best.end(), std::greater<uint16_t>());
    }
  }
  const int qk = best.front();
  // At least topk items score >= base + delta Q_k - slack, so an item whose
  // upper bound base + delta (Q + d) + slack is below that is not in the
  // top-k. slack: 4x the float summation error bound d 2^-24 sum |t| (and the
  // double rounding of the bounds, far smaller).
  const double slack = 4.0 * d * std::ldexp(abs_sum + delta * d, -24);
  const double q_min = qk - d - 2.0 * slack / delta;
  std::vector<size_t> survivors;
  for (size_t r = 0; r < n; ++r) {
    if (q[r] >= q_min) survivors.push_back(r);
  }
  exact(&survivors);
#else
  exact(nullptr);
#endif
}

}  // namespace query
}  // namespace hedgedb
