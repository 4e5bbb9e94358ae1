// Exact top-k of a DIMCO scan with a quantized pre-scan.
//
// For small codes (k <= 16 symbols, d <= 64 dimensions) at the kAvx512 SIMD
// level (common/simd_level.h) on CPUs that also have AVX-512 VBMI, every item
// is first scored with an 8-bit copy of the table, looked up in registers
// (one byte permute covers 8 dimensions of one item). Floor
// quantization with step delta puts each exact score in
// [base + delta Q, base + delta (Q + d)] (plus a float rounding slack), so only
// items whose upper bound reaches the k-th best lower bound are scored
// exactly: the result equals the top-k of a full CodeScanRows scan. The
// pre-scan selects as it goes (rows below the k-th best Q seen so far minus
// the margin are dropped in registers), so it reads each code once and keeps
// no per-item array (bench/RESULTS.md, "DIMCO top-10 at the bandwidth
// floor"). Other shapes and CPUs, or tables with non-finite entries, use the
// full scan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hedgedb {
namespace query {

struct CodeHit {
  int64_t row = 0;
  float score = 0.0f;
};

struct CodeTopKStats {
  bool prescan = false;  // the quantized pre-scan ran
  size_t rescored = 0;   // items scored exactly
};

// The `topk` best of rows[0..n) by CodeScanRows score, best first; equal
// scores keep the order of `rows`. rows null: the rows 0..n-1, and the
// pre-scan reads no row ids (8 bytes per row beside the d code bytes).
void CodeTopK(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
              const int64_t* rows, size_t n, size_t topk, std::vector<CodeHit>* out,
              CodeTopKStats* stats = nullptr);

// Whether the pre-scan runs for this shape at the active SIMD level on this
// CPU (SetKernelIsa(kPortable) turns it off).
bool CodeTopKPrescanAvailable(int d, int k);

}  // namespace query
}  // namespace hedgedb
