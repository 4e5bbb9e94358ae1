// SIMD kernels behind the exact scorers (scorer.h), with runtime ISA dispatch.
//
// The Monte Carlo kernel, the closed-form sums (MomentSumRows), FastExp and
// FastLog have a portable C++ version (kernels.cc) and x86 versions for
// AVX2+FMA and AVX-512F (kernels_avx2.cc, kernels_avx512.cc), compiled from
// one source (kernels_impl.h) and picked on each call by the process's SIMD
// level (common/simd_level.h: ActiveKernelIsa, SetKernelIsa). Results of the ISA paths agree to float rounding; for a fixed
// path they are bitwise reproducible, and the score of a row never depends on
// which other rows are scored in the same call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/simd_level.h"

namespace hedgedb {
namespace query {

// First `count` standard normals of the stream (seed, stream): xoshiro256**
// seeded through splitmix64, Box-Muller in double precision. Prefix-stable:
// the first m numbers are the same for every count >= m.
std::vector<float> GenerateNormalBank(uint64_t seed, uint64_t stream, size_t count);
// Same numbers, memoised per thread (a few recent banks). The reference stays
// valid until this thread's next call that misses the cache; the most recently
// used bank is never the one evicted.
const std::vector<float>& CachedNormalBank(uint64_t seed, uint64_t stream, size_t count);

// Monte Carlo match probability of a prepared query against item rows
// (HIB eq. 5, stratified over mixture components).
//
// The query is given by its K samples x_i with weights (pi_c / (K/C) for the
// component c that drew sample i). Item j-th sample of component c' is
// mu_c' + sqrt(var_c') * eps_j with j in [c' * K/C, (c'+1) * K/C), weighted
// pi'_c' / (K/C). The score is sum_ij w_i w'_j sigmoid(-a ||x_i - y_j|| + b).
struct McKernelQuery {
  int dim = 0;                           // D
  int components = 1;                    // C of the items
  int samples = 0;                       // K = query samples = item samples, a multiple of C
  const float* query_samples = nullptr;  // K x D
  const float* query_weights = nullptr;  // K
  const float* item_eps = nullptr;       // K x D standard normals of the item side
  float match_a = 1.0f;
  float match_b = 0.0f;
  // Item row layout in floats: weights at weight_offset (-1: one component of
  // weight 1), component c's mean at mean_offset + c * D, variance at
  // var_offset + c * D.
  int weight_offset = -1;
  int mean_offset = 0;
  int var_offset = 0;
};

// out[r] = score of the row at base + rows[r] * row_stride_bytes.
void McScoreRows(const McKernelQuery& query, const void* base, size_t row_stride_bytes,
                 const int64_t* rows, size_t n, float* out);

// The scores of nq queries against the same n rows: out[j * out_stride + r]
// is McScoreRows(queries[j], ...)'s out[r], bitwise. The queries differ only
// in query_samples and query_weights (one plan: the same dim, components,
// samples, item_eps values, match a/b and layout). Each block of rows is read
// and transposed once for all of them, which a batch over many rows (an
// exhaustive search) needs: alone, a query pays the transposition per row.
void McScoreRowsShared(const McKernelQuery* queries, size_t nq, const void* base,
                       size_t row_stride_bytes, const int64_t* rows, size_t n, float* out,
                       size_t out_stride);

// eta = 1 - p(m | x, x) of gaussian rows (HIB eq. 9). The two samples of a
// pair differ by sd * (ea_i - eb_j), so the mean cancels and
// p = mean_ij sigmoid(-a * sqrt(sum_d var_d (ea_id - eb_jd)^2) + b).
// Lanes are sample pairs, so one row costs K^2 D / lanes FMAs, alone or in a
// batch.
struct GaussianEtaKernelQuery {
  int dim = 0;      // D
  int samples = 0;  // K per side
  // K * K rounded up to a multiple of 16 (every ISA's lane count divides it).
  int pair_stride = 0;
  // (ea_id - eb_jd)^2, d-major: pair_delta_sq[d * pair_stride + i * K + j];
  // padding pairs hold 0.
  const float* pair_delta_sq = nullptr;
  // pair_stride entries: 1 for the K * K real pairs, 0 for padding.
  const float* pair_mask = nullptr;
  float match_a = 1.0f;
  float match_b = 0.0f;
  int var_offset = 0;  // floats from the row start to the variances
};

// out[r] = eta of the row at base + rows[r] * row_stride_bytes.
void GaussianEtaRows(const GaussianEtaKernelQuery& query, const void* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, float* out);

// eta of mixture rows (any C, stratified): sample i of the first set is
// mu_c + sd_c * ea_i for its component c, sample j of the second set is
// mu_c' + sd_c' * eb_j, and p = sum_ij w_i w_j sigmoid(-a ||x_i - y_j|| + b)
// with w = pi_c / (K/C). Row layout as in McKernelQuery.
struct MixtureEtaKernelQuery {
  int dim = 0;
  int components = 1;
  int samples = 0;
  const float* first_eps = nullptr;   // K x D
  const float* second_eps = nullptr;  // K x D
  float match_a = 1.0f;
  float match_b = 0.0f;
  int weight_offset = 0;
  int mean_offset = 0;
  int var_offset = 0;
};

void MixtureEtaRows(const MixtureEtaKernelQuery& query, const void* base, size_t row_stride_bytes,
                    const int64_t* rows, size_t n, float* out);

// The closed-form scores' sums over the dimensions of gaussian rows
// (docs/concepts.md, "Scores"), one row per call of the row loop with lanes
// over dimensions, in float32:
//   kCsd:             sum_d (mu_qd - mu_d)^2 + var_d
//   kMls:             sum_d (mu_qd - mu_d)^2 / s_d + ln s_d, s_d = var_qd + var_d
//   kSquaredDistance: sum_d (mu_qd - mu_d)^2            (l2, match)
// The scorer (scorer.cc) turns a sum into the score. mls takes no logarithm
// per dimension: each lane keeps the product of the mantissas of its s_d
// (in [1, 2), renormalised every 64 factors) and the sum of their binary
// exponents, and one vectorised logarithm (FastLog) per row ends it, so
// ln prod s_d = ln(mantissa product) + (exponent sum) ln 2 is exact up to
// float rounding of the product (~2^-24 per factor) and FastLog's error.
// Each row's sum is independent of the other rows in the call.
struct MomentKernelQuery {
  enum class Sum { kCsd, kMls, kSquaredDistance };
  Sum sum = Sum::kSquaredDistance;
  int dim = 0;
  // The query's mean and variance, padded with (0, 1) to a multiple of
  // kMomentQueryPad floats, so that the padding lanes add nothing (a 0
  // difference, ln 1 = 0). var may be null for kSquaredDistance.
  const float* mean = nullptr;
  const float* var = nullptr;
  // Item row layout in floats: mean at mean_offset, variance at var_offset
  // (kCsd, kMls only).
  int mean_offset = 0;
  int var_offset = 0;
};
// Padding of MomentKernelQuery's query vectors: a multiple of every ISA's
// lane count.
constexpr int kMomentQueryPad = 16;

// out[r] = the sum of the row at base + rows[r] * row_stride_bytes.
void MomentSumRows(const MomentKernelQuery& query, const void* base, size_t row_stride_bytes,
                   const int64_t* rows, size_t n, float* out);
// MomentSumRows for nq queries of one sum over the same n rows:
// out[j * out_stride + r], bitwise each query's own numbers. The rows are read
// in L1-sized tiles that every query scores, so a batch over many rows reads
// them from memory once, not nq times.
void MomentSumRowsShared(const MomentKernelQuery* queries, size_t nq, const void* base,
                         size_t row_stride_bytes, const int64_t* rows, size_t n, float* out,
                         size_t out_stride);

// DIMCO scan: out[r] = sum_i table[i * k + code_r[i]] over the d symbols of the
// uint8 code row at base + rows[r] * row_stride_bytes. Symbols must be < k.
// The kernel is chosen per CPU by measurement (code_scan.h, code_scan.cc).
void CodeScanRows(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                  const int64_t* rows, size_t n, float* out);

// exp(x) of the kernels for each of n inputs (relative error ~1e-7 on
// [-87, 88]; inputs outside are clamped). Exposed to test its accuracy.
void FastExp(const float* x, size_t n, float* out);

// ln(x) of the kernels for each of n inputs x > 0 (normal or subnormal,
// finite): x = m 2^e with m in [sqrt(1/2), sqrt(2)), then the Cephes
// polynomial for ln m. Absolute error below 2^-23 (1 + |ln x|) (the
// kernels_test measures it). Exposed to test its accuracy.
void FastLog(const float* x, size_t n, float* out);

}  // namespace query
}  // namespace hedgedb
