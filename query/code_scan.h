// DIMCO scan kernels behind CodeScanRows (kernels.h) and how one is chosen.
//
// Which kernel is fastest depends on the CPU: AVX-512 gathers win on some
// Intel Xeons and lose on AMD Zen 4 (bench/RESULTS.md). So the kernel is
// picked by timing the kernels of the process's SIMD level on a small
// synthetic scan, once per process and level, unless HEDGEDB_CODE_SCAN_KERNEL
// or SetCodeScanKernel names one (tests, benchmarks). A kernel runs only at
// or above its level (common/simd_level.h): after SetKernelIsa(kPortable)
// the scan is blocked or interleaved, whatever was named.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hedgedb {
namespace query {

enum class CodeScanKernel {
  // Portable: 128-item blocks x 16-dimension chunks, four partial sums per
  // chunk (summation order differs from ScalarCodeScore: rounding-level
  // differences).
  kBlocked,
  // Portable: same blocks, eight items in flight, each summed in dimension
  // order from 0 as ScalarCodeScore does: bitwise equal to it.
  kInterleaved,
  // x86: lanes are items (8 or 16), codes fetched four dimensions at a time
  // by a 64-bit-indexed gather, table entries by vgatherdps; each lane sums in
  // dimension order, so bitwise equal to ScalarCodeScore.
  kAvx2Gather,
  kAvx512Gather,
  // x86 AVX-512: lanes are 16 dimensions of one item, one vgatherdps per 16
  // lookups, a horizontal sum per item (summation order differs from
  // ScalarCodeScore: rounding-level differences).
  kAvx512GatherDims,
};
constexpr int kCodeScanKernelCount = 5;

const char* CodeScanKernelName(CodeScanKernel kernel);
// Parses a CodeScanKernelName; false for an unknown name.
bool ParseCodeScanKernel(const char* name, CodeScanKernel* kernel);
// Whether the kernel may run at the active SIMD level (ActiveKernelIsa):
// the gathers need kAvx2 or kAvx512, the portable kernels nothing.
bool CodeScanKernelSupported(CodeScanKernel kernel);

// Kernel CodeScanRows uses now: the one SetCodeScanKernel forced, else
// HEDGEDB_CODE_SCAN_KERNEL's, if supported at the active level; else the
// fastest of the level's timed trial (about half a millisecond, once per
// process and level, thread-safe).
CodeScanKernel ActiveCodeScanKernel();
// Kernel the active level's timed trial picked (runs it if needed), whatever
// is forced.
CodeScanKernel MeasuredCodeScanKernel();
// Forces a kernel (tests, benchmarks) for as long as the SIMD level allows
// it; false if the active level does not.
bool SetCodeScanKernel(CodeScanKernel kernel);

// The scan with an explicit kernel, which must be supported.
void CodeScanRowsWith(CodeScanKernel kernel, const float* table, int d, int k, const uint8_t* base,
                      size_t row_stride_bytes, const int64_t* rows, size_t n, float* out);

}  // namespace query
}  // namespace hedgedb
