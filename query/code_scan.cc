#include "query/code_scan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "query/kernels.h"

// Gather kernels are compiled under GCC target pragmas, so the rest of the
// library keeps the baseline ISA; the CPU check (DetectKernelIsa) guards them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HEDGEDB_CODE_SCAN_GATHER 1
#include <immintrin.h>
#else
#define HEDGEDB_CODE_SCAN_GATHER 0
#endif

namespace hedgedb {
namespace query {
namespace {

// Items per block and dimensions per chunk of kBlocked and the lanes-are-items
// gathers: the table rows of one chunk (16 x k floats, 16 KiB at k = 256) stay
// in L1 while the block's items are scanned.
constexpr size_t kItemBlock = 128;
constexpr int kDimChunk = 16;

void ScanBlocked(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                 const int64_t* rows, size_t n, float* out) {
  float partial[kItemBlock];
  const uint8_t* codes[kItemBlock];
  for (size_t start = 0; start < n; start += kItemBlock) {
    const size_t count = std::min(kItemBlock, n - start);
    for (size_t r = 0; r < count; ++r) {
      codes[r] = base + static_cast<size_t>(rows[start + r]) * row_stride_bytes;
      partial[r] = 0.0f;
    }
    for (int i0 = 0; i0 < d; i0 += kDimChunk) {
      const float* t = table + static_cast<size_t>(i0) * k;
      if (d - i0 >= kDimChunk) {
        for (size_t r = 0; r < count; ++r) {
          const uint8_t* c = codes[r] + i0;
          // Four independent sums hide the add latency.
          float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
          for (int i = 0; i < kDimChunk; i += 4) {
            a0 += t[(i + 0) * k + c[i + 0]];
            a1 += t[(i + 1) * k + c[i + 1]];
            a2 += t[(i + 2) * k + c[i + 2]];
            a3 += t[(i + 3) * k + c[i + 3]];
          }
          partial[r] += (a0 + a1) + (a2 + a3);
        }
      } else {
        for (size_t r = 0; r < count; ++r) {
          const uint8_t* c = codes[r] + i0;
          float sum = 0.0f;
          for (int i = 0; i < d - i0; ++i) sum += t[i * k + c[i]];
          partial[r] += sum;
        }
      }
    }
    for (size_t r = 0; r < count; ++r) out[start + r] = partial[r];
  }
}

void ScanInterleaved(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, float* out) {
  // Eight items in flight hide the add latency without reordering any item's
  // sum, so the result is ScalarCodeScore's to the bit. Larger blocks and
  // chunks than kBlocked's measured ~15% faster on Zen 4 (the table chunk,
  // 32 KiB at k = 256, still mostly stays in L1).
  constexpr size_t kInFlight = 8;
  constexpr size_t kBlock = 512;
  constexpr int kChunk = 32;
  float partial[kBlock];
  const uint8_t* codes[kBlock];
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t count = std::min(kBlock, n - start);
    for (size_t r = 0; r < count; ++r) {
      codes[r] = base + static_cast<size_t>(rows[start + r]) * row_stride_bytes;
      partial[r] = 0.0f;
    }
    for (int i0 = 0; i0 < d; i0 += kChunk) {
      const int i1 = std::min(d, i0 + kChunk);
      size_t r = 0;
      for (; r + kInFlight <= count; r += kInFlight) {
        float s[kInFlight];
        for (size_t l = 0; l < kInFlight; ++l) s[l] = partial[r + l];
        const float* t = table + static_cast<size_t>(i0) * k;
        for (int i = i0; i < i1; ++i, t += k) {
          for (size_t l = 0; l < kInFlight; ++l) s[l] += t[codes[r + l][i]];
        }
        for (size_t l = 0; l < kInFlight; ++l) partial[r + l] = s[l];
      }
      for (; r < count; ++r) {
        float s = partial[r];
        for (int i = i0; i < i1; ++i) s += table[static_cast<size_t>(i) * k + codes[r][i]];
        partial[r] = s;
      }
    }
    for (size_t r = 0; r < count; ++r) out[start + r] = partial[r];
  }
}

#if HEDGEDB_CODE_SCAN_GATHER
// The lanes-are-items gathers (code_scan_gather_impl.h) per ISA.
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
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
#include "query/code_scan_gather_impl.h"
}  // namespace avx2
#pragma GCC pop_options

// AVX-512 code uses masked intrinsics with zero sources where the plain ones
// exist: GCC 12 warns about the undefined source vectors inside those.
#pragma GCC push_options
#pragma GCC target("avx512f")
namespace avx512 {
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
#pragma GCC pop_options
#endif  // HEDGEDB_CODE_SCAN_GATHER

const char* const kNames[kCodeScanKernelCount] = {"blocked", "interleaved", "avx2-gather",
                                                  "avx512-gather", "avx512-gather-dims"};

// Timed trial: k = 256 (the largest, most cache-sensitive table), d = 64, 512
// items in random order; every supported kernel runs once to warm up, then
// four rounds in turn (so a burst of load on the host hits all kernels), best
// time wins. About 0.5 ms in all on Zen 4 (five kernels, 10-20 us a scan).
CodeScanKernel RunTrial() {
  constexpr int kTrialDim = 64, kTrialK = 256;
  constexpr size_t kTrialItems = 512;
  constexpr int kRounds = 4;
  std::vector<float> table(static_cast<size_t>(kTrialDim) * kTrialK);
  std::vector<uint8_t> codes(kTrialItems * kTrialDim);
  std::vector<int64_t> rows(kTrialItems);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {  // xorshift64: any cheap, fixed stream will do
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (float& v : table) v = -static_cast<float>(next() % 1000) / 100.0f;
  for (uint8_t& c : codes) c = static_cast<uint8_t>(next() % kTrialK);
  for (size_t r = 0; r < kTrialItems; ++r) rows[r] = static_cast<int64_t>(r);
  for (size_t r = kTrialItems - 1; r > 0; --r) std::swap(rows[r], rows[next() % (r + 1)]);
  std::vector<float> out(kTrialItems);

  std::vector<CodeScanKernel> kernels;
  for (int i = 0; i < kCodeScanKernelCount; ++i) {
    if (CodeScanKernelSupported(static_cast<CodeScanKernel>(i))) {
      kernels.push_back(static_cast<CodeScanKernel>(i));
    }
  }
  std::vector<double> best(kernels.size(), 1e30);
  for (int round = -1; round < kRounds; ++round) {
    for (size_t i = 0; i < kernels.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      CodeScanRowsWith(kernels[i], table.data(), kTrialDim, kTrialK, codes.data(), kTrialDim,
                       rows.data(), kTrialItems, out.data());
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (round >= 0) best[i] = std::min(best[i], seconds);
    }
  }
  return kernels[std::min_element(best.begin(), best.end()) - best.begin()];
}

std::once_flag g_measured_once;
CodeScanKernel g_measured = CodeScanKernel::kBlocked;
std::once_flag g_default_once;
CodeScanKernel g_default = CodeScanKernel::kBlocked;
std::atomic<int> g_forced{-1};

}  // namespace

const char* CodeScanKernelName(CodeScanKernel kernel) { return kNames[static_cast<int>(kernel)]; }

bool ParseCodeScanKernel(const char* name, CodeScanKernel* kernel) {
  for (int i = 0; i < kCodeScanKernelCount; ++i) {
    if (std::strcmp(name, kNames[i]) == 0) {
      *kernel = static_cast<CodeScanKernel>(i);
      return true;
    }
  }
  return false;
}

bool CodeScanKernelSupported(CodeScanKernel kernel) {
  switch (kernel) {
    case CodeScanKernel::kBlocked:
    case CodeScanKernel::kInterleaved:
      return true;
#if HEDGEDB_CODE_SCAN_GATHER
    case CodeScanKernel::kAvx2Gather:
      return DetectKernelIsa() != KernelIsa::kPortable;
    case CodeScanKernel::kAvx512Gather:
    case CodeScanKernel::kAvx512GatherDims:
      return DetectKernelIsa() == KernelIsa::kAvx512;
#endif
    default:
      return false;
  }
}

CodeScanKernel MeasuredCodeScanKernel() {
  std::call_once(g_measured_once, [] { g_measured = RunTrial(); });
  return g_measured;
}

CodeScanKernel ActiveCodeScanKernel() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<CodeScanKernel>(forced);
  std::call_once(g_default_once, [] {
    const char* env = std::getenv("HEDGEDB_CODE_SCAN_KERNEL");
    CodeScanKernel kernel;
    if (env != nullptr && ParseCodeScanKernel(env, &kernel) && CodeScanKernelSupported(kernel)) {
      g_default = kernel;
    } else {
      g_default = MeasuredCodeScanKernel();
    }
  });
  return g_default;
}

bool SetCodeScanKernel(CodeScanKernel kernel) {
  if (!CodeScanKernelSupported(kernel)) return false;
  g_forced.store(static_cast<int>(kernel), std::memory_order_relaxed);
  return true;
}

void CodeScanRowsWith(CodeScanKernel kernel, const float* table, int d, int k, const uint8_t* base,
                      size_t row_stride_bytes, const int64_t* rows, size_t n, float* out) {
  switch (kernel) {
#if HEDGEDB_CODE_SCAN_GATHER
    case CodeScanKernel::kAvx2Gather:
      if (d >= 4) return avx2::ScanGatherItems(table, d, k, base, row_stride_bytes, rows, n, out);
      return ScanInterleaved(table, d, k, base, row_stride_bytes, rows, n, out);
    case CodeScanKernel::kAvx512Gather:
      if (d >= 4) return avx512::ScanGatherItems(table, d, k, base, row_stride_bytes, rows, n, out);
      return ScanInterleaved(table, d, k, base, row_stride_bytes, rows, n, out);
    case CodeScanKernel::kAvx512GatherDims:
      return avx512::ScanGatherDims(table, d, k, base, row_stride_bytes, rows, n, out);
#endif
    case CodeScanKernel::kInterleaved:
      return ScanInterleaved(table, d, k, base, row_stride_bytes, rows, n, out);
    default:
      return ScanBlocked(table, d, k, base, row_stride_bytes, rows, n, out);
  }
}

void CodeScanRows(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                  const int64_t* rows, size_t n, float* out) {
  CodeScanRowsWith(ActiveCodeScanKernel(), table, d, k, base, row_stride_bytes, rows, n, out);
}

}  // namespace query
}  // namespace hedgedb
