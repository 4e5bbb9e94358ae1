#include "query/code_scan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "query/kernels_isa.h"

// The portable kernels are here; the gathers are in code_scan_avx2.cc and
// code_scan_avx512.cc, which compile with their level's flags and run only at
// that level (common/simd_level.h).

namespace hedgedb {
namespace query {
namespace {

constexpr size_t kItemBlock = kCodeScanItemBlock;
constexpr int kDimChunk = kCodeScanDimChunk;

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

const char* const kNames[kCodeScanKernelCount] = {"blocked", "interleaved", "avx2-gather",
                                                  "avx512-gather", "avx512-gather-dims"};

// The SIMD level a kernel needs.
KernelIsa KernelLevel(CodeScanKernel kernel) {
  switch (kernel) {
    case CodeScanKernel::kAvx2Gather:
      return KernelIsa::kAvx2;
    case CodeScanKernel::kAvx512Gather:
    case CodeScanKernel::kAvx512GatherDims:
      return KernelIsa::kAvx512;
    default:
      return KernelIsa::kPortable;
  }
}

bool AllowedAt(CodeScanKernel kernel, KernelIsa level) {
  return static_cast<int>(KernelLevel(kernel)) <= static_cast<int>(level);
}

// Timed trial among the kernels of `level` and below: k = 256 (the largest,
// most cache-sensitive table), d = 64, 512 items in random order; every kernel
// runs once to warm up, then four rounds in turn (so a burst of load on the
// host hits all kernels), best time wins. About 0.5 ms in all on Zen 4 (five
// kernels, 10-20 us a scan).
CodeScanKernel RunTrial(KernelIsa level) {
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
    if (AllowedAt(static_cast<CodeScanKernel>(i), level)) {
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

// The trial's pick per SIMD level (-1: not run yet). A level's trial runs at
// the first scan at that level, so a process held at kPortable never runs a
// gather.
constexpr int kLevels = static_cast<int>(KernelIsa::kAvx512) + 1;
std::atomic<int> g_measured[kLevels] = {{-1}, {-1}, {-1}};
std::mutex g_trial_mutex;
// HEDGEDB_CODE_SCAN_KERNEL, parsed once (-1: unset or unknown).
std::once_flag g_env_once;
int g_env = -1;
// SetCodeScanKernel's kernel (-1: none).
std::atomic<int> g_forced{-1};

CodeScanKernel MeasuredAt(KernelIsa level) {
  std::atomic<int>& slot = g_measured[static_cast<int>(level)];
  int kernel = slot.load(std::memory_order_acquire);
  if (kernel < 0) {
    std::lock_guard<std::mutex> lock(g_trial_mutex);
    kernel = slot.load(std::memory_order_relaxed);
    if (kernel < 0) {
      kernel = static_cast<int>(RunTrial(level));
      slot.store(kernel, std::memory_order_release);
    }
  }
  return static_cast<CodeScanKernel>(kernel);
}

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

bool CodeScanKernelSupported(CodeScanKernel kernel) { return AllowedAt(kernel, ActiveKernelIsa()); }

CodeScanKernel MeasuredCodeScanKernel() { return MeasuredAt(ActiveKernelIsa()); }

CodeScanKernel ActiveCodeScanKernel() {
  const KernelIsa level = ActiveKernelIsa();
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced >= 0 && AllowedAt(static_cast<CodeScanKernel>(forced), level)) {
    return static_cast<CodeScanKernel>(forced);
  }
  std::call_once(g_env_once, [] {
    const char* env = std::getenv("HEDGEDB_CODE_SCAN_KERNEL");
    CodeScanKernel kernel;
    if (env != nullptr && ParseCodeScanKernel(env, &kernel)) g_env = static_cast<int>(kernel);
  });
  if (g_env >= 0 && AllowedAt(static_cast<CodeScanKernel>(g_env), level)) {
    return static_cast<CodeScanKernel>(g_env);
  }
  return MeasuredAt(level);
}

bool SetCodeScanKernel(CodeScanKernel kernel) {
  if (!CodeScanKernelSupported(kernel)) return false;
  g_forced.store(static_cast<int>(kernel), std::memory_order_relaxed);
  return true;
}

void CodeScanRowsWith(CodeScanKernel kernel, const float* table, int d, int k, const uint8_t* base,
                      size_t row_stride_bytes, const int64_t* rows, size_t n, float* out) {
  switch (kernel) {
#if HEDGEDB_SIMD_X86
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
