#include "query/code_topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "query/kernels_isa.h"

// The pre-scan itself is code_topk_avx512.cc (AVX-512 BW and VBMI).

namespace hedgedb {
namespace query {
namespace {

constexpr int kMaxDim = kCodeTopKMaxDim;
constexpr int kMaxSymbols = kCodeTopKMaxSymbols;

#if HEDGEDB_SIMD_X86
// VBMI is beyond the kAvx512 level (F and BW; Skylake-X has no VBMI), so the
// pre-scan checks it on top of the level and otherwise leaves the top-k to the
// full scan.
bool PrescanCpu() {
  static const bool vbmi = __builtin_cpu_supports("avx512vbmi");
  return ActiveKernelIsa() == KernelIsa::kAvx512 && vbmi;
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
#if HEDGEDB_SIMD_X86
  return d >= 1 && d <= kMaxDim && k >= 1 && k <= kMaxSymbols && PrescanCpu();
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
  double range = 0, abs_sum = 0;
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
    range = std::max(range, mx - mn);
    abs_sum += amax;
  }
  if (!usable || range == 0) return exact(nullptr);
#if HEDGEDB_SIMD_X86
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
  avx512::PrescanVbmi(qtable, d, base, row_stride_bytes, rows, n, q.get());
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
