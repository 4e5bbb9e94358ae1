#include "query/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "common/random.h"
#include "query/kernels_isa.h"

namespace hedgedb {
namespace query {

// ---------------------------------------------------------------------------
// Portable path: plain loops over 8 lanes (the compiler may vectorise them).
// The x86 paths are kernels_avx2.cc and kernels_avx512.cc.
namespace portable {
namespace {
struct Simd {
  static constexpr int kLanes = 8;
  struct V {
    float v[kLanes];
  };
  static V Zero() { return Set1(0.0f); }
  static V Set1(float x) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = x;
    return r;
  }
  static V Load(const float* p) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = p[l];
    return r;
  }
  static void Store(float* p, const V& a) {
    for (int l = 0; l < kLanes; ++l) p[l] = a.v[l];
  }
#define HEDGEDB_PORTABLE_BINARY(Name, expr) \
  static V Name(const V& a, const V& b) {   \
    V r;                                    \
    for (int l = 0; l < kLanes; ++l) {      \
      const float x = a.v[l], y = b.v[l];   \
      r.v[l] = (expr);                      \
    }                                       \
    return r;                               \
  }
  HEDGEDB_PORTABLE_BINARY(Add, x + y)
  HEDGEDB_PORTABLE_BINARY(Sub, x - y)
  HEDGEDB_PORTABLE_BINARY(Mul, x* y)
  HEDGEDB_PORTABLE_BINARY(Div, x / y)
  HEDGEDB_PORTABLE_BINARY(Min, x < y ? x : y)
  HEDGEDB_PORTABLE_BINARY(Max, x > y ? x : y)
#undef HEDGEDB_PORTABLE_BINARY
  static V Fma(const V& a, const V& b, const V& c) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = a.v[l] * b.v[l] + c.v[l];
    return r;
  }
  static V Sqrt(const V& a) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = std::sqrt(a.v[l]);
    return r;
  }
  // Exact here; the x86 paths return hardware estimates that RcpFast and
  // SqrtFast (kernels_impl.h) refine.
  static V RcpApprox(const V& a) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = 1.0f / a.v[l];
    return r;
  }
  static V RsqrtApprox(const V& a) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = 1.0f / std::sqrt(a.v[l]);
    return r;
  }
  static V Round(const V& a) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = std::nearbyint(a.v[l]);
    return r;
  }
  // 2^n for integral n in [-126, 127].
  static V Pow2(const V& n) {
    V r;
    for (int l = 0; l < kLanes; ++l) {
      const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n.v[l]) + 127) << 23;
      std::memcpy(&r.v[l], &bits, sizeof(float));
    }
    return r;
  }
  // The first count (< kLanes) floats at p, 0 in the other lanes; reads
  // nothing past them.
  static V LoadFirst(const float* p, int count) {
    V r = Zero();
    for (int l = 0; l < count; ++l) r.v[l] = p[l];
    return r;
  }
  static float ReduceAdd(const V& a) {
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += a.v[l];
    return sum;
  }
  // x = m 2^e with m in [1, 2), for finite x > 0 (subnormals too).
  static void Frexp(const V& x, V* m, V* e) {
    for (int l = 0; l < kLanes; ++l) {
      int exponent = 0;
      m->v[l] = 2.0f * std::frexp(x.v[l], &exponent);
      e->v[l] = static_cast<float>(exponent - 1);
    }
  }
  // out[d * kLanes + l] = rows[l][offset + d] for d < count.
  static void TransposeRows(const float* const* rows, int offset, int count, float* out) {
    for (int l = 0; l < kLanes; ++l) {
      const float* src = rows[l] + offset;
      for (int d = 0; d < count; ++d) out[d * kLanes + l] = src[d];
    }
  }
};
#include "query/kernels_impl.h"
}  // namespace
const KernelTable kKernelTable = kKernels;
}  // namespace portable

// ---------------------------------------------------------------------------
// Dispatch.
namespace {

const KernelTable& ActiveKernels() {
  return *ForActiveKernelIsa(&portable::kKernelTable, HEDGEDB_SIMD_X86_ONLY(&avx2::kKernelTable),
                             HEDGEDB_SIMD_X86_ONLY(&avx512::kKernelTable));
}

}  // namespace

void McScoreRows(const McKernelQuery& query, const void* base, size_t row_stride_bytes,
                 const int64_t* rows, size_t n, float* out) {
  ActiveKernels().mc_score_rows(query, base, row_stride_bytes, rows, n, out);
}

void McScoreRowsShared(const McKernelQuery* queries, size_t nq, const void* base,
                       size_t row_stride_bytes, const int64_t* rows, size_t n, float* out,
                       size_t out_stride) {
  ActiveKernels().mc_score_rows_shared(queries, nq, base, row_stride_bytes, rows, n, out,
                                       out_stride);
}

void GaussianEtaRows(const GaussianEtaKernelQuery& query, const void* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, float* out) {
  ActiveKernels().gaussian_eta_rows(query, base, row_stride_bytes, rows, n, out);
}

void MixtureEtaRows(const MixtureEtaKernelQuery& query, const void* base, size_t row_stride_bytes,
                    const int64_t* rows, size_t n, float* out) {
  ActiveKernels().mixture_eta_rows(query, base, row_stride_bytes, rows, n, out);
}

void MomentSumRows(const MomentKernelQuery& query, const void* base, size_t row_stride_bytes,
                   const int64_t* rows, size_t n, float* out) {
  ActiveKernels().moment_sum_rows(query, base, row_stride_bytes, rows, n, out);
}

void MomentSumRowsShared(const MomentKernelQuery* queries, size_t nq, const void* base,
                         size_t row_stride_bytes, const int64_t* rows, size_t n, float* out,
                         size_t out_stride) {
  ActiveKernels().moment_sum_rows_shared(queries, nq, base, row_stride_bytes, rows, n, out,
                                         out_stride);
}

void FastExp(const float* x, size_t n, float* out) { ActiveKernels().fast_exp(x, n, out); }

void FastLog(const float* x, size_t n, float* out) { ActiveKernels().fast_log(x, n, out); }

// ---------------------------------------------------------------------------
// Normal banks.
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// xoshiro256** (Blackman and Vigna).
class Xoshiro256 {
 public:
  Xoshiro256(uint64_t seed, uint64_t stream) {
    // Distinct (seed, stream) pairs give unrelated splitmix64 sequences.
    uint64_t mix = seed;
    const uint64_t key = SplitMix64(&mix) ^ (stream * 0xd1b54a32d192ed03ull);
    uint64_t state = key;
    for (auto& word : s_) word = SplitMix64(&state);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in (0, 1]: 53 random bits, never 0 (log in Box-Muller).
  double NextOpenUnit() { return (static_cast<double>(Next() >> 11) + 1.0) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

struct CachedBank {
  uint64_t seed = 0;
  uint64_t stream = 0;
  std::vector<float> values;
  uint64_t last_use = 0;
};

}  // namespace

std::vector<float> GenerateNormalBank(uint64_t seed, uint64_t stream, size_t count) {
  std::vector<float> out(count);
  Xoshiro256 rng(seed, stream);
  for (size_t i = 0; i < count; i += 2) {
    const double u1 = rng.NextOpenUnit();
    const double u2 = rng.NextOpenUnit();
    double z0, z1;
    BoxMuller(u1, u2, &z0, &z1);
    out[i] = static_cast<float>(z0);
    if (i + 1 < count) out[i + 1] = static_cast<float>(z1);
  }
  return out;
}

const std::vector<float>& CachedNormalBank(uint64_t seed, uint64_t stream, size_t count) {
  constexpr size_t kSlots = 8;
  thread_local std::vector<CachedBank> cache(kSlots);
  thread_local uint64_t clock = 0;
  ++clock;
  CachedBank* victim = &cache[0];
  for (auto& slot : cache) {
    if (slot.last_use != 0 && slot.seed == seed && slot.stream == stream &&
        slot.values.size() == count) {
      slot.last_use = clock;
      return slot.values;
    }
    if (slot.last_use < victim->last_use) victim = &slot;
  }
  victim->seed = seed;
  victim->stream = stream;
  victim->values = GenerateNormalBank(seed, stream, count);
  victim->last_use = clock;
  return victim->values;
}

}  // namespace query
}  // namespace hedgedb
