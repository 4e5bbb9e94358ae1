#include "query/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "common/random.h"

// The x86 paths use GCC's per-function target pragmas; other compilers and
// architectures get the portable path only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HEDGEDB_KERNELS_X86 1
#include <immintrin.h>
#else
#define HEDGEDB_KERNELS_X86 0
#endif

namespace hedgedb {
namespace query {

// ---------------------------------------------------------------------------
// Portable path: plain loops over 8 lanes (the compiler may vectorise them).
namespace portable {
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
  // out[d * kLanes + l] = rows[l][offset + d] for d < count.
  static void TransposeRows(const float* const* rows, int offset, int count, float* out) {
    for (int l = 0; l < kLanes; ++l) {
      const float* src = rows[l] + offset;
      for (int d = 0; d < count; ++d) out[d * kLanes + l] = src[d];
    }
  }
};
#include "query/kernels_impl.h"
}  // namespace portable

#if HEDGEDB_KERNELS_X86
// ---------------------------------------------------------------------------
// AVX2 + FMA path: 8 lanes.
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
struct Simd {
  static constexpr int kLanes = 8;
  using V = __m256;
  static V Zero() { return _mm256_setzero_ps(); }
  static V Set1(float x) { return _mm256_set1_ps(x); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V a) { _mm256_storeu_ps(p, a); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm256_div_ps(a, b); }
  static V Min(V a, V b) { return _mm256_min_ps(a, b); }
  static V Max(V a, V b) { return _mm256_max_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Sqrt(V a) { return _mm256_sqrt_ps(a); }
  // Relative error <= 1.5 * 2^-12.
  static V RcpApprox(V a) { return _mm256_rcp_ps(a); }
  static V RsqrtApprox(V a) { return _mm256_rsqrt_ps(a); }
  static V Round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V Pow2(V n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static void TransposeRows(const float* const* rows, int offset, int count, float* out) {
    for (int d0 = 0; d0 < count; d0 += kLanes) {
      const int width = std::min(kLanes, count - d0);
      __m256 r[kLanes];
      if (width == kLanes) {
        for (int l = 0; l < kLanes; ++l) r[l] = _mm256_loadu_ps(rows[l] + offset + d0);
      } else {
        // Masked loads do not touch memory past the row.
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(width), lane);
        for (int l = 0; l < kLanes; ++l) r[l] = _mm256_maskload_ps(rows[l] + offset + d0, mask);
      }
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
      __m256 col[kLanes];
      col[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
      col[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
      col[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
      col[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
      col[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
      col[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
      col[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
      col[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
      for (int t = 0; t < width; ++t) _mm256_storeu_ps(out + (d0 + t) * kLanes, col[t]);
    }
  }
};
#include "query/kernels_impl.h"
}  // namespace avx2
#pragma GCC pop_options

// ---------------------------------------------------------------------------
// AVX-512F path: 16 lanes.
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// GCC 12 flags the deliberately undefined vectors inside avx512fintrin.h.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace avx512 {
struct Simd {
  static constexpr int kLanes = 16;
  using V = __m512;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Set1(float x) { return _mm512_set1_ps(x); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, V a) { _mm512_storeu_ps(p, a); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm512_div_ps(a, b); }
  static V Min(V a, V b) { return _mm512_min_ps(a, b); }
  static V Max(V a, V b) { return _mm512_max_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V Sqrt(V a) { return _mm512_sqrt_ps(a); }
  // Relative error < 2^-14.
  static V RcpApprox(V a) { return _mm512_rcp14_ps(a); }
  static V RsqrtApprox(V a) { return _mm512_rsqrt14_ps(a); }
  static V Round(V a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static V Pow2(V n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static void TransposeRows(const float* const* rows, int offset, int count, float* out) {
    for (int d0 = 0; d0 < count; d0 += kLanes) {
      const int width = std::min(kLanes, count - d0);
      // Masked loads do not touch memory past the row.
      const __mmask16 mask = static_cast<__mmask16>((1u << width) - 1u);
      __m512 r[kLanes];
      for (int l = 0; l < kLanes; ++l) r[l] = _mm512_maskz_loadu_ps(mask, rows[l] + offset + d0);
      // r[l] holds row l; after the three stages col[c] holds column c.
      __m512 t[kLanes];
      for (int m = 0; m < kLanes / 2; ++m) {
        t[2 * m] = _mm512_unpacklo_ps(r[2 * m], r[2 * m + 1]);
        t[2 * m + 1] = _mm512_unpackhi_ps(r[2 * m], r[2 * m + 1]);
      }
      __m512 u[kLanes];
      for (int g = 0; g < 4; ++g) {
        const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
      }
      __m512 col[kLanes];
      for (int m = 0; m < 4; ++m) {
        const __m512 v = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
        const __m512 w = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
        const __m512 x = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
        const __m512 y = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
        col[m] = _mm512_shuffle_f32x4(v, x, 0x88);
        col[8 + m] = _mm512_shuffle_f32x4(v, x, 0xDD);
        col[4 + m] = _mm512_shuffle_f32x4(w, y, 0x88);
        col[12 + m] = _mm512_shuffle_f32x4(w, y, 0xDD);
      }
      for (int c = 0; c < width; ++c) _mm512_storeu_ps(out + (d0 + c) * kLanes, col[c]);
    }
  }
};
#include "query/kernels_impl.h"
}  // namespace avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif  // HEDGEDB_KERNELS_X86

// ---------------------------------------------------------------------------
// Dispatch.
namespace {

bool CpuSupports(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kPortable:
      return true;
#if HEDGEDB_KERNELS_X86
    case KernelIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma");
#endif
    default:
      return false;
  }
}

// -1: not chosen yet.
std::atomic<int> g_active_isa{-1};

}  // namespace

const char* KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kPortable:
      return "portable";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

KernelIsa DetectKernelIsa() {
  if (CpuSupports(KernelIsa::kAvx512)) return KernelIsa::kAvx512;
  if (CpuSupports(KernelIsa::kAvx2)) return KernelIsa::kAvx2;
  return KernelIsa::kPortable;
}

KernelIsa ActiveKernelIsa() {
  int isa = g_active_isa.load(std::memory_order_relaxed);
  if (isa < 0) {
    isa = static_cast<int>(DetectKernelIsa());
    g_active_isa.store(isa, std::memory_order_relaxed);
  }
  return static_cast<KernelIsa>(isa);
}

bool SetKernelIsa(KernelIsa isa) {
  if (!CpuSupports(isa)) return false;
  g_active_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

void McScoreRows(const McKernelQuery& query, const void* base, size_t row_stride_bytes,
                 const int64_t* rows, size_t n, float* out) {
  switch (ActiveKernelIsa()) {
#if HEDGEDB_KERNELS_X86
    case KernelIsa::kAvx512:
      return avx512::McScoreRowsImpl(query, base, row_stride_bytes, rows, n, out);
    case KernelIsa::kAvx2:
      return avx2::McScoreRowsImpl(query, base, row_stride_bytes, rows, n, out);
#endif
    default:
      return portable::McScoreRowsImpl(query, base, row_stride_bytes, rows, n, out);
  }
}

void GaussianEtaRows(const GaussianEtaKernelQuery& query, const void* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, float* out) {
  switch (ActiveKernelIsa()) {
#if HEDGEDB_KERNELS_X86
    case KernelIsa::kAvx512:
      return avx512::GaussianEtaRowsImpl(query, base, row_stride_bytes, rows, n, out);
    case KernelIsa::kAvx2:
      return avx2::GaussianEtaRowsImpl(query, base, row_stride_bytes, rows, n, out);
#endif
    default:
      return portable::GaussianEtaRowsImpl(query, base, row_stride_bytes, rows, n, out);
  }
}

void MixtureEtaRows(const MixtureEtaKernelQuery& query, const void* base, size_t row_stride_bytes,
                    const int64_t* rows, size_t n, float* out) {
  switch (ActiveKernelIsa()) {
#if HEDGEDB_KERNELS_X86
    case KernelIsa::kAvx512:
      return avx512::MixtureEtaRowsImpl(query, base, row_stride_bytes, rows, n, out);
    case KernelIsa::kAvx2:
      return avx2::MixtureEtaRowsImpl(query, base, row_stride_bytes, rows, n, out);
#endif
    default:
      return portable::MixtureEtaRowsImpl(query, base, row_stride_bytes, rows, n, out);
  }
}

void FastExp(const float* x, size_t n, float* out) {
  switch (ActiveKernelIsa()) {
#if HEDGEDB_KERNELS_X86
    case KernelIsa::kAvx512:
      return avx512::FastExpImpl(x, n, out);
    case KernelIsa::kAvx2:
      return avx2::FastExpImpl(x, n, out);
#endif
    default:
      return portable::FastExpImpl(x, n, out);
  }
}

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
