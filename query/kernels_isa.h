// Entry points of query's per-ISA kernel files, for the dispatch in
// kernels.cc, code_scan.cc and code_topk.cc (common/simd_level.h). The x86
// ones exist only in builds with HEDGEDB_SIMD_X86 (cmake/hedgedb_simd.cmake);
// reach them through ForActiveKernelIsa. Internal to query/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/simd_level.h"
#include "query/kernels.h"

namespace hedgedb {
namespace query {

// The scorers' kernels of one ISA (kernels_impl.h).
struct KernelTable {
  void (*mc_score_rows)(const McKernelQuery&, const void*, size_t, const int64_t*, size_t, float*);
  void (*mc_score_rows_shared)(const McKernelQuery*, size_t, const void*, size_t, const int64_t*,
                               size_t, float*, size_t);
  void (*gaussian_eta_rows)(const GaussianEtaKernelQuery&, const void*, size_t, const int64_t*,
                            size_t, float*);
  void (*mixture_eta_rows)(const MixtureEtaKernelQuery&, const void*, size_t, const int64_t*,
                           size_t, float*);
  void (*moment_sum_rows)(const MomentKernelQuery&, const void*, size_t, const int64_t*, size_t,
                          float*);
  void (*moment_sum_rows_shared)(const MomentKernelQuery*, size_t, const void*, size_t,
                                 const int64_t*, size_t, float*, size_t);
  void (*fast_exp)(const float*, size_t, float*);
  void (*fast_log)(const float*, size_t, float*);
};

namespace portable {
extern const KernelTable kKernelTable;  // kernels.cc
}  // namespace portable

// Items per block and dimensions per chunk of the DIMCO scan's blocked kernel
// and lanes-are-items gathers: the table rows of one chunk (16 x k floats,
// 16 KiB at k = 256) stay in L1 while the block's items are scanned.
constexpr size_t kCodeScanItemBlock = 128;
constexpr int kCodeScanDimChunk = 16;

// Shapes the code top-k pre-scan handles (code_topk.h).
constexpr int kCodeTopKMaxDim = 64;
constexpr int kCodeTopKMaxSymbols = 16;

namespace avx2 {
extern const KernelTable kKernelTable;  // kernels_avx2.cc
// Lanes-are-items gather (code_scan_gather_impl.h); needs d >= 4.
void ScanGatherItems(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, float* out);
}  // namespace avx2

namespace avx512 {
extern const KernelTable kKernelTable;  // kernels_avx512.cc
// As avx2::ScanGatherItems, 16 lanes.
void ScanGatherItems(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, float* out);
// Lanes are 16 dimensions of one item (code_scan.h, kAvx512GatherDims).
void ScanGatherDims(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                    const int64_t* rows, size_t n, float* out);
// The code top-k pre-scan (code_topk.cc): Q, the 8-bit table sum, of
// rows[0..n) (rows null: of rows first_row .. first_row + n - 1); writes the
// positions (in 0..n) and Q of the rows whose Q is at least `floor`, in row
// order, to positions[] and qs[] (room for n each) and returns how many.
// qtable is kCodeTopKMaxDim x kCodeTopKMaxSymbols bytes. Needs AVX-512 VBMI
// besides the kAvx512 level (CodeTopKPrescanAvailable).
size_t PrescanVbmi(const uint8_t* qtable, int d, const uint8_t* base, size_t row_stride_bytes,
                   const int64_t* rows, int64_t first_row, size_t n, uint16_t floor,
                   uint32_t* positions, uint16_t* qs);
}  // namespace avx512

}  // namespace query
}  // namespace hedgedb
