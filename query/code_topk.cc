#include "query/code_topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

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

// Rows per pre-scan call (the first calls are shorter): the floor the kernel
// compares against rises between calls.
constexpr size_t kPrescanChunk = 4096;
constexpr size_t kFirstPrescanChunk = 256;

// The topk largest Q seen so far (a min-heap) and the candidates: a row
// enters them if its Q is at least (the topk-th largest Q so far, itself
// included) - margin. The topk-th largest only rises, so this keeps every row
// with Q >= Q_k - margin for the final Q_k, and a row below floor() changes
// nothing: the kernel leaves those out.
class RunningTop {
 public:
  RunningTop(size_t topk, int margin) : topk_(topk), margin_(margin) { heap_.reserve(topk); }
  uint16_t floor() const { return floor_; }
  // Q_k once topk rows were offered.
  uint16_t kth() const { return heap_.front(); }
  const std::vector<std::pair<size_t, uint16_t>>& candidates() const { return candidates_; }

  void Offer(size_t position, uint16_t q) {
    auto greater = std::greater<uint16_t>();
    if (heap_.size() < topk_) {
      heap_.push_back(q);
      std::push_heap(heap_.begin(), heap_.end(), greater);
      if (heap_.size() == topk_) floor_ = FloorBelow(heap_.front());
    } else if (q > heap_.front()) {
      std::pop_heap(heap_.begin(), heap_.end(), greater);
      heap_.back() = q;
      std::push_heap(heap_.begin(), heap_.end(), greater);
      floor_ = FloorBelow(heap_.front());
    }
    if (q >= floor_) candidates_.push_back({position, q});
  }

 private:
  uint16_t FloorBelow(uint16_t kth) const {
    return static_cast<uint16_t>(std::max(0, static_cast<int>(kth) - margin_));
  }

  size_t topk_;
  int margin_;
  std::vector<uint16_t> heap_;
  uint16_t floor_ = 0;  // 0 until topk rows were offered
  std::vector<std::pair<size_t, uint16_t>> candidates_;
};

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
  auto row_at = [rows](size_t p) { return rows != nullptr ? rows[p] : static_cast<int64_t>(p); };
  std::vector<std::pair<float, size_t>> scored;
  auto exact = [&](const std::vector<size_t>* positions) {
    const size_t m = positions != nullptr ? positions->size() : n;
    std::vector<int64_t> subset;
    if (positions != nullptr || rows == nullptr) {
      subset.reserve(m);
      for (size_t i = 0; i < m; ++i) subset.push_back(row_at(positions ? (*positions)[i] : i));
    }
    std::vector<float> scores(m);
    CodeScanRows(table, d, k, base, row_stride_bytes, subset.empty() ? rows : subset.data(), m,
                 scores.data());
    scored.resize(m);
    for (size_t i = 0; i < m; ++i) scored[i] = {scores[i], positions ? (*positions)[i] : i};
    stats->rescored = m;
    SortAndTrim(&scored, topk);
    out->clear();
    for (const auto& s : scored) out->push_back(CodeHit{row_at(s.second), s.first});
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
  // At least topk items score >= base + delta Q_k - slack, so an item whose
  // upper bound base + delta (Q + d) + slack is below that is not in the
  // top-k. slack: 4x the float summation error bound d 2^-24 sum |t| (and the
  // double rounding of the bounds, far smaller). Q and Q_k are integers, so
  // Q >= Q_k - (d + 2 slack / delta) is Q >= Q_k - margin.
  const double slack = 4.0 * d * std::ldexp(abs_sum + delta * d, -24);
  // (Clamped where it keeps every row anyway: Q <= 254 d.)
  const int margin =
      static_cast<int>(std::min(std::floor(d + 2.0 * slack / delta), 255.0 * kMaxDim));
  RunningTop top(topk, margin);
  uint32_t positions[kPrescanChunk];
  uint16_t qs[kPrescanChunk];
  // Chunks start small: until the floor has risen, the kernel passes on
  // every row.
  size_t chunk = std::min(kPrescanChunk, std::max<size_t>(kFirstPrescanChunk, topk));
  for (size_t start = 0; start < n; start += chunk, chunk = std::min(kPrescanChunk, 2 * chunk)) {
    const size_t found = avx512::PrescanVbmi(
        qtable, d, base, row_stride_bytes, rows ? rows + start : nullptr,
        static_cast<int64_t>(start), std::min(chunk, n - start), top.floor(), positions, qs);
    // The kernel's floor is the chunk's first; Offer rechecks against the
    // current one.
    for (size_t i = 0; i < found; ++i) {
      if (qs[i] >= top.floor()) top.Offer(start + positions[i], qs[i]);
    }
  }
  stats->prescan = true;
  const int qk = top.kth();
  std::vector<size_t> survivors;
  for (const auto& c : top.candidates()) {
    if (c.second >= qk - margin) survivors.push_back(c.first);
  }
  exact(&survivors);
#else
  exact(nullptr);
#endif
}

}  // namespace query
}  // namespace hedgedb
